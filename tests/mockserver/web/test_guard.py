"""mockserver.guard: the control API refuses foreign Hosts, other origins, and missing tokens."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest

from tests.helpers import KEY, bearer, error_of, running, wait_until
from verdict_contract.core.hosts import is_loopback
from verdict_contract.core.redact import Secret
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.web.guard import (
    _proxied_without_token,
    exposure_warning,
    host_allowed,
    host_name,
    origin_allowed,
)
from verdict_contract.testing.background import BackgroundServer

TOKEN = "control-token-0123456789abcdef"

CONTROL_CALLS = [
    ("POST", "/_mock/sessions"),
    ("GET", "/_mock/sessions"),
    ("GET", "/_mock/requests"),
    ("GET", "/_mock/coverage"),
    ("DELETE", "/_mock/requests"),
    ("POST", "/_mock/reset"),
    ("GET", "/_mock/health"),
    ("GET", "/_mock/openapi.json"),
]


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with running(create_app(Settings(api_keys=(KEY,)))) as background:
        yield background


@pytest.fixture(scope="module")
def guarded() -> Iterator[BackgroundServer]:
    settings = Settings(api_keys=(KEY,), control_token=Secret(TOKEN))
    with running(create_app(settings)) as background:
        yield background


def refused(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    error = error_of(response.status_code, response.headers.get("content-type"), response.content)
    assert error["code"] == code
    message: str = error["message"]
    return message


# --- pure checks ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("app.localhost", True),
        ("127.0.0.1", True),
        ("127.3.4.5", True),
        ("[::1]", True),
        ("::1", True),
        ("0.0.0.0", False),
        ("192.168.1.2", False),
        ("localhost.evil.example", False),
        ("evil.example", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("header", "name"),
    [("127.0.0.1:8080", "127.0.0.1"), ("[::1]:80", "[::1]"), ("Evil.Example", "evil.example")],
)
def test_host_name(header: str, name: str) -> None:
    assert host_name(header) == name


def test_host_check_applies_when_bound_to_loopback_or_given_names() -> None:
    assert host_allowed("localhost:8080", Settings())
    assert not host_allowed("evil.example:8080", Settings())
    assert host_allowed("evil.example", Settings(host="0.0.0.0"))
    assert host_allowed("mock.test", Settings(allowed_hosts=("mock.test",)))
    assert not host_allowed("evil.example", Settings(host="0.0.0.0", allowed_hosts=("mock.test",)))


def test_origin_check() -> None:
    assert origin_allowed(None, "127.0.0.1:8080")
    assert origin_allowed("http://127.0.0.1:8080", "127.0.0.1:8080")
    assert not origin_allowed("http://evil.example", "127.0.0.1:8080")
    assert not origin_allowed("null", "127.0.0.1:8080")
    assert not origin_allowed("http://127.0.0.1:9999", "127.0.0.1:8080")


def test_exposure_warning_only_for_an_open_network_bind() -> None:
    assert exposure_warning(Settings()) is None
    wide = exposure_warning(Settings(host="0.0.0.0"))
    assert wide is not None
    assert "--control-token" in wide
    assert exposure_warning(Settings(host="0.0.0.0", control_token=Secret(TOKEN))) is None
    assert exposure_warning(Settings(host="0.0.0.0", control=False)) is None


def test_the_token_is_masked_in_the_settings_repr() -> None:
    text = repr(Settings(control_token=Secret(TOKEN)))
    assert TOKEN not in text
    assert TOKEN[:-4] not in text


# --- over real HTTP ---------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), CONTROL_CALLS)
def test_a_foreign_host_is_refused_on_every_control_call(
    server: BackgroundServer, method: str, path: str
) -> None:
    with httpx.Client(base_url=server.base_url, timeout=10) as http:
        response = http.request(method, path, headers={"Host": "evil.example:8080"})
        message = refused(response, 421, "misdirected_request")
        assert "'evil.example'" in message
        # the same call with a loopback name goes through
        assert http.request(method, path, headers={"Host": "localhost"}).status_code < 400


def test_a_foreign_host_still_reaches_e(server: BackgroundServer) -> None:
    # /e is the API itself, called by name from anywhere; only the control API is guarded
    with httpx.Client(base_url=server.base_url, timeout=10) as http:
        response = http.get(
            "/e", params={"n": "demo-refused"}, headers={**bearer(), "Host": "api.example"}
        )
    assert response.status_code == 200


@pytest.mark.parametrize(("method", "path"), CONTROL_CALLS)
def test_another_origin_is_refused_on_every_control_call(
    server: BackgroundServer, method: str, path: str
) -> None:
    with httpx.Client(base_url=server.base_url, timeout=10) as http:
        for origin in ("http://evil.example", "null"):
            response = http.request(method, path, headers={"Origin": origin})
            assert origin in refused(response, 403, "cross_origin_refused")
        own = http.request(method, path, headers={"Origin": server.base_url})
        assert own.status_code < 400


def test_a_control_call_through_a_proxy_to_a_mock_without_a_token_is_warned_of_once(
    server: BackgroundServer, guarded: BackgroundServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Behind a proxy that sends a loopback Host, the Host check lets anyone through: said."""
    _proxied_without_token.cache_clear()
    caplog.set_level(logging.WARNING, logger="mockserver.guard")
    forwarded = {"X-Forwarded-For": "203.0.113.9"}
    ok = httpx.get(f"{guarded.base_url}/_mock/health", headers={**forwarded, "X-Mock-Token": TOKEN})
    assert ok.status_code == 200  # a token is set: nothing to say
    assert httpx.get(f"{server.base_url}/_mock/health").status_code == 200  # not proxied
    assert caplog.messages == []
    for _ in range(2):
        assert httpx.get(f"{server.base_url}/_mock/health", headers=forwarded).status_code == 200
    (said,) = caplog.messages
    assert "came through a proxy" in said
    assert "Set --control-token" in said


