"""mockserver.proxy over real HTTP: the mock itself upstream, and an upstream that misbehaves."""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import logging
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import httpx
import pytest
from flask import Flask

from tests.helpers import KEY, bearer, free_port, running, wait_until
from verdict_contract.core.keyforms import base64_forms
from verdict_contract.core.rates import RateLimit
from verdict_contract.core.redact import Secret
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.model.scenario import load_scenario
from verdict_contract.mockserver.server.asyncserver import UPSTREAM_CALLS_PER_THREAD
from verdict_contract.mockserver.settings import DEFAULT_API_KEY
from verdict_contract.mockserver.web.proxy import MAX_UPSTREAM_BODY, PROXY_EXTENSION, check_answer
from verdict_contract.testing.background import BackgroundServer

LOCAL = {"Authorization": f"Bearer {DEFAULT_API_KEY}"}
"""What a client of a proxy with --upstream-key sends: one of the proxy's own keys."""


@pytest.fixture(scope="module")
def upstream() -> Iterator[BackgroundServer]:
    """The mock itself as the real service, with a team key the proxy does not share."""
    app = create_app(Settings(api_keys=(KEY,), rate_limit=RateLimit.parse("off")))
    with running(app) as server:
        yield server


def mint(upstream: BackgroundServer, **spec: Any) -> str:
    response = httpx.post(f"{upstream.base_url}/_mock/sessions", json=spec, timeout=5)
    assert response.status_code == 201, response.text
    n: str = response.json()["n"]
    return n


def direct(upstream: BackgroundServer, n: str, key: str = KEY) -> httpx.Response:
    return httpx.get(f"{upstream.base_url}/e", params={"n": n}, headers=bearer(key), timeout=5)


class Proxy:
    """A running proxy and a client for it."""

    def __init__(self, server: BackgroundServer, app: Flask) -> None:
        self.server = server
        self.app = app
        self.http = httpx.Client(base_url=server.base_url, timeout=10)

    def written(self) -> None:
        """Wait until the recording holds every answer recorded (it is written off the call)."""
        assert self.app.extensions[PROXY_EXTENSION].recorder.flush()

    def get(self, n: str, headers: dict[str, str] | None = None) -> httpx.Response:
        return self.http.get(
            "/e", params={"n": n}, headers=bearer() if headers is None else headers
        )

    def journal(self) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = self.http.get("/_mock/requests").json()
        return entries

    def counters(self) -> dict[str, Any]:
        counters: dict[str, Any] = self.http.get("/_mock/health").json()["proxy"]
        return counters


@pytest.fixture
def proxy_to() -> Iterator[Any]:
    """Start proxies to a URL with extra settings; all stopped after the test."""
    stack: list[Any] = []

    def start(url: str, **settings: Any) -> Proxy:
        app = create_app(Settings(proxy_to=url, **settings))
        context = running(app)
        proxy = Proxy(context.__enter__(), app)
        stack.append((context, proxy))
        return proxy

    yield start
    for context, proxy in reversed(stack):
        proxy.http.close()
        context.__exit__(None, None, None)


# --- the mock itself upstream -------------------------------------------------------------------


def test_answers_pass_through_unchanged(upstream: BackgroundServer, proxy_to: Any) -> None:
    proxy = proxy_to(upstream.base_url)
    for n, key in [("demo-contradicted", KEY), ("no-such-session", KEY), ("demo-refused", "bad")]:
        real, proxied = direct(upstream, n, key), proxy.get(n, bearer(key))
        assert (proxied.status_code, proxied.content) == (real.status_code, real.content)
        for header in ("content-type", "cache-control", "www-authenticate"):
            assert proxied.headers.get(header) == real.headers.get(header)
    assert [e["status"] for e in proxy.journal()] == [200, 404, 401]
    assert [e["outcome"] for e in proxy.journal()] == ["proxied"] * 3
    assert all(e["violations"] == [] and e["latency_ms"] > 0 for e in proxy.journal())
    assert proxy.counters()["answers"] == 3
    assert proxy.counters()["breaching_answers"] == 0


