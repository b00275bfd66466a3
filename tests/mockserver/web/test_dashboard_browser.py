"""The dashboard in a real headless browser: Debian's chromium, driven by selenium.

Skipped, saying why, where no chromium or chromedriver is installed; CI installs both
(``.ci/run``). The mock here has a control token (``--control-token``): the page is opened once
with ``?token=``, and from then on works by the cookie that visit set, as a person's browser does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import KEY, bearer, error_of, running, wait_until
from verdict_contract.core.redact import Secret
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.testing.background import BackgroundServer

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


@pytest.fixture(scope="module")
def mock() -> Iterator[BackgroundServer]:
    with running(create_app(Settings(api_keys=(KEY,), control_token=Secret(TOKEN)))) as server:
        yield server


def until(browser: Any, check: Callable[[], Any], what: str) -> None:
    assert wait_until(check), (
        f"{what}; the page shows:\n{browser.find_element(By.TAG_NAME, 'body').text[:2000]}"
    )


def journal_rows(browser: Any) -> list[list[str]]:
    """The journal's cells as text, read in one go (the page redraws it every second)."""
    rows: list[list[str]] = browser.execute_script(
        "return [...document.querySelectorAll('#journal tbody tr')]"
        ".map((row) => [...row.cells].map((cell) => cell.dataset.id ?? cell.textContent))"
    )
    return rows  # an id cell as its whole id (the page may show it shortened)


def open_page(browser: Any, server: BackgroundServer) -> None:
    browser.get(f"{server.base_url}/_mock/?token={TOKEN}")
    until(browser, lambda: "schema 7" in browser.find_element(By.ID, "health").text, "no health")


def test_the_token_is_needed_and_the_page_sends_it(browser: Any, mock: BackgroundServer) -> None:
    refused = httpx.get(f"{mock.base_url}/_mock/requests", timeout=5)
    assert refused.status_code == 401  # the guard is real
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
    assert curl.startswith('curl -i -H "Authorization: Bearer $VERDICT_API_KEY" ')  # KEY: its own
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
    header_markup = "<script>1</script>"  # no scheme's letters: masked with the key
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
    assert row[8] == f"…{KEY[-4:]}"
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
        proxying = create_app(
            Settings(
                proxy_to=upstream.base_url, upstream_key=Secret(KEY), control_token=Secret(TOKEN)
            )
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


# --- a newcomer's first hour: the token by cookie, a quiet table, short ids, one clock -------


def polls(browser: Any) -> int:
    """How many times the page has polled the mock (it counts them for tests)."""
    return int(browser.execute_script("return document.documentElement.dataset.polls || '0'"))


def wait_polls(browser: Any, count: int) -> None:
    start = polls(browser)
    until(browser, lambda: polls(browser) >= start + count, f"{count} polls did not happen")


def test_reload_new_tab_and_bookmark_work_after_one_visit_with_the_token(
    browser: Any, mock: BackgroundServer
) -> None:
    browser.get(f"{mock.base_url}/_mock/health")  # on the mock's origin, to forget its cookies
    browser.delete_all_cookies()
    browser.get(f"{mock.base_url}/_mock/")  # a bookmark, before any visit with the token
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "The dashboard needs this mock's control token" in body
    assert "/_mock/?token=<the control token> once" in body

    open_page(browser, mock)
    assert browser.current_url == f"{mock.base_url}/_mock/"  # the token left the address bar
    (cookie,) = browser.get_cookies()
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert TOKEN not in cookie["value"]
    assert browser.execute_script("return document.cookie") == ""  # no script reads it

    def healthy() -> bool:
        return "schema 7" in browser.find_element(By.ID, "health").text

    browser.refresh()  # F5
    until(browser, healthy, "a reload lost the dashboard")
    browser.switch_to.new_window("tab")
    try:
        browser.get(f"{mock.base_url}/_mock/")  # a new tab, or a bookmark of /_mock/
        until(browser, healthy, "a new tab lost the dashboard")
        assert not browser.find_element(By.ID, "problem").is_displayed()
        assert "token" not in browser.current_url
    finally:
        browser.close()
        browser.switch_to.window(browser.window_handles[0])


def test_the_journal_is_not_redrawn_without_new_traffic(
    browser: Any, mock: BackgroundServer
) -> None:
    httpx.post(f"{mock.base_url}/_mock/reset", headers={"X-Mock-Token": TOKEN}, timeout=5)
    open_page(browser, mock)
    httpx.get(f"{mock.base_url}/e", params={"n": "demo-refused"}, headers=bearer(), timeout=5)
    until(browser, lambda: len(journal_rows(browser)) == 1, "no row")
    selected = browser.execute_script(
        "const row = document.querySelector('#journal tbody tr'); row.dataset.mark = 'kept';"
        "const range = document.createRange(); range.selectNodeContents(row.cells[3]);"
        "getSelection().removeAllRanges(); getSelection().addRange(range);"
        "return getSelection().toString();"
    )
    assert selected == "demo-refused"
    wait_polls(browser, 3)  # three polls of an unchanged journal
    assert (
        browser.execute_script("return document.querySelector('#journal tbody tr').dataset.mark")
        == "kept"
    )
    assert browser.execute_script("return getSelection().toString()") == "demo-refused"

    httpx.get(f"{mock.base_url}/e", params={"n": "demo-disputed"}, headers=bearer(), timeout=5)
    until(browser, lambda: len(journal_rows(browser)) == 2, "new traffic was not drawn")


def test_a_long_id_is_shortened_with_a_button_that_copies_it(
    browser: Any, mock: BackgroundServer
) -> None:
    n = httpx.post(
        f"{mock.base_url}/_mock/sessions", headers={"X-Mock-Token": TOKEN}, json={}, timeout=5
    ).json()["n"]
    assert len(n) > 40
    open_page(browser, mock)
    browser.execute_cdp_cmd(
        "Browser.grantPermissions",
        {"origin": mock.base_url, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]},
    )
    httpx.get(f"{mock.base_url}/e", params={"n": n}, headers=bearer(), timeout=5)
    until(browser, lambda: any(row[3] == n for row in journal_rows(browser)), "no row")
    cell = browser.find_element(By.CSS_SELECTOR, f"#journal td.id[data-id='{n}']")
    shown = cell.find_element(By.CLASS_NAME, "id-text")
    assert shown.text == f"{n[:12]}…{n[-8:]}"
    assert shown.get_attribute("title") == n
    button = cell.find_element(By.TAG_NAME, "button")
    button.click()
    until(browser, lambda: button.text == "copied", "the button did not copy")
    pasted = browser.execute_async_script(
        "navigator.clipboard.readText().then(arguments[0], (e) => arguments[0]('! ' + e))"
    )
    assert pasted == n
    short = browser.find_element(By.CSS_SELECTOR, "#sessions td.id[data-id='demo-refused']")
    assert short.text == "demo-refused"  # a short id in full, no button
    assert short.find_elements(By.TAG_NAME, "button") == []