def test_a_cross_site_form_post_cannot_mint_or_reset(server: BackgroundServer) -> None:
    """What a page's <form method=post> sends: a simple request with its own Origin."""
    with httpx.Client(base_url=server.base_url, timeout=10) as http:
        http.get("/e", params={"n": "demo-refused"}, headers=bearer())
        before = len(http.get("/_mock/requests").json())
        form = {"Origin": "https://evil.example", "Content-Type": "text/plain"}
        assert http.post("/_mock/reset", headers=form, content=b"x").status_code == 403
        assert len(http.get("/_mock/requests").json()) == before


@pytest.mark.parametrize(("method", "path"), CONTROL_CALLS)
def test_the_token_is_needed_on_every_control_call(
    guarded: BackgroundServer, method: str, path: str
) -> None:
    with httpx.Client(base_url=guarded.base_url, timeout=10) as http:
        message = refused(http.request(method, path), 401, "control_token_required")
        assert "X-Mock-Token" in message
        wrong = http.request(method, path, headers={"X-Mock-Token": TOKEN + "x"})
        refused(wrong, 401, "control_token_required")
        right = http.request(method, path, headers={"X-Mock-Token": TOKEN})
        assert right.status_code < 400, right.text


def test_the_token_is_not_taken_from_the_query_of_other_calls(guarded: BackgroundServer) -> None:
    with httpx.Client(base_url=guarded.base_url, timeout=10) as http:
        response = http.post("/_mock/reset", params={"token": TOKEN})
    refused(response, 401, "control_token_required")


def test_e_needs_no_control_token(guarded: BackgroundServer) -> None:
    with httpx.Client(base_url=guarded.base_url, timeout=10) as http:
        assert http.get("/e", params={"n": "demo-refused"}, headers=bearer()).status_code == 200


def test_the_token_never_reaches_the_journal(guarded: BackgroundServer) -> None:
    with httpx.Client(base_url=guarded.base_url, timeout=10) as http:
        http.get("/e", params={"n": "demo-refused", "token": TOKEN}, headers=bearer())
        journal = http.get("/_mock/requests", headers={"X-Mock-Token": TOKEN}).text
    assert TOKEN[:-4] not in journal