def test_a_request_in_flight_when_the_journal_is_cleared_is_not_journaled(proxy_to: Any) -> None:
    # As the mock does for a delay from an earlier test: the request arrived before the clear.
    mock = create_app(Settings(api_keys=(KEY,), rate_limit=RateLimit.parse("off")))
    clear_urls: list[str] = []

    def upstream(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        for url in clear_urls:  # the proxy's journal cleared while it waits on this answer
            assert httpx.delete(url, timeout=5).status_code == 204
        return mock(environ, start_response)

    with running(upstream) as server:  # type: ignore[arg-type]
        proxy = proxy_to(server.base_url)
        assert proxy.get("demo-refused").status_code == 200
        assert [e["n"] for e in proxy.journal()] == ["demo-refused"]
        clear_urls.append(f"{proxy.server.base_url}/_mock/requests")
        assert proxy.get("demo-contradicted").status_code == 200
        assert proxy.journal() == []


def test_the_journal_reads_a_proxied_answer_as_the_mocks_own(proxy_to: Any) -> None:
    # The verdict served and the Retry-After, which coverage counts (docs/plugin.md).
    limited = create_app(Settings(api_keys=(KEY,), rate_limit=RateLimit.parse("1/60")))
    with running(limited) as server:
        proxy = proxy_to(server.base_url)
        assert [proxy.get("demo-contradicted").status_code for _ in range(2)] == [200, 429]
    served, refused = proxy.journal()
    assert (served["verdict"], served["conclusive"], served["schema"]) == ("contradicted", True, 7)
    assert (refused["status"], refused["verdict"]) == (429, None)
    assert 0 < int(refused["retry_after"]) <= 60


def _held(release: threading.Event, arrived: threading.Semaphore) -> Any:
    """An upstream that tells ``arrived`` of each call, and answers 404 once ``release`` is set."""

    def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        arrived.release()
        release.wait(30)
        start_response("404 Not Found", [("Content-Type", "application/json")])
        return [b'{"error": {"code": "session_not_found", "message": "no"}}']

    return app


def test_calls_held_by_a_slow_upstream_leave_the_probes_and_control_api_answering() -> None:
    """Every worker thread of the proxy's app waits on the upstream: a probe still answers."""
    release, arrived = threading.Event(), threading.Semaphore(0)
    with (
        running(_held(release, arrived)) as upstream,
        running(create_app(Settings(proxy_to=upstream.base_url)), threads=2) as proxy,
    ):
        calls = [
            threading.Thread(
                target=httpx.get,
                args=(f"{proxy.base_url}/e?n=x{i}",),
                kwargs={"headers": bearer(), "timeout": 30},
            )
            for i in range(2)  # as many as the app's threads
        ]
        for call in calls:
            call.start()
        try:
            for _ in calls:  # every call waits on the upstream
                assert arrived.acquire(timeout=10)
            assert httpx.get(f"{proxy.base_url}/_mock/livez", timeout=5).status_code == 200
            assert httpx.get(f"{proxy.base_url}/_mock/requests", timeout=5).status_code == 200
        finally:
            release.set()
            for call in calls:
                call.join(30)


def test_calls_past_the_bound_of_waiting_ones_are_503_at_once() -> None:
    """A slow upstream queues no more than UPSTREAM_CALLS_PER_THREAD calls a thread: the next
    is refused at once, with Retry-After, and served again once they are answered."""
    release = threading.Event()
    with (
        running(_held(release, threading.Semaphore(0))) as upstream,
        running(create_app(Settings(proxy_to=upstream.base_url)), threads=1) as proxy,
    ):
        server = proxy._server
        assert server is not None
        statuses: list[int] = []

        def call() -> None:
            answer = httpx.get(f"{proxy.base_url}/e?n=x", headers=bearer(), timeout=30)
            statuses.append(answer.status_code)

        calls = [threading.Thread(target=call) for _ in range(UPSTREAM_CALLS_PER_THREAD)]
        for each in calls:
            each.start()
        try:
            assert wait_until(lambda: server.upstream_calls == UPSTREAM_CALLS_PER_THREAD)
            refused = httpx.get(f"{proxy.base_url}/e?n=x", headers=bearer(), timeout=5)
        finally:
            release.set()
            for each in calls:
                each.join(30)
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["code"] == "upstream_busy"
        assert statuses == [404] * UPSTREAM_CALLS_PER_THREAD
        assert server.upstream_calls == 0
        assert httpx.get(f"{proxy.base_url}/e?n=x", headers=bearer(), timeout=30).status_code == 404


def test_head_passes_through(upstream: BackgroundServer, proxy_to: Any) -> None:
    proxy = proxy_to(upstream.base_url)
    response = proxy.http.head("/e", params={"n": "demo-refused"}, headers=bearer())
    assert response.status_code == 200
    assert response.content == b""
    assert int(response.headers["content-length"]) == 0


def test_other_paths_stay_with_the_mock(upstream: BackgroundServer, proxy_to: Any) -> None:
    proxy = proxy_to(upstream.base_url)
    assert proxy.http.get("/_mock/health").json()["proxy"]["upstream"] == upstream.base_url
    assert proxy.http.post("/e", headers=bearer()).status_code == 405


def test_the_upstream_key_is_sent_and_never_shown(
    upstream: BackgroundServer, proxy_to: Any, caplog: pytest.LogCaptureFixture
) -> None:
    broken = mint(upstream, allow_invalid=True, fields={"schema": 6})
    with caplog.at_level(logging.DEBUG):
        proxy = proxy_to(upstream.base_url, upstream_key=Secret(KEY))
        assert proxy.get("demo-contradicted", LOCAL).status_code == 200
        assert proxy.get(broken, LOCAL).status_code == 200
        refused = proxy.get("demo-contradicted", bearer(KEY))  # the upstream key is not ours
        assert refused.status_code == 401
        assert "a key of this mock" in refused.json()["error"]["message"]
        journal = json.dumps(proxy.journal()) + json.dumps(proxy.counters())
    upstream_journal = httpx.get(f"{upstream.base_url}/_mock/requests").json()
    assert upstream_journal[-1]["authorization"] == f"Bearer …{KEY[-4:]}"  # the key went up
    assert KEY not in journal
    assert KEY not in caplog.text
    assert "upstream breach" in caplog.text  # the log did speak
    assert KEY not in repr(Settings(proxy_to=upstream.base_url, upstream_key=Secret(KEY)))


def test_a_key_sent_in_the_query_is_not_logged(
    upstream: BackgroundServer, proxy_to: Any, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = proxy_to(upstream.base_url)
    with caplog.at_level(logging.DEBUG):
        query = {"n": "demo-refused", "api_key": KEY}
        answer = proxy.http.get("/e", params=query, headers=bearer())
    assert answer.status_code == 200
    # The test's own client logs its call to the proxy; the proxy's lines are the others.
    proxy_lines = [
        r.getMessage() for r in caplog.records if proxy.server.base_url not in r.getMessage()
    ]
    assert f"HTTP Request: GET {upstream.base_url}/e?…" in "\n".join(proxy_lines)
    assert not [line for line in proxy_lines if KEY in line]
    assert KEY not in json.dumps(proxy.journal())


def test_without_an_upstream_key_the_clients_header_goes_up(
    upstream: BackgroundServer, proxy_to: Any
) -> None:
    proxy = proxy_to(upstream.base_url)
    assert proxy.get("demo-refused", LOCAL).status_code == 401  # the upstream knows only KEY
    assert proxy.get("demo-refused").status_code == 200
    assert proxy.journal()[-1]["authorization"] == f"Bearer …{KEY[-4:]}"


def test_a_breach_is_journaled_logged_and_counted(
    upstream: BackgroundServer, proxy_to: Any, caplog: pytest.LogCaptureFixture
) -> None:
    n = mint(upstream, verdict="refused", allow_invalid=True, fields={"schema": 6, "summary": ""})
    proxy = proxy_to(upstream.base_url)
    with caplog.at_level(logging.WARNING, logger="mockserver.proxy"):
        response = proxy.get(n)
    assert response.status_code == 200
    assert response.content == direct(upstream, n).content  # unchanged, breach or not
    (entry,) = proxy.journal()
    assert entry["outcome"] == "breach"
    assert len(entry["violations"]) == 2
    assert any(v.startswith("§9.1, §9.3 schema_version at /schema") for v in entry["violations"])
    breaches = [r for r in caplog.records if "upstream breach" in r.getMessage()]
    assert len(breaches) == 2  # one line per breach, naming its clause
    assert all("§" in r.getMessage() and n[:20] in r.getMessage() for r in breaches)
    assert proxy.counters() | {"upstream": ""} == {
        "upstream": "",
        "answers": 1,
        "breaching_answers": 1,
        "violations": 2,
        "upstream_failures": 0,
    }


def test_strict_answers_a_breach_with_502(upstream: BackgroundServer, proxy_to: Any) -> None:
    n = mint(upstream, allow_invalid=True, fields={"schema": 6})
    proxy = proxy_to(upstream.base_url, proxy_strict=True)
    response = proxy.get(n)
    assert response.status_code == 502
    assert response.headers["content-type"] == "application/json"
    assert response.headers["cache-control"] == "no-store"
    error = response.json()["error"]
    assert error["code"] == "contract_breach"
    assert "schema_version" in error["message"]
    assert [v["rule"] for v in error["violations"]] == ["schema_version"]
    assert error["violations"][0]["received"] == "6"
    assert error["violations"][0]["documented"] == "7"
    assert proxy.get("demo-refused").status_code == 200  # a valid answer still passes


@pytest.mark.parametrize(
    ("step", "status", "code"),
    [
        (500, 502, "upstream_error"),
        (503, 502, "upstream_error"),
        ("reset", 502, "upstream_unreachable"),
        ("truncated", 502, "upstream_unreachable"),
    ],
)
def test_upstream_failures_are_502(
    upstream: BackgroundServer, proxy_to: Any, step: object, status: int, code: str
) -> None:
    n = mint(upstream, script=[step])
    proxy = proxy_to(upstream.base_url)
    response = proxy.get(n)
    assert response.status_code == status
    assert set(response.json()) == {"error"}
    assert response.json()["error"]["code"] == code
    assert proxy.journal()[-1]["outcome"] == code
    assert proxy.get(n).status_code == 200  # the script is spent: the verdict now


def test_a_body_that_is_not_json_is_a_breach(upstream: BackgroundServer, proxy_to: Any) -> None:
    proxy = proxy_to(upstream.base_url)
    response = proxy.get("demo-malformed")
    assert response.status_code == 200
    assert response.content == direct(upstream, "demo-malformed").content
    assert proxy.journal()[-1]["violations"][0].startswith("§4 json_body")


def test_a_slow_upstream_is_504_at_the_timeout(upstream: BackgroundServer, proxy_to: Any) -> None:
    n = mint(upstream, script=[{"delay_ms": 2000}])
    proxy = proxy_to(upstream.base_url, proxy_timeout=0.3)
    response = proxy.http.get("/e", params={"n": n}, headers=bearer(), timeout=1.5)
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "upstream_timeout"
    assert proxy.counters()["upstream_failures"] == 1


def test_no_upstream_listening_is_502(proxy_to: Any) -> None:
    proxy = proxy_to(f"http://127.0.0.1:{free_port()}")
    response = proxy.get("demo-refused")
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_unreachable"


def test_a_query_that_cannot_be_sent_on_is_400(upstream: BackgroundServer) -> None:
    client = create_app(Settings(proxy_to=upstream.base_url)).test_client()
    response = client.get("/e", environ_overrides={"QUERY_STRING": "n=a\x01b"}, headers=bearer())
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "bad_request"


# --- an upstream that misbehaves ------------------------------------------------------------------


class Misbehaving:
    """A WSGI service whose answer is chosen by ``n``: drip, huge, teapot, html-500."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        n = environ.get("QUERY_STRING", "").removeprefix("n=")
        if n == "drip":  # a byte at a time: every read is quick, the whole answer is not
            start_response("200 OK", [("Content-Type", "application/json")])
            return self._drip()
        if n == "huge":
            start_response("200 OK", [("Content-Type", "application/json")])
            return [b" " * (MAX_UPSTREAM_BODY + 1)]
        if n == "teapot":
            start_response("418 I'm a teapot", [("Content-Type", "text/plain")])
            return [b"short and stout"]
        start_response("500 Internal Server Error", [("Content-Type", "text/html")])
        return [b"<h1>oops</h1>"]

    def _drip(self) -> Iterator[bytes]:
        for _ in range(100):  # at most 10 s, ended early by release
            if self.release.wait(0.1):
                return
            yield b" "


@pytest.fixture(scope="module")
def misbehaving() -> Iterator[tuple[BackgroundServer, Misbehaving]]:
    app = Misbehaving()
    with running(app) as server:  # type: ignore[arg-type]
        yield server, app
        app.release.set()


def test_a_dripping_upstream_is_cut_at_the_timeout(
    misbehaving: tuple[BackgroundServer, Misbehaving], proxy_to: Any
) -> None:
    server, _ = misbehaving
    proxy = proxy_to(server.base_url, proxy_timeout=0.5)
    started = time.monotonic()
    response = proxy.http.get("/e", params={"n": "drip"}, headers=bearer(), timeout=3)
    assert response.status_code == 504, f"after {time.monotonic() - started:.1f} s"


@contextlib.contextmanager
def _dripping_head_upstream() -> Iterator[tuple[str, list[socket.socket]]]:
    """An upstream that answers ``n=plain`` at once and drips any other answer's head, a byte
    every 0.2 s for a minute; the list holds the connections it drips on."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve(connection: socket.socket) -> None:
        with connection:
            if b"n=plain" in connection.recv(65536):
                body = b'{"error": {"code": "session_not_found", "message": "no"}}'
                head = f"HTTP/1.1 404 Not Found\r\nContent-Length: {len(body)}\r\n"
                connection.sendall(head.encode() + b"Content-Type: application/json\r\n\r\n" + body)
                return
            held.append(connection)
            with contextlib.suppress(OSError):  # the mock cut it
                connection.sendall(b"HTTP/1.1 200 OK\r\nX-Drip: ")
                for _ in range(300):
                    if stop.wait(0.2):
                        break
                    connection.sendall(b"x")
            held.remove(connection)

    def accept() -> None:
        while not stop.is_set():
            try:
                connection = listener.accept()[0]
            except TimeoutError:
                continue
            except OSError:  # closed
                return
            threading.Thread(target=serve, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", held
    finally:
        stop.set()
        listener.close()


def test_an_upstream_dripping_its_head_holds_no_connection_past_the_timeout() -> None:
    """httpx's timeout bounds each read only: each call that had its 504 kept its connection
    (of the pool's 2 with one thread) while the upstream dripped, and a call the upstream would
    answer at once then waited for the pool and had a 504 too. The mock cuts them."""
    with (
        _dripping_head_upstream() as (upstream, held),
        running(create_app(Settings(proxy_to=upstream, proxy_timeout=0.5)), threads=1) as proxy,
        httpx.Client(base_url=proxy.base_url, headers=bearer(), timeout=10) as client,
    ):
        for index in range(3):
            answer = client.get("/e", params={"n": f"drip-{index}"})
            assert answer.status_code == 504, answer.text
        assert wait_until(lambda: not held, timeout=5), f"{len(held)} connections held"
        answer = client.get("/e", params={"n": "plain"})
        assert answer.status_code == 404, answer.text


@pytest.mark.parametrize("encoding", ["gzip", "br"])
def test_an_encoded_answer_is_502_never_decoded(proxy_to: Any, encoding: str) -> None:
    """Asked for identity, an upstream sends gzip anyway: 1 GiB of zeros is 1 MiB of it."""
    bomb = gzip.compress(b"0" * (64 * 1024 * 1024))

    def upstream(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        assert environ["HTTP_ACCEPT_ENCODING"] == "identity"
        start_response(
            "200 OK", [("Content-Type", "application/json"), ("Content-Encoding", encoding)]
        )
        return [bomb]

    with running(upstream) as server:  # type: ignore[arg-type]
        answer = proxy_to(server.base_url).get("demo-refused")
    assert answer.status_code == 502
    assert answer.json()["error"] == {
        "code": "upstream_encoded",
        "message": "the upstream's answer is encoded (Content-Encoding), asked for none",
    }


def test_a_huge_answer_is_502(
    misbehaving: tuple[BackgroundServer, Misbehaving], proxy_to: Any
) -> None:
    proxy = proxy_to(misbehaving[0].base_url)
    response = proxy.get("huge")
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_too_large"


def test_undocumented_statuses_are_breaches(
    misbehaving: tuple[BackgroundServer, Misbehaving], proxy_to: Any
) -> None:
    proxy = proxy_to(misbehaving[0].base_url)
    teapot = proxy.get("teapot")
    assert (teapot.status_code, teapot.content) == (418, b"short and stout")
    assert teapot.headers["content-type"] == "application/json"  # whatever the upstream said
    html = proxy.get("html")
    assert html.status_code == 502
    assert html.json()["error"] == {
        "code": "upstream_error",
        "message": "the upstream answered 500",
    }
    violations = [e["violations"] for e in proxy.journal()]
    assert [v[0].split(" at ")[0] for v in violations] == ["§7 documented_status"] * 2
    assert proxy.counters()["breaching_answers"] == 2


def test_check_answer_reads_status_then_body() -> None:
    valid = direct_body = json.dumps({"schema": 7}).encode()
    assert [v.rule for v in check_answer(418, b"")] == ["documented_status"]
    assert check_answer(404, b"not json") == []
    assert check_answer(200, valid, has_body=False) == []
    assert check_answer(200, direct_body)  # a bare {"schema": 7} breaks many rules
    assert [v.rule for v in check_answer(200, b"\xff{")] == ["json_body"]


# --- record and replay ----------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_recorded_sessions_replay_byte_for_byte(
    upstream: BackgroundServer, proxy_to: Any, tmp_path: Path, suffix: str
) -> None:
    record = tmp_path / f"recorded{suffix}"
    broken = mint(upstream, allow_invalid=True, fields={"schema": 6, "summary": "é\n\t'\"<>"})
    failing = mint(upstream, script=[500])
    proxy = proxy_to(upstream.base_url, record=record, upstream_key=Secret(KEY))
    seen = {n: proxy.get(n, LOCAL) for n in ("demo-contradicted", broken, "gone", failing)}
    assert proxy.get("demo-contradicted", LOCAL).status_code == 200  # seen twice, kept once
    proxy.written()
    assert KEY not in record.read_text(encoding="utf-8")

    # Another secret: the minted ids are served from the recording, not read as tokens.
    replay = create_app(
        Settings(scenario=record, demo_sessions=False, api_keys=(KEY,), secret="another")
    )
    with running(replay) as server, httpx.Client(base_url=server.base_url) as client:
        for n in ("demo-contradicted", broken, "gone"):
            again = client.get("/e", params={"n": n}, headers=bearer())
            assert (again.status_code, again.content) == (
                seen[n].status_code,
                seen[n].content,
            )
        assert client.get("/e", params={"n": failing}, headers=bearer()).status_code == 404
        outcomes = [e["outcome"] for e in client.get("/_mock/requests").json()]
        assert outcomes == ["recorded", "recorded", "recorded", "unknown"]


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_cut_or_malformed_answer_is_not_recorded(
    upstream: BackgroundServer, proxy_to: Any, tmp_path: Path, suffix: str
) -> None:
    record = tmp_path / f"recorded{suffix}"
    cut, malformed = mint(upstream, script=["truncated"]), mint(upstream, script=["malformed"])
    proxy = proxy_to(upstream.base_url, record=record)
    assert proxy.get("demo-contradicted").status_code == 200
    assert proxy.get(cut).status_code == 502  # the upstream's answer stopped short
    assert proxy.get(malformed).status_code == 200  # passed on, with its breach
    proxy.written()
    assert set(load_scenario(record).sessions) == {"demo-contradicted"}
    assert proxy.get(malformed).status_code == 200  # the session's real answer, this time
    proxy.written()
    assert set(load_scenario(record).sessions) == {"demo-contradicted", malformed}


def test_a_session_id_with_control_characters_is_logged_escaped(
    proxy_to: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from flask import Flask

    broken = Flask("broken-upstream")
    broken.add_url_rule("/e", "e", lambda: ("not json\x1b[2J", 200))
    with running(broken) as upstream, caplog.at_level(logging.WARNING, logger="mockserver.proxy"):
        proxy = proxy_to(upstream.base_url)
        assert proxy.get("\x1b]0;PWNED\x07\x1b[2J\u009b").status_code == 200
    breaches = [r.getMessage() for r in caplog.records if "upstream breach" in r.getMessage()]
    assert breaches  # the log did speak
    for line in breaches:
        assert "(n=\\x1b]0;PWNED\\x07\\x1b[2J\\x9b)" in line
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in line), repr(line)


def test_a_mock_that_proxies_nothing_starts_and_answers_without_httpx() -> None:
    """httpx is imported where a proxy is made: its import was a sixth of every start's CPU."""
    code = (
        "import sys; sys.modules['httpx'] = None  # any import of it fails\n"
        "from verdict_contract.mockserver import Settings, create_app\n"
        "from verdict_contract.testing.background import BackgroundServer\n"
        "import urllib.request\n"
        "with BackgroundServer(create_app(Settings()), threads=1) as server:\n"
        "    request = urllib.request.Request(\n"
        "        server.base_url + '/e?n=demo-refused',\n"
        "        headers={'Authorization': 'Bearer verdict-mock-local-key'},\n"
        "    )\n"
        "    print(urllib.request.urlopen(request, timeout=10).status)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, "200"), done.stderr


# --- an upstream that attacks the mock's origin or leaks its key --------------------------------

UPSTREAM_KEY = "REAL/staging+key=0123456789abcdef"
"""A key whose URL-encoded form differs from it: each form is looked for."""

CLIENT_KEY = "client-secret-key-0123456789"
"""A client's own key, which a proxy without --upstream-key sends up as it came."""

PAGE = '<script>fetch("/_mock/reset",{method:"POST"})</script>'


def _escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


class Hostile:
    """A WSGI service answering ``n``: an HTML page reflecting it (with a cookie for the mock's
    control paths), or a JSON 404 that echoes the key it was sent in the form ``n`` names."""

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        n = unquote(environ.get("QUERY_STRING", "").removeprefix("n="))
        key = environ.get("HTTP_AUTHORIZATION", "").removeprefix("Bearer ")
        if n.startswith("<"):
            start_response(
                "404 Not Found",
                [
                    ("Content-Type", "text/html"),
                    ("Set-Cookie", "verdict_mock=attacker; Path=/_mock/"),
                    ("Refresh", "0; url=/_mock/reset"),
                    ("Cache-Control", "no-store"),
                ],
            )
            return [f"<h1>No session {n}</h1>".encode()]
        echoed = {
            "raw": f'"{key}"',
            "escaped": f'"{_escaped(key)}"',
            "percent": f'"{quote(key, safe="")}"',
            "base64": f'"{base64.b64encode(f"Bearer {key}".encode()).decode()}"',
            "base64-part": f'"{base64.b64encode(key[:-4].encode()).decode()}"',  # 8 of its own
            "hex-part": f'"{key[:-4].encode().hex()}"',
            "capitals": f'"{key[:16].swapcase()}"',  # its letters only, case swapped
            "full-width": f'"{"".join(chr(ord(c) + 0xFEE0) if c.isalnum() else c for c in key)}"',
            "percent-twice": f'"{"".join(f"%25{b:02X}" for b in key.encode())}"',
            "utf-16": '"' + key.encode("utf-16-le").decode("latin-1") + '"',  # NULs between
            "utf-16-and-plain": f'["{key}", "' + key.encode("utf-16-le").decode("latin-1") + '"]',
            "header": '"none"',
        }[n]
        start_response(
            "404 Not Found",
            [
                ("Content-Type", "application/json"),
                ("X-Debug-Auth", f"Bearer {key}"),
                ("WWW-Authenticate", f'Bearer realm="{key}"'),
            ],
        )
        return [b'{"error": {"code": "not_found", "seen": %s}}' % echoed.encode()]


@pytest.fixture(scope="module")
def hostile() -> Iterator[BackgroundServer]:
    with running(Hostile()) as server:  # type: ignore[arg-type]
        yield server


def test_an_upstream_page_is_never_active_content_on_the_mocks_origin(
    hostile: BackgroundServer, proxy_to: Any
) -> None:
    proxy = proxy_to(hostile.base_url)
    page = proxy.get(PAGE)
    assert page.status_code == 404
    assert page.content == f"<h1>No session {PAGE}</h1>".encode()  # the bytes, but inert:
    assert page.headers["content-type"] == "application/json"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["content-security-policy"] == "sandbox; default-src 'none'"
    assert "set-cookie" not in page.headers
    assert "refresh" not in page.headers
    assert page.headers["cache-control"] == "no-store"  # what an API answer needs passes
    (entry,) = proxy.journal()
    assert entry["violations"] == [
        "the upstream's 404 body is not JSON (sent as text/html, served as application/json)"
    ]
    assert proxy.get("demo-refused").headers["x-content-type-options"] == "nosniff"  # any /e


def test_strict_answers_an_upstream_page_with_502(hostile: BackgroundServer, proxy_to: Any) -> None:
    proxy = proxy_to(hostile.base_url, proxy_strict=True)
    page = proxy.get(PAGE)
    assert page.status_code == 502
    assert page.headers["content-type"] == "application/json"
    assert page.json() == {
        "error": {
            "code": "upstream_not_json",
            "message": "the upstream's 404 body is not JSON (sent as text/html, served as "
            "application/json)",
        }
    }
    assert "set-cookie" not in page.headers


def _key_forms(key: str) -> list[str]:
    part = key[:-4]  # all but what a mask shows, encoded
    return [key, quote(key, safe=""), _escaped(key), *base64_forms(key), *base64_forms(part),
            part.encode().hex()]  # fmt: skip


def _shows_key(response: httpx.Response, key: str) -> list[str]:
    text = "\n".join([*(f"{k}: {v}" for k, v in response.headers.items()), response.text])
    shown = [form for form in _key_forms(key) if form in text]
    with contextlib.suppress(ValueError):
        if key in json.dumps(response.json(), ensure_ascii=False):
            shown.append("JSON-decoded")
    return shown


@pytest.mark.parametrize(
    "form",
    [
        *("raw", "escaped", "percent", "base64", "base64-part", "hex-part", "capitals"),
        *("full-width", "percent-twice", "utf-16", "utf-16-and-plain", "header"),
    ],
)
def test_an_upstream_that_reflects_its_key_is_flagged_masked_and_not_recorded(
    hostile: BackgroundServer,
    proxy_to: Any,
    tmp_path: Path,
    form: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    record = tmp_path / "recorded.yaml"
    settings = {"upstream_key": Secret(UPSTREAM_KEY), "record": record}
    proxy = proxy_to(hostile.base_url, **settings)
    with caplog.at_level(logging.DEBUG):  # httpcore's trace of the answer included
        answer = proxy.get(form, LOCAL)
    assert "receive_response_headers" in caplog.text  # the trace was on
    assert [f for f in _key_forms(UPSTREAM_KEY) if f in caplog.text] == []
    assert answer.status_code == 404
    assert _shows_key(answer, UPSTREAM_KEY) == []
    assert UPSTREAM_KEY[:8].encode("utf-16-le") not in answer.content
    assert "x-debug-auth" not in answer.headers
    assert answer.headers["www-authenticate"] == f'Bearer realm="...{UPSTREAM_KEY[-4:]}"'
    assert answer.json()["error"]["code"] == "not_found"  # still the upstream's JSON
    (violation, note) = proxy.journal()[-1]["violations"]
    assert violation.startswith("§5 key_reflected at /: the answer holds a key it was sent")
    assert ("body" in violation) == (form != "header")
    assert note == "not recorded: the answer holds the key sent upstream"
    proxy.written()
    recorded = record.read_text(encoding="utf-8") if record.exists() else ""
    assert [f for f in _key_forms(UPSTREAM_KEY) if f in recorded] == []
    assert form not in recorded


def test_a_key_in_a_utf16_text_body_is_masked(proxy_to: Any) -> None:
    """A JSON body in UTF-16 is read as JSON (its strings masked); a text one between its NULs."""

    def utf16(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        key = environ["HTTP_AUTHORIZATION"].removeprefix("Bearer ")
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-16")])
        return [f"no session; your key is {key}".encode("utf-16")]  # with its byte order mark

    with running(utf16) as upstream:  # type: ignore[arg-type]
        proxy = proxy_to(upstream.base_url, upstream_key=Secret(UPSTREAM_KEY))
        answer = proxy.get("s1", LOCAL)
    print("CONTENT", answer.content, proxy.journal())
    assert answer.status_code == 404
    for codec in ("utf-8", "utf-16-le"):
        assert UPSTREAM_KEY[:8].encode(codec) not in answer.content
    assert UPSTREAM_KEY[-4:] in answer.content.decode("utf-8", "replace")  # masked, as a mask is
    (violation, *_) = proxy.journal()[-1]["violations"]
    assert violation.startswith("§5 key_reflected at /: the answer holds a key it was sent (body)")


def _echoing(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    """An upstream that puts its query's ``e`` in a 200's verdict, a field's name and a header."""
    echoed = dict(pair.split("=", 1) for pair in environ["QUERY_STRING"].split("&"))["e"]
    start_response("200 OK", [("Content-Type", "application/json"), ("X-Seen", echoed)])
    return [json.dumps({"verdict": echoed, echoed: 1}).encode()]


def test_a_mock_secret_the_upstream_echoes_is_masked_everywhere_and_not_recorded(
    proxy_to: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A client may send the mock's own key or token in its query (never sent upstream as a
    credential): an upstream echoing it is caught as the key it was sent upstream is."""
    token, record = "control-token-0123456789", tmp_path / "recorded.yaml"
    settings = {"upstream_key": Secret(UPSTREAM_KEY), "control_token": Secret(token)}
    with running(_echoing) as upstream:  # type: ignore[arg-type]
        proxy = proxy_to(upstream.base_url, api_keys=(KEY,), record=record, **settings)
        with caplog.at_level(logging.INFO):
            for secret in (KEY, token):
                answer = proxy.http.get("/e", params={"n": "s1", "e": secret}, headers=bearer())
                assert answer.status_code == 200
                assert secret[:8] not in answer.text + answer.headers.get("x-seen", "")
            journal = proxy.http.get("/_mock/requests", headers={"X-Mock-Token": token})
        proxy.written()
    for entry in journal.json():
        reflected = (
            "§5 key_reflected at /: the answer holds a key it was sent (header X-Seen, body)"
        )
        assert any(v.startswith(reflected) for v in entry["violations"]), entry["violations"]
    logged = [r.getMessage() for r in caplog.records if not r.name.startswith("httpx")]  # ours
    shown = journal.text + "".join(logged) + (record.read_text() if record.exists() else "")
    for secret in (KEY, token):
        assert [
            secret[i : i + 8] for i in range(len(secret) - 7) if secret[i : i + 8] in shown
        ] == []


def test_an_upstream_key_in_a_header_name_or_the_reason_phrase_is_shown_nowhere(
    proxy_to: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The upstream chooses its header names and its status line's words too (raw bytes: a
    WSGI server would write its own reason phrase)."""
    key = "QzKey-0123456789-abcXYZ"
    body = b'{"error": {"code": "unauthorized", "message": "no"}}'
    head = f"HTTP/1.1 401 bad key {key}\r\nContent-Type: application/json\r\nX-{key}: 1\r\n"
    answer_bytes = head.encode() + b"Content-Length: %d\r\n\r\n" % len(body) + body
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(10)

        def serve_one() -> None:
            with contextlib.suppress(OSError):
                connection, _ = listener.accept()
                with connection:
                    connection.recv(65536)
                    connection.sendall(answer_bytes)

        upstream = threading.Thread(target=serve_one, daemon=True)
        upstream.start()
        port = listener.getsockname()[1]
        proxy = proxy_to(f"http://127.0.0.1:{port}", upstream_key=Secret(key))
        with caplog.at_level(logging.INFO):
            answer = proxy.get("s1", LOCAL)
            journal = proxy.http.get("/_mock/requests")
        upstream.join(10)
    assert answer.status_code == 401
    assert f'127.0.0.1:{port}/e?… "HTTP/1.1 401 …"' in caplog.text  # the reason phrase hidden
    (violation,) = [v for v in journal.json()[-1]["violations"] if "key_reflected" in v]
    assert "(header X-…cXYZ)" in violation
    shown = answer.text + str(answer.headers) + journal.text + caplog.text
    assert [key[i : i + 8] for i in range(len(key) - 7) if key[i : i + 8] in shown] == []


@pytest.mark.parametrize("scheme", ["Token ", ""], ids=["Token", "bare"])
def test_a_key_reflected_whatever_its_scheme_is_flagged_and_not_recorded(
    hostile: BackgroundServer, proxy_to: Any, tmp_path: Path, scheme: str
) -> None:
    """Without --upstream-key the client's own credential goes up, in whatever form it sent."""
    record = tmp_path / "recorded.yaml"
    proxy = proxy_to(hostile.base_url, record=record)
    answer = proxy.get("raw", {"Authorization": f"{scheme}{CLIENT_KEY}"})
    assert _shows_key(answer, CLIENT_KEY) == []
    (violation, note) = proxy.journal()[-1]["violations"]
    assert violation.startswith("§5 key_reflected at /: the answer holds a key it was sent")
    assert note == "not recorded: the answer holds the key sent upstream"
    proxy.written()
    assert not record.exists() or CLIENT_KEY[-12:] not in record.read_text(encoding="utf-8")


@pytest.mark.parametrize("given", ["upstream key", "client's key"])
def test_a_session_id_holding_a_key_is_masked_everywhere_and_not_recorded(
    upstream: BackgroundServer,
    proxy_to: Any,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    given: str,
) -> None:
    record = tmp_path / "recorded.yaml"
    settings: dict[str, Any] = {"record": record, "access_log": True}
    secret, headers = KEY, bearer(KEY)  # without --upstream-key the client sends the upstream's
    if given == "upstream key":
        headers, settings["upstream_key"] = LOCAL, Secret(KEY)
    proxy = proxy_to(upstream.base_url, **settings)
    with caplog.at_level(logging.INFO):
        assert proxy.get(f"a-{secret}", headers).status_code == 404
    proxy.written()
    (entry,) = proxy.journal()
    assert entry["n"] == f"…{secret[-4:]}"
    assert "not recorded: the session id holds a key" in entry["violations"]
    recorded = record.read_text(encoding="utf-8") if record.exists() else ""
    # the test's own client logs its call to the proxy; the proxy's lines are the others
    logged = [r.getMessage() for r in caplog.records if proxy.server.base_url not in r.getMessage()]
    assert any('"GET /e?n=…' in line for line in logged)  # the access log's line
    outputs = {"journal": json.dumps(entry), "log": "\n".join(logged), "recording": recorded}
    for name, shown in outputs.items():
        assert [form for form in _key_forms(secret) if form in shown] == [], name


def test_strict_answers_a_reflected_key_with_502(hostile: BackgroundServer, proxy_to: Any) -> None:
    proxy = proxy_to(hostile.base_url, upstream_key=Secret(UPSTREAM_KEY), proxy_strict=True)
    answer = proxy.get("raw", LOCAL)
    assert answer.status_code == 502
    assert answer.json()["error"]["code"] == "contract_breach"
    assert [v["rule"] for v in answer.json()["error"]["violations"]] == ["key_reflected"]
    assert _shows_key(answer, UPSTREAM_KEY) == []


def test_the_recording_is_bounded_in_bytes_and_says_so(
    upstream: BackgroundServer, proxy_to: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    record = tmp_path / "recorded.json"
    proxy = proxy_to(upstream.base_url, record=record, record_max_bytes=1000)
    with caplog.at_level(logging.WARNING, logger="mockserver.recorder"):
        for n in ("demo-contradicted", "demo-refused", "demo-disputed", "demo-insufficient"):
            assert proxy.get(n).status_code == 200
            proxy.written()
    kept = set(load_scenario(record).sessions)
    assert 0 < len(kept) < 4
    assert record.stat().st_size <= 1000
    refused = [e for e in proxy.journal() if e["n"] not in kept]
    assert refused
    for entry in refused:
        assert entry["violations"] == [
            "not recorded: the recording reached its bound of 1000 bytes (--record-max-bytes)"
        ]
    lines = [r.getMessage() for r in caplog.records if r.name == "mockserver.recorder"]
    assert len(lines) == 1, lines  # said once, journaled each time


def _escaping_headers(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    """An upstream whose forwarded headers hold a terminal's escapes (or not)."""
    escaped = "escape" in environ["QUERY_STRING"]
    retry = "1\x1b[2J\x7f" if escaped else "1"
    start_response("404 Not Found", [("Content-Type", "application/json"), ("Retry-After", retry)])
    return [b'{"error": {"code": "not_found", "message": "no such session"}}']


@pytest.mark.parametrize(("n", "forwarded"), [("plain", "1"), ("escape", None)])
def test_a_forwarded_header_holding_a_control_character_is_not_passed_on(
    proxy_to: Any, n: str, forwarded: str | None
) -> None:
    with running(_escaping_headers) as upstream:  # type: ignore[arg-type]
        answer = proxy_to(upstream.base_url).get(n)
    assert answer.status_code == 404
    assert answer.headers.get("retry-after") == forwarded