def test_one_clock_local_time_with_utc_on_hover(browser: Any, mock: BackgroundServer) -> None:
    browser.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "Asia/Kolkata"})
    try:
        httpx.post(
            f"{mock.base_url}/_mock/sessions", headers={"X-Mock-Token": TOKEN}, json={}, timeout=5
        )
        open_page(browser, mock)
        form = browser.find_element(By.ID, "mint")
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        until(browser, lambda: browser.find_element(By.ID, "minted-id").text, "no mint")
        httpx.get(f"{mock.base_url}/e", params={"n": "demo-refused"}, headers=bearer(), timeout=5)
        until(browser, lambda: journal_rows(browser), "no row")
        cells = browser.execute_script(
            "return [...document.querySelectorAll("
            "'#journal tbody td:first-child, #sessions tbody td[title$=\"(UTC)\"]')]"
            ".map((td) => [td.textContent, td.title])"
        )
        assert len(cells) >= 2  # a journal time and a minted session's expiry
        for text, title in cells:
            assert title.endswith("Z (UTC)"), title
            instant = title.removesuffix(" (UTC)")
            local = browser.execute_script(
                "const d = new Date(arguments[0]);"
                "return [d.toLocaleTimeString(), d.toLocaleString()];",
                instant,
            )
            assert text in local  # the local clock (India: UTC+5:30), never the UTC one
            shown = re.search(r"(\d{1,2}):(\d\d):\d\d", text)  # its hour and minute (not
            assert shown is not None  # a substring: 7:13:43 PM holds 13:43, the UTC 13:43:..)
            utc = (int(instant[11:13]) % 12, instant[14:16])
            assert (int(shown[1]) % 12, shown[2]) != utc
        assert "+00:00" not in browser.find_element(By.ID, "sessions").text
    finally:
        browser.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": ""})


def test_a_reset_shows_no_status(browser: Any, mock: BackgroundServer) -> None:
    n = httpx.post(
        f"{mock.base_url}/_mock/sessions",
        headers={"X-Mock-Token": TOKEN},
        json={"script": ["reset"]},
        timeout=5,
    ).json()["n"]
    open_page(browser, mock)
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{mock.base_url}/e", params={"n": n}, headers=bearer(), timeout=5)
    until(browser, lambda: any(r[3] == n and r[6] == "reset" for r in journal_rows(browser)), "")
    cell = browser.find_element(By.XPATH, f"//td[@data-id='{n}']/preceding-sibling::td[1]")
    assert cell.text == "—"
    assert cell.get_attribute("title") == "no answer: the client got no status line"