# --- the dashboard: the token once in its query, then a cookie --------------------------------


def _open_with_token(http: httpx.Client) -> str:
    """Visit ``/_mock/?token=`` as a browser's first visit does; return the cookie's value."""
    first = http.get("/_mock/", params={"token": TOKEN}, headers={"Accept": "text/html"})
    assert first.status_code == 303, first.text
    assert first.headers["location"] == "/_mock/"  # the token leaves the address bar
    set_cookie = first.headers["set-cookie"]
    name, _, rest = set_cookie.partition("=")
    value = rest.split(";", 1)[0]
    port = http.base_url.port
    assert name == f"verdict_mock_dashboard_{port}"
    attributes = {part.strip().lower() for part in set_cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/_mock/"} <= attributes
    assert TOKEN not in set_cookie
    assert TOKEN[-8:] not in value
    return value


def test_the_first_visit_with_the_token_sets_a_cookie_that_opens_the_dashboard(
    guarded: BackgroundServer,
) -> None:
    with httpx.Client(base_url=guarded.base_url, timeout=10) as http:
        _open_with_token(http)
        page = http.get("/_mock/", headers={"Accept": "text/html"})  # the reload, no token
        assert page.status_code == 200
        assert "<title>verdict-mock</title>" in page.text
        assert http.get("/_mock/health").status_code == 200  # the page's own calls
        assert http.get("/_mock/requests").status_code == 200
    with httpx.Client(base_url=guarded.base_url, timeout=10) as stranger:  # no cookie
        assert stranger.get("/_mock/").status_code == 401
        assert stranger.get("/_mock/health").status_code == 401


def test_a_cookie_of_another_token_or_forged_opens_nothing(guarded: BackgroundServer) -> None:
    from verdict_contract.mockserver.web.guard import cookie_name, cookie_value

    name = cookie_name(f"127.0.0.1:{guarded.effective_port}")
    for value in (cookie_value(Secret(TOKEN + "x")), TOKEN, "", "0" * 64):
        with httpx.Client(base_url=guarded.base_url, timeout=10, cookies={name: value}) as http:
            refused(http.get("/_mock/health"), 401, "control_token_required")
    good = cookie_value(Secret(TOKEN))
    with httpx.Client(base_url=guarded.base_url, timeout=10, cookies={name: good}) as http:
        assert http.get("/_mock/health").status_code == 200
    other_port = cookie_name(f"127.0.0.1:{guarded.effective_port + 1}")
    with httpx.Client(base_url=guarded.base_url, timeout=10, cookies={other_port: good}) as http:
        refused(http.get("/_mock/health"), 401, "control_token_required")


def test_a_wrong_token_in_the_query_sets_no_cookie(guarded: BackgroundServer) -> None:
    with httpx.Client(base_url=guarded.base_url, timeout=10) as http:
        wrong = http.get("/_mock/", params={"token": "wrong"}, headers={"Accept": "text/html"})
        assert wrong.status_code == 401
        assert "set-cookie" not in wrong.headers
        assert http.get("/_mock/health").status_code == 401


def test_state_changing_calls_with_the_cookie_need_the_mocks_origin(
    guarded: BackgroundServer,
) -> None:
    own = f"http://127.0.0.1:{guarded.effective_port}"
    with httpx.Client(base_url=guarded.base_url, timeout=10) as http:
        _open_with_token(http)
        message = refused(http.post("/_mock/reset"), 403, "origin_required")
        assert "X-Mock-Token" in message
        refused(http.delete("/_mock/requests"), 403, "origin_required")
        foreign = http.post("/_mock/reset", headers={"Origin": "https://evil.example"})
        refused(foreign, 403, "cross_origin_refused")
        assert http.post("/_mock/reset", headers={"Origin": own}).status_code == 204
        minted = http.post("/_mock/sessions", headers={"Origin": own}, json={})
        assert minted.status_code == 201
    with httpx.Client(base_url=guarded.base_url, timeout=10) as script:  # the header still works
        assert script.post("/_mock/reset", headers={"X-Mock-Token": TOKEN}).status_code == 204


def test_a_browser_refused_gets_a_page_saying_how_to_open_the_dashboard(
    guarded: BackgroundServer,
) -> None:
    with httpx.Client(base_url=guarded.base_url, timeout=10) as http:
        page = http.get("/_mock/", headers={"Accept": "text/html,application/xhtml+xml,*/*"})
        assert page.status_code == 401
        assert page.headers["content-type"].startswith("text/html")
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert "/_mock/?token=&lt;the control token&gt;" in page.text
        assert "cookie" in page.text
        assert "VERDICT_MOCK_CONTROL_TOKEN" in page.text
        as_json = http.get("/_mock/", headers={"Accept": "*/*"})
        message = refused(as_json, 401, "control_token_required")
        assert "/_mock/?token=<token> once" in message
    assert TOKEN not in page.text


WRONG_TOKENS = ["wrong-token-<b>4f2a</b>", TOKEN + "x", TOKEN[:-1], ""]
"""Given in ``?token=``: a stranger's, the token with a character added, cut short, empty."""


@pytest.mark.parametrize("given", WRONG_TOKENS)
def test_a_browser_with_a_wrong_token_is_told_the_token_is_wrong(
    guarded: BackgroundServer, given: str
) -> None:
    html = {"Accept": "text/html,application/xhtml+xml,*/*"}
    with httpx.Client(base_url=guarded.base_url, timeout=10) as http:
        wrong = http.get("/_mock/", params={"token": given}, headers=html)
        none = http.get("/_mock/", headers=html)
    assert (wrong.status_code, none.status_code) == (401, 401)
    assert wrong.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in wrong.headers["content-security-policy"]
    assert "set-cookie" not in wrong.headers
    assert "not this mock's current control token" in wrong.text
    assert "banner" in wrong.text
    assert "/_mock/?token=&lt;the control token&gt;" in wrong.text
    assert "not this mock's current control token" not in none.text  # no token: the other page
    assert "needs this mock's control token" in none.text
    if given:
        assert given not in wrong.text  # never echoed, in any form
        assert "4f2a" not in wrong.text
    assert TOKEN[:-4] not in wrong.text


def test_a_script_with_a_wrong_token_in_the_query_is_told_so_in_json(
    guarded: BackgroundServer,
) -> None:
    with httpx.Client(base_url=guarded.base_url, timeout=10) as http:
        wrong = http.get("/_mock/", params={"token": "wrong-token-4f2a"})
        none = http.get("/_mock/")
    message = refused(wrong, 401, "control_token_required")
    assert "is not this mock's control token" in message
    assert "VERDICT_MOCK_CONTROL_TOKEN" in message
    assert "4f2a" not in message
    assert "is not this mock's control token" not in refused(none, 401, "control_token_required")


def test_the_dashboard_without_a_token_sets_no_cookie(server: BackgroundServer) -> None:
    with httpx.Client(base_url=server.base_url, timeout=10) as http:
        page = http.get("/_mock/")
        assert page.status_code == 200
        assert "set-cookie" not in page.headers


def test_the_visit_with_the_token_leaves_it_in_no_log(caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(api_keys=(KEY,), control_token=Secret(TOKEN), access_log=True)
    caplog.set_level("DEBUG")
    with (
        running(create_app(settings)) as server,
        httpx.Client(base_url=server.base_url, timeout=10) as http,
    ):
        _open_with_token(http)
        assert http.get("/_mock/", headers={"Accept": "text/html"}).status_code == 200
        assert wait_until(lambda: caplog.text.count('"GET /_mock/') >= 2)
    mock_said = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("mockserver"))
    assert '"GET /_mock/?token=… HTTP/1.1" 303' in mock_said  # not one character of it
    assert TOKEN[-4:] not in mock_said
