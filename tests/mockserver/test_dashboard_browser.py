"""The dashboard in a real headless browser: Debian's chromium, driven by selenium.

Skipped, saying why, where no chromium or chromedriver is installed; CI installs both
(``.ci/run``). The mock here guards its control API the way the control token does
(``X-Mock-Token`` on every call, ``?token=`` on the page only), so the page is seen obeying it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from flask import Flask, request

from tests.helpers import KEY, bearer, error_of, running, wait_until
from verdict_contract.core.redact import Secret
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.serve import BackgroundServer

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.common.exceptions import WebDriverException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

CHROMIUM = next(
    filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None
)
CHROMEDRIVER = shutil.which("chromedriver")
TOKEN = "dashboard-token-0123456789"

NO_BROWSER = "no headless browser: apt-get install chromium chromium-driver (CI does)"
if (CHROMIUM is None or CHROMEDRIVER is None) and os.environ.get("VERDICT_REQUIRE_BROWSER"):
    pytest.fail(f"VERDICT_REQUIRE_BROWSER is set, but {NO_BROWSER}", pytrace=False)
pytestmark = pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None, reason=NO_BROWSER)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument("--window-size=1400,1000")
    service = webdriver.ChromeService(executable_path=CHROMEDRIVER)
    try:
        driver = webdriver.Chrome(options=options, service=service)
    except WebDriverException as exc:  # installed but cannot start here: say so
        if os.environ.get("VERDICT_REQUIRE_BROWSER"):
            raise
        pytest.skip(f"chromium did not start: {exc.msg}")
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


def guarded(app: Flask) -> Flask:
    """Require the control token on the control API, as the control-protection work does."""

    @app.before_request
    def _token() -> Any:
        if not request.path.startswith("/_mock/"):
            return None
        page = request.method == "GET" and request.path == "/_mock/"
        sent = request.headers.get("X-Mock-Token") or (request.args.get("token") if page else None)
        if sent != TOKEN:
            return {"error": {"code": "forbidden", "message": "control token needed"}}, 403
        return None

    return app


@pytest.fixture(scope="module")
def mock() -> Iterator[BackgroundServer]:
    with running(guarded(create_app(Settings(api_keys=(KEY,))))) as server:
        yield server


def until(browser: Any, check: Callable[[], Any], what: str) -> None:
    assert wait_until(check, timeout=10), (
        f"{what}; the page shows:\n{browser.find_element(By.TAG_NAME, 'body').text[:2000]}"
    )


def journal_rows(browser: Any) -> list[list[str]]:
    """The journal's cells as text, read in one go (the page redraws it every second)."""
    rows: list[list[str]] = browser.execute_script(
        "return [...document.querySelectorAll('#journal tbody tr')]"
        ".map((row) => [...row.cells].map((cell) => cell.textContent))"
    )
    return rows


def open_page(browser: Any, server: BackgroundServer) -> None:
    browser.get(f"{server.base_url}/_mock/?token={TOKEN}")
    until(browser, lambda: "schema 7" in browser.find_element(By.ID, "health").text, "no health")


def test_the_token_is_needed_and_the_page_sends_it(browser: Any, mock: BackgroundServer) -> None:
    refused = httpx.get(f"{mock.base_url}/_mock/requests", timeout=5)
    assert refused.status_code == 403  # the guard is real
    open_page(browser, mock)
    assert "token" not in browser.current_url  # kept for the tab, out of the address bar
    assert not browser.find_element(By.ID, "problem").is_displayed()


def test_mint_through_the_form_then_see_the_fetch(browser: Any, mock: BackgroundServer) -> None:
    open_page(browser, mock)
    httpx.post(f"{mock.base_url}/_mock/reset", headers={"X-Mock-Token": TOKEN}, timeout=5)
    form = browser.find_element(By.ID, "mint")
    Select(form.find_element(By.NAME, "verdict")).select_by_visible_text("refused")
    Select(form.find_element(By.NAME, "conclusive")).select_by_value("true")
    form.find_element(By.NAME, "script").send_keys("503, delay 10")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    minted = browser.find_element(By.ID, "minted-id")
    until(browser, lambda: minted.text, "no minted id")
    n = minted.text
    curl = browser.find_element(By.ID, "minted-curl").text
    assert curl.startswith('curl -i -H "Authorization: Bearer $VERDICT_API_KEY" ')
    assert curl.endswith(f"'{mock.base_url}/e?n={n}'")

    with httpx.Client(base_url=mock.base_url, headers=bearer(), timeout=5) as client:
        first = client.get("/e", params={"n": n})
        assert error_of(first.status_code, first.headers["content-type"], first.content)
        second = client.get("/e", params={"n": n})
    assert (first.status_code, second.status_code) == (503, 200)
    assert second.json()["verdict"] == "refused"
    assert second.json()["conclusive"] is True

    until(browser, lambda: len(journal_rows(browser)) == 2, "the fetches are not in the journal")
    newest, oldest = journal_rows(browser)
    assert (newest[2], newest[3], newest[4]) == ("200", n, "verdict")  # newest first
    assert (oldest[2], oldest[4]) == ("503", "scripted")
    assert float(newest[5]) >= 10  # the scripted delay, in milliseconds
    minted_rows = browser.find_elements(By.XPATH, "//table[@id='sessions']//td[text()='minted']")
    assert len(minted_rows) >= 1