def test_the_script_hint_explains_the_short_syntax(browser: Any, mock: BackgroundServer) -> None:
    open_page(browser, mock)
    hint = browser.find_element(By.ID, "script-help").text
    for said in ("401, 404, 429, 500, 503", "malformed, reset, truncated", "delay MS", "418"):
        assert said in hint
    form = browser.find_element(By.ID, "mint")
    field = form.find_element(By.NAME, "script")
    field.send_keys("418, delay 5, 503")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    until(browser, lambda: browser.find_element(By.ID, "minted-id").text, "no mint")
    n = browser.find_element(By.ID, "minted-id").text
    with httpx.Client(base_url=mock.base_url, headers=bearer(), timeout=5) as client:
        statuses = [client.get("/e", params={"n": n}).status_code for _ in range(3)]
    assert statuses == [418, 200, 503]  # the delay step answers normally, after waiting
    field.clear()
    field.send_keys("boom")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    problem = browser.find_element(By.ID, "mint-problem")
    until(browser, lambda: problem.text, "no problem shown")
    assert '{"status": N, "headers": {...}, "delay_ms": N}' in problem.text


def curl_copies(browser: Any) -> list[str]:
    """What the sessions' "copy curl" buttons copy."""
    lines: list[str] = browser.execute_script(
        "return [...document.querySelectorAll('#sessions button.copy')]"
        ".map((b) => b.dataset.copy).filter((text) => text.startsWith('curl '))"
    )
    return lines


def test_curl_lines_print_the_public_key_or_say_where_the_variable_comes_from(
    browser: Any, mock: BackgroundServer
) -> None:
    open_page(browser, mock)  # this mock's key is its own (KEY)
    until(browser, lambda: browser.find_element(By.ID, "key-note").is_displayed(), "no key note")
    note = browser.find_element(By.ID, "key-note").text
    assert "$VERDICT_API_KEY" in note
    assert "--api-key" in note
    # the sessions' list is drawn after the key note (its own fetch): wait for it
    until(browser, lambda: len(curl_copies(browser)) >= 10, "no curl line per demo session")
    copies = [c for c in curl_copies(browser) if c]
    assert len(copies) >= 10  # one per demo session at least
    assert all('"Authorization: Bearer $VERDICT_API_KEY"' in c for c in copies)
    assert all(KEY not in c for c in copies)
    with running(create_app(Settings())) as public:  # the default, public key
        browser.get(f"{public.base_url}/_mock/")
        until(browser, lambda: curl_copies(browser), "no curl lines")
        assert not browser.find_element(By.ID, "key-note").is_displayed()
        line = curl_copies(browser)[0]
        assert line.startswith("curl -i -H 'Authorization: Bearer verdict-mock-local-key' ")


def test_a_rejected_scenario_edit_shows_on_the_dashboard(browser: Any, tmp_path: Any) -> None:
    from verdict_contract.mockserver.model.scenario import FileWatcher, load_scenario
    from verdict_contract.mockserver.web.answers import state_of

    path = tmp_path / "team.yaml"
    path.write_text("sessions:\n  alpha: {verdict: refused}\n", encoding="utf-8")
    app = create_app(Settings(scenario=path))
    state = state_of(app)
    watcher = FileWatcher(
        path, load_scenario, state.apply, interval=0.02, report=state.report_scenario
    )
    with running(app) as server:
        watcher.start()
        try:
            browser.get(f"{server.base_url}/_mock/")
            shown = browser.find_element(By.ID, "scenario-problem")
            assert not shown.is_displayed()
            path.write_text("sessions:\n  alpha: {verdict: nope}\n", encoding="utf-8")
            until(browser, shown.is_displayed, "the rejected edit is not shown")
            assert f"{path}:2:20: sessions.alpha.verdict must be one of" in shown.text
            assert "the previous one is still served" in shown.text
        finally:
            watcher.stop()


# --- a page of another origin against the journal ----------------------------------------------

ATTACK_PAGE = """<!doctype html><title>attack</title><script>
const mock = new URL(location.href).searchParams.get("mock");
const sends = [];
for (let i = 0; i < 1100; i++) {
  // what any page can send: no-cors, no key; half to unknown paths, half keyless to /e
  const url = i % 2 ? `${mock}/x${i}` : `${mock}/e?n=flood${i}`;
  sends.push(fetch(url, {mode: "no-cors"}).catch(() => null));
}
Promise.all(sends).then(() => { document.title = "done"; });
</script>"""


