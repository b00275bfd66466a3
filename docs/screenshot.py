"""Make the pictures of the dashboard (docs/mock.md, docs/proxy.md), in headless chromium.

``python docs/screenshot.py`` (needs chromium, chromium-driver and selenium, as the browser tests
do) writes ``docs/dashboard.png``: the mock after a few calls (one answered by a scripted
``reset``, shown with no status, as the page shows it) and a session minted through the form;
and ``docs/dashboard-proxy.png``: a proxy in front of the mock, one of whose sessions breaks the
contract on purpose.
"""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path
from typing import Any

import httpx
from selenium import webdriver
from selenium.webdriver.support.ui import WebDriverWait

from verdict_contract.core.redact import Secret
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.testing.background import BackgroundServer

TEAM_KEY = "team-key-0123456789abcdef"
LOCAL = {"Authorization": "Bearer verdict-mock-local-key"}
HERE = Path(__file__).parent


def fetch(server: BackgroundServer, *ids: str) -> None:
    for n in ids:
        with suppress(httpx.HTTPError):  # the scripted faults
            httpx.get(f"{server.base_url}/e", params={"n": n}, headers=LOCAL, timeout=15)


def shoot(browser: Any, server: BackgroundServer, name: str, mint: bool = False) -> None:
    browser.get(f"{server.base_url}/_mock/")
    if mint:
        form = browser.find_element("id", "mint")
        form.find_element("name", "verdict").send_keys("contradicted")
        form.find_element("name", "script").send_keys("429, reset")
        form.find_element("css selector", "button[type=submit]").click()
    WebDriverWait(browser, 10).until(  # two polls of the journal and health: all drawn
        lambda page: (
            int(page.execute_script("return document.documentElement.dataset.polls||0")) >= 2
        )
    )
    browser.execute_script("window.scrollTo(0, 0)")  # the form's button scrolled it down
    browser.save_screenshot(str(HERE / name))


def main() -> None:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--window-size=1400,1000"):
        options.add_argument(argument)
    service = webdriver.ChromeService(executable_path="/usr/bin/chromedriver")
    browser = webdriver.Chrome(options=options, service=service)
    mock = BackgroundServer(create_app(Settings())).start()
    upstream = BackgroundServer(create_app(Settings(api_keys=(TEAM_KEY,)))).start()
    proxy_settings = Settings(proxy_to=upstream.base_url, upstream_key=Secret(TEAM_KEY))
    proxy = BackgroundServer(create_app(proxy_settings)).start()
    try:
        minting = httpx.post(f"{mock.base_url}/_mock/sessions", json={"script": [503, "reset"]})
        flaky = minting.json()["n"]
        fetch(mock, "demo-contradicted", "no-such-session", flaky, flaky, flaky, "demo-malformed")
        shoot(browser, mock, "dashboard.png", mint=True)

        mint = f"{upstream.base_url}/_mock/sessions"
        broken = httpx.post(mint, json={"allow_invalid": True, "fields": {"schema": 6}}).json()
        failing = httpx.post(mint, json={"verdict": "refused", "script": [503]}).json()
        ids = ("demo-contradicted", "demo-refused", broken["n"], "no-such-session")
        fetch(proxy, *ids, failing["n"], failing["n"])
        shoot(browser, proxy, "dashboard-proxy.png")
    finally:
        browser.quit()
        for server in (proxy, upstream, mock):
            server.stop()


if __name__ == "__main__":
    main()