def test_an_impossible_mint_is_explained(browser: Any, mock: BackgroundServer) -> None:
    open_page(browser, mock)
    form = browser.find_element(By.ID, "mint")
    Select(form.find_element(By.NAME, "verdict")).select_by_visible_text("disputed")
    Select(form.find_element(By.NAME, "conclusive")).select_by_value("true")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    problem = browser.find_element(By.ID, "mint-problem")
    until(browser, lambda: problem.text, "no problem shown")
    assert problem.text.startswith("422: ")
    assert "never conclusive" in problem.text


def test_markup_in_the_data_is_shown_as_text(browser: Any, mock: BackgroundServer) -> None:
    open_page(browser, mock)
    id_markup = "<img src=x onerror=\"document.title='pwned'\">"
    header_markup = "<script>1</script>"  # within the journal's 20 characters of scheme
    httpx.get(
        f"{mock.base_url}/e",
        params={"n": id_markup},
        headers={"Authorization": f"{header_markup} {KEY}"},
        timeout=5,
    )
    until(
        browser,
        lambda: any(row[3] == id_markup for row in journal_rows(browser)),
        "the id is not shown as text",
    )
    row = next(row for row in journal_rows(browser) if row[3] == id_markup)
    assert row[8] == f"{header_markup} …{KEY[-4:]}"  # the scheme as sent, the key masked
    table = browser.find_element(By.ID, "journal")
    assert table.find_elements(By.TAG_NAME, "img") == []
    assert table.find_elements(By.TAG_NAME, "script") == []
    assert browser.title == "verdict-mock"


def test_filters_and_reset(browser: Any, mock: BackgroundServer) -> None:
    httpx.post(f"{mock.base_url}/_mock/reset", headers={"X-Mock-Token": TOKEN}, timeout=5)
    open_page(browser, mock)
    with httpx.Client(base_url=mock.base_url, headers=bearer(), timeout=5) as client:
        client.get("/e", params={"n": "demo-refused"})
        client.get("/e", params={"n": "no-such-id"})
    until(browser, lambda: [r[3] for r in journal_rows(browser)][:1] == ["no-such-id"], "no fetch")
    browser.find_element(By.ID, "filter-status").send_keys("404")
    assert {(row[2], row[3]) for row in journal_rows(browser)} == {("404", "no-such-id")}
    browser.find_element(By.ID, "filter-status").clear()
    browser.find_element(By.ID, "filter-id").send_keys("demo-ref")
    assert {row[3] for row in journal_rows(browser)} == {"demo-refused"}
    browser.find_element(By.ID, "reset").click()
    until(browser, lambda: journal_rows(browser) == [], "reset did not empty the journal")


def test_the_breach_counter_while_proxying(browser: Any) -> None:
    with running(create_app(Settings(api_keys=(KEY,)))) as upstream:
        n = httpx.post(
            f"{upstream.base_url}/_mock/sessions",
            json={"allow_invalid": True, "fields": {"schema": 6}},
            timeout=5,
        ).json()["n"]
        proxying = guarded(
            create_app(Settings(proxy_to=upstream.base_url, upstream_key=Secret(KEY)))
        )
        with running(proxying) as proxy:
            open_page(browser, proxy)
            local = {"Authorization": "Bearer verdict-mock-local-key"}
            httpx.get(f"{proxy.base_url}/e", params={"n": n}, headers=local, timeout=5)
            counter = browser.find_element(By.ID, "proxy")
            until(browser, lambda: "1 of 1 answers" in counter.text, "no breach counter")
            assert counter.text.startswith(f"proxying to {upstream.base_url}")
            assert not browser.find_element(By.ID, "mint-section").is_displayed()  # not served
            until(
                browser,
                lambda: any("schema_version" in row[7] for row in journal_rows(browser)),
                "no violation in the journal",
            )
            assert KEY not in browser.find_element(By.TAG_NAME, "body").text
