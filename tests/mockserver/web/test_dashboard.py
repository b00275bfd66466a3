"""mockserver.dashboard: the page at /_mock/, over real HTTP (the browser tests are beside it)."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterator
from importlib.resources import files

import httpx
import pytest

from tests.helpers import running
from verdict_contract.mockserver import Settings, create_app


@pytest.fixture(scope="module")
def page() -> Iterator[httpx.Response]:
    with running(create_app(Settings())) as server:
        yield httpx.get(f"{server.base_url}/_mock/", timeout=5)


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_page_is_served_with_a_strict_policy(page: httpx.Response) -> None:
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["referrer-policy"] == "no-referrer"  # ?token= never leaves in a Referer
    assert page.headers["x-content-type-options"] == "nosniff"
    policy = dict(
        part.strip().split(" ", 1) for part in page.headers["content-security-policy"].split(";")
    )
    assert policy["default-src"] == "'none'"
    assert policy["connect-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'"
    (script,) = re.findall(r"<script>(.*?)</script>", page.text, re.S)
    (style,) = re.findall(r"<style>(.*?)</style>", page.text, re.S)
    assert policy["script-src"] == _sha256(script)  # exactly the page's own script, nothing else
    assert policy["style-src"] == _sha256(style)
    assert "unsafe-inline" not in page.headers["content-security-policy"]


def test_the_page_fetches_nothing_from_elsewhere(page: httpx.Response) -> None:
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page.text)
    assert "@import" not in page.text
    assert "{{" not in page.text  # every placeholder filled


def test_the_script_never_parses_data_as_html() -> None:
    script = (files("verdict_contract.mockserver.web") / "static" / "dashboard.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script
    assert "textContent" in script


def test_the_page_is_part_of_the_control_api() -> None:
    app = create_app(Settings())
    assert app.view_functions["control.dashboard"]  # under the control API's protections
    off = create_app(Settings(control=False))
    with running(off) as server:
        assert httpx.get(f"{server.base_url}/_mock/", timeout=5).status_code == 404


def test_health_has_no_proxy_counters_without_a_proxy() -> None:
    with running(create_app(Settings())) as server:
        health = httpx.get(f"{server.base_url}/_mock/health", timeout=5).json()
    assert health["status"] == "ok"
    assert "proxy" not in health


def test_the_script_asks_only_its_own_origin() -> None:
    script = (files("verdict_contract.mockserver.web") / "static" / "dashboard.js").read_text()
    assert script.count("fetch(") == 1  # one place sends requests, adding the token header
    called = re.findall(r"""(?:json|act)\(\s*["']([^"']*)["']""", script)
    assert set(called) == {"requests", "health", "sessions", "reset", "coverage"}  # relative
