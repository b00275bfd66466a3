"""mockserver.accesslog: one common-log-format line per request, keys and tokens masked."""

from __future__ import annotations

import logging
import re

import httpx
import pytest

from tests.helpers import KEY, bearer, raw_request, running, wait_until
from verdict_contract.core.redact import Secret
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.cli import build_parser, settings_from

TOKEN = "control-token-0123456789abcdef"
CLF = re.compile(r'^(\S+) - - \[[^\]]+\] "([^"]*)" (\d{3}) (\d+|-) (\d+\.\d{6})$')


def test_one_line_per_request_with_keys_masked(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mockserver.access")
    settings = Settings(api_keys=(KEY,), access_log=True, control_token=Secret(TOKEN))
    with running(create_app(settings)) as server, httpx.Client(base_url=server.base_url) as http:
        http.get("/e", params={"n": "demo-refused", "api_key": KEY}, headers=bearer())
        http.get("/e", params={"n": KEY})  # a key sent as the id
        http.get("/_mock/health", params={"token": TOKEN}, headers={"X-Mock-Token": TOKEN})
        http.get("/nope")
        assert wait_until(lambda: len(_lines(caplog)) == 4)
    lines = _lines(caplog)
    text = "\n".join(lines)
    assert KEY[:-4] not in text
    assert TOKEN[:-4] not in text
    assert "?token=… " in text  # not even the last 4 characters of the control token
    parsed = [CLF.match(line) for line in lines]
    assert all(parsed), lines
    requests = [(m.group(2), m.group(3)) for m in parsed if m]
    assert requests[0] == (f"GET /e?n=demo-refused&api_key=…{KEY[-4:]} HTTP/1.1", "200")
    assert requests[1] == (f"GET /e?n=…{KEY[-4:]} HTTP/1.1", "401")
    assert requests[2][1] == "200"
    assert requests[3] == ("GET /nope HTTP/1.1", "404")
    first = parsed[0]
    assert first is not None
    assert first.group(1) == "127.0.0.1"
    assert int(first.group(4)) > 100  # the verdict's bytes


@pytest.mark.parametrize("server", ["async", "wsgi"])
def test_a_line_ends_with_the_seconds_its_answer_took(
    caplog: pytest.LogCaptureFixture, server: str
) -> None:
    caplog.set_level(logging.INFO, logger="mockserver.access")
    settings = Settings(api_keys=(KEY,), access_log=True)
    with (
        running(create_app(settings), server=server) as running_server,
        httpx.Client(base_url=running_server.base_url) as http,
    ):
        slow = http.post("/_mock/sessions", json={"script": [{"delay_ms": 300}]}).json()["n"]
        http.get("/e", params={"n": slow}, headers=bearer())  # its first answer waits 300 ms
        http.get("/e", params={"n": slow}, headers=bearer())
        assert wait_until(lambda: len(_lines(caplog)) == 3)
    took = [float(m.group(5)) for m in map(CLF.match, _lines(caplog)) if m]
    assert len(took) == 3
    assert took[1] >= 0.3  # the delay is in it
    assert took[2] < 0.3


@pytest.mark.parametrize("server", ["async", "wsgi"])
@pytest.mark.parametrize(
    ("allowed", "client"),
    [
        ((), "127.0.0.1"),  # no proxy trusted: the peer, whatever the header says
        (("192.0.2.1",), "127.0.0.1"),  # the peer is not the trusted proxy
        (("127.0.0.1",), "10.1.2.3"),  # the right-most address not a trusted proxy's
        (("127.0.0.0/8", "10.0.0.0/8"), "203.0.113.7"),
        (("*",), "203.0.113.7"),  # every hop trusted: the left-most
    ],
)
def test_the_client_comes_from_x_forwarded_for_of_trusted_proxies_only(
    caplog: pytest.LogCaptureFixture, server: str, allowed: tuple[str, ...], client: str
) -> None:
    caplog.set_level(logging.INFO, logger="mockserver.access")
    settings = Settings(api_keys=(KEY,), access_log=True, forwarded_allow_ips=allowed)
    with running(create_app(settings), server=server) as running_server:
        forwarded = {"X-Forwarded-For": "203.0.113.7, 10.1.2.3"}
        httpx.get(f"{running_server.base_url}/e?n=demo-refused", headers=bearer() | forwarded)
        httpx.get(f"{running_server.base_url}/nope", headers=forwarded)  # the app's lines too
        assert wait_until(lambda: len(_lines(caplog)) == 2)
    assert [line.split(" ")[0] for line in _lines(caplog)] == [client, client]


def test_a_proxy_setting_that_is_no_address_is_refused() -> None:
    with pytest.raises(ValueError, match=r"'proxy\.example' is not an IP address"):
        Settings.parse(forwarded_allow_ips=["proxy.example"])


def test_the_trusted_proxies_flag_takes_uvicorns_spelling_too() -> None:
    argv = ["--forwarded-allow-ips", "10.0.0.1", "--forwarded-allow-ip", "192.0.2.0/24"]
    settings = settings_from(build_parser().parse_args(argv), {})
    assert settings.forwarded_allow_ips == ("10.0.0.1", "192.0.2.0/24")
    variable = {"VERDICT_MOCK_FORWARDED_ALLOW_IPS": "10.0.0.1,*"}
    assert settings_from(build_parser().parse_args([]), variable).forwarded_allow_ips == (
        "10.0.0.1",
        "*",
    )


def test_no_access_log_by_default(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mockserver.access")
    with running(create_app(Settings())) as server:
        httpx.get(f"{server.base_url}/_mock/health")
    assert _lines(caplog) == []


def test_a_huge_query_gives_a_short_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mockserver.access")
    with running(create_app(Settings(access_log=True))) as server:
        query = "&".join(f"p={i}" for i in range(20_000))  # too long for httpx
        port = int(server.base_url.rsplit(":", 1)[1])
        raw_request(port, f"GET /e?{query} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        assert wait_until(lambda: len(_lines(caplog)) == 1)
    assert len(_lines(caplog)[0]) < 1200


def test_a_target_that_does_not_parse_is_logged_as_sent(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mockserver.access")
    with running(create_app(Settings(access_log=True)), server="async") as server:
        port = int(server.base_url.rsplit(":", 1)[1])
        answer = raw_request(port, b"GET http://h:x/e HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 400 ")
        assert wait_until(lambda: len(_lines(caplog)) == 1)
    (line,) = _lines(caplog)
    parsed = CLF.match(line)
    assert parsed, line
    assert parsed.group(1, 2, 3) == ("127.0.0.1", "GET http://h:x/e HTTP/1.1", "400")


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "mockserver.access"]


def test_a_key_sent_in_the_path_is_masked_in_the_log_and_the_journal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A client whose base URL ends with its key (".../e/<key>", "/<key>/e") gets a 404; the
    # developer reads the journal and the log to see why, and must not find the key there.
    caplog.set_level(logging.INFO, logger="mockserver.access")
    settings = Settings(api_keys=(KEY,), access_log=True)
    with running(create_app(settings)) as server, httpx.Client(base_url=server.base_url) as http:
        assert http.get(f"/e/{KEY}", params={"n": "demo-refused"}).status_code == 404
        assert http.get(f"/{KEY.replace('-', '%2D')}/e").status_code == 404  # percent-encoded
        assert http.get("/e/not-a-key").status_code == 404
        assert wait_until(lambda: len(_lines(caplog)) == 3)
        paths = [entry["path"] for entry in http.get("/_mock/requests").json()]
    text = "\n".join(_lines(caplog)) + "\n".join(paths)
    assert KEY[:-4] not in text
    assert KEY.replace("-", "%2D")[:-4] not in text
    assert paths == [f"/e/…{KEY[-4:]}", f"/…{KEY[-4:]}/e", "/e/not-a-key"]
    assert f"GET /e/…{KEY[-4:]}?n=demo-refused HTTP/1.1" in _lines(caplog)[0]


def test_a_key_sent_as_the_forwarded_client_is_masked_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Behind a trusted proxy the log names the client X-Forwarded-For names, as sent: a key
    (or 8 characters of one) there is masked; an address is shown."""
    caplog.set_level(logging.INFO, logger="mockserver.access")
    settings = Settings(api_keys=(KEY,), access_log=True, forwarded_allow_ips=("*",))
    with running(create_app(settings)) as server, httpx.Client(base_url=server.base_url) as http:
        for client in (KEY[2:12], "203.0.113.7"):
            http.get("/e?n=demo-refused", headers=bearer() | {"X-Forwarded-For": client})
        assert wait_until(lambda: len(_lines(caplog)) == 2)
    assert [line.split(" ")[0] for line in _lines(caplog)] == ["…", "203.0.113.7"]


TERMINAL_ATTACK = "%1b]0;PWNED%07%1b[2J%c2%9b%7f"  # retitle, bell, clear; a C1 CSI (UTF-8), DEL


@pytest.mark.parametrize("server_name", ["async", "wsgi"])
@pytest.mark.parametrize("path", ["/e", "/%1b[2Jnope"])
def test_control_characters_sent_are_escaped_in_the_log(
    caplog: pytest.LogCaptureFixture, path: str, server_name: str
) -> None:
    caplog.set_level(logging.INFO, logger="mockserver.access")
    app = create_app(Settings(api_keys=(KEY,), access_log=True))
    with running(app, server=server_name) as server:
        port = int(server.base_url.rsplit(":", 1)[1])
        target = f"{path}?n={TERMINAL_ATTACK}"
        raw_request(port, f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        assert wait_until(lambda: len(_lines(caplog)) == 1)
    (line,) = _lines(caplog)
    assert not re.search(r"[\x00-\x1f\x7f-\x9f]", line), repr(line)
    assert "n=\\x1b]0;PWNED\\x07\\x1b[2J\\x9b\\x7f " in line
    assert CLF.match(line)