@pytest.fixture
def attacker() -> Iterator[str]:
    """A page on another local origin (another port): the attacker's, served for the test."""
    import http.server
    import threading

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = ATTACK_PAGE.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            """Quiet."""

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_a_page_of_another_origin_cannot_wipe_the_journal(
    browser: Any, mock: BackgroundServer, attacker: str
) -> None:
    """1,100 no-cors fetches from a page in the developer's browser leave every real entry."""
    token = {"X-Mock-Token": TOKEN}
    with httpx.Client(base_url=mock.base_url, timeout=10) as http:
        assert http.post("/_mock/reset", headers=token).status_code == 204
        real = [f"real-{index}" for index in range(3)]
        for n in real:
            assert http.get("/e", params={"n": n}, headers=bearer()).status_code == 404
        browser.get(f"{attacker}?mock={mock.base_url}")
        until(browser, lambda: browser.title == "done", "the attack page did not finish")
        entries = http.get("/_mock/requests", headers=token).json()
    assert [e["n"] for e in entries if e["n"] in real] == real  # every real entry is still there
    flood = [e for e in entries if e["n"] not in real]
    assert flood, "the page's requests reached the mock (else the test proves nothing)"
    assert len(flood) <= 100  # in their own ring, bounded
    assert {e["status"] for e in flood} <= {401, 404}


def coverage_rows(browser: Any) -> dict[str, str]:
    """The coverage panel's rows as behaviour id -> count, read in one go."""
    rows: dict[str, str] = browser.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('#coverage tbody tr')]"
        ".map((row) => [row.dataset.behaviour, row.cells[1].textContent]))"
    )
    return rows


def test_the_coverage_panel_shows_what_was_met_and_the_habits(
    browser: Any, mock: BackgroundServer
) -> None:
    open_page(browser, mock)
    httpx.post(f"{mock.base_url}/_mock/reset", headers={"X-Mock-Token": TOKEN}, timeout=5)
    until(browser, lambda: coverage_rows(browser).get("auth.missing") == "0", "no empty panel")
    made = httpx.post(
        f"{mock.base_url}/_mock/sessions",
        json={"verdict": "disputed", "script": [{"status": 503, "delay_ms": 5}]},
        headers={"X-Mock-Token": TOKEN},
        timeout=5,
    )
    n = made.json()["n"]
    with httpx.Client(base_url=mock.base_url, timeout=5) as client:
        for _ in range(3):  # a slow 503, the verdict, the verdict again (a refetch)
            client.get("/e", params={"n": n}, headers=bearer())
        client.get("/e", params={"n": n})  # no key: 401
    expected = {"verdict.disputed": "2", "status.5xx": "1", "slow": "1", "auth.missing": "1"}

    def shown() -> bool:
        rows = coverage_rows(browser)
        return all(rows.get(b) == count for b, count in expected.items())

    until(browser, shown, "the panel does not show the requests met")
    rows = coverage_rows(browser)
    assert {b for b, count in rows.items() if count != "0"} == set(expected)
    assert len(rows) == 21
    summary = browser.find_element(By.ID, "coverage-summary").text
    assert summary.startswith("4 of 21 behaviours met by the 4 requests")
    never = browser.find_element(By.ID, "coverage-never").text
    assert never.startswith("never met (17): verdict.contradicted.conclusive")
    assert "status.5xx" not in never
    (habit,) = browser.find_elements(By.CSS_SELECTOR, "#coverage-habits li")
    assert habit.get_attribute("data-habit") == "refetch"
    assert n not in habit.text
    assert "fetched again after a 200" in habit.text


def test_a_tenants_dashboard_shows_its_own_journal_only(browser: Any, tmp_path: Path) -> None:
    pay, risk = "pay-token-0123456789ab", "risk-token-0123456789a"
    tenants = {
        "pay": {"control_token": pay, "api_keys": ["pay-key-0001"]},
        "risk": {"control_token": risk, "api_keys": ["risk-key-0001"]},
    }
    (tmp_path / "tenants.json").write_text(json.dumps({"tenants": tenants}))
    settings = Settings(
        api_keys=(KEY,), control_token=Secret(TOKEN), tenants=tmp_path / "tenants.json"
    )
    with running(create_app(settings)) as server:
        browser.get(f"{server.base_url}/_mock/health")  # on the mock's origin: forget cookies
        browser.delete_all_cookies()
        with httpx.Client(base_url=server.base_url, timeout=5) as client:
            client.get("/e", params={"n": "demo-refused"}, headers=bearer("pay-key-0001"))
            client.get("/e", params={"n": "demo-disputed"}, headers=bearer("risk-key-0001"))
        browser.get(f"{server.base_url}/_mock/?token={pay}")
        health = browser.find_element(By.ID, "health")
        until(browser, lambda: health.text.startswith("tenant pay · schema 7"), "no tenant")
        until(browser, lambda: len(journal_rows(browser)) == 1, "not pay's journal alone")
        assert journal_rows(browser)[0][3] == "demo-refused"
        browser.delete_all_cookies()
