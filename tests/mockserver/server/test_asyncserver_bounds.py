"""mockserver.asyncserver and connection: one misbehaving client does not hold the server.

Each bound of the README's "Which server" section, over real sockets on 127.0.0.1; where a bound
is about memory, the memory is read from the server process itself (``/proc/<pid>/status``).
"""

from __future__ import annotations

import contextlib
import gc
import http.client
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import tracemalloc
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from flask import Flask

from tests.helpers import (
    KEY,
    bearer,
    clean_environ,
    error_of,
    raw_request,
    read_line,
    running,
    wait_until,
)
from tests.mockserver.server.test_asyncserver import get, mint, on_loop, serving, split
from verdict_contract.core.rates import RateLimit
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.model.scenario import ScenarioError, load_scenario
from verdict_contract.mockserver.model.scripts import SCRIPT_BYTES, STEP_BYTES
from verdict_contract.mockserver.server import asyncserver
from verdict_contract.mockserver.server.asyncserver import MAX_PIPELINED, AsyncServer
from verdict_contract.mockserver.store.journal import UNTRUSTED_KEPT
from verdict_contract.mockserver.web.answers import state_of

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

if sys.platform != "linux":  # pragma: no cover - /proc is where the memory is read
    pytest.skip("reads the server's memory from /proc", allow_module_level=True)

OPEN = RateLimit.parse("off")
BIG = 256 * 1024  # the body of the large recorded verdict


def big_scenario(tmp_path: Path) -> Path:
    """A scenario with one session whose recorded answer is :data:`BIG` bytes."""
    body = json.dumps({"verdict": "refused", "padding": "x" * BIG})[:BIG]
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"sessions": {"big": {"recorded": {"status": 200, "body": body}}}}))
    return path


# --- a server in its own process, to read its memory ------------------------------------------


@contextmanager
def mock_process(*flags: str) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """``python -m verdict_contract.mockserver`` on a free port; yields the process and port."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "verdict_contract.mockserver", "--port", "0", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=clean_environ(),
    )
    try:
        line = read_line(proc)
        assert line is not None, "the mock did not start"
        match = re.search(r":(\d+)$", line.strip())
        assert match is not None, line
        yield proc, int(match.group(1))
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        assert proc.stdout is not None
        proc.stdout.close()


def memory_kb(pid: int, field: str = "VmHWM") -> int:
    """A memory figure of a process in KiB (VmHWM: the most it has held; VmRSS: now)."""
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(rf"^{field}:\s+(\d+) kB", status, re.MULTILINE)
    assert match is not None
    return int(match.group(1))


def test_pipelined_requests_for_large_answers_are_not_answered_into_memory(
    tmp_path: Path,
) -> None:
    flags = ("--api-key", KEY, "--rate-limit", "off", "--scenario", str(big_scenario(tmp_path)))
    with mock_process(*flags) as (proc, port), socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port))
        sock.settimeout(10)
        sock.sendall(get("big"))  # one answer first: the server has served a big answer
        read_answer(sock)
        before = memory_kb(proc.pid)
        sock.sendall(get("big") * (MAX_PIPELINED - 1))  # ~8 KB of requests, 25 MB of answers
        assert sock.recv(1, socket.MSG_PEEK)  # the server has begun on them
        # An answer on another connection: the loop has finished with the read that held them
        # all; had it answered every one then, its peak would have grown by 25 MB.
        headers = {"Authorization": f"Bearer {KEY}"}
        url = f"http://127.0.0.1:{port}/e?n=demo-refused"
        assert httpx.get(url, headers=headers).status_code == 200
        grown = memory_kb(proc.pid) - before
    assert grown < 8 * 1024, f"the server grew by {grown} KiB for a client that does not read"


def read_answer(sock: socket.socket) -> bytes:
    """Read one answer with a Content-Length body, exactly."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(1)
    length = int(split(data)[1]["content-length"])
    body = b""
    while len(body) < length:
        body += sock.recv(length - len(body))
    return data + body


def drain(sock: socket.socket) -> None:
    """Read until the server closes (or resets) the connection."""
    while sock.recv(65536):
        pass


def test_a_connection_whose_answers_do_not_drain_is_aborted(tmp_path: Path) -> None:
    settings = Settings(api_keys=(KEY,), rate_limit=OPEN, scenario=big_scenario(tmp_path))
    with serving(settings, idle_timeout=1.0) as server, socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.effective_port))
        sock.sendall(get("big") * MAX_PIPELINED)  # 25 MB of answers, and read nothing
        assert wait_until(lambda: on_loop(server, lambda: len(server.connections)) == 1)

        def paused() -> list[bool]:
            return on_loop(server, lambda: [c.flow.write_paused for c in server.connections])

        assert wait_until(lambda: paused() == [True]), "the client's answers did not pile up"
        # close() would wait for a drain that never comes; abort() frees it after the timeout
        assert wait_until(lambda: on_loop(server, lambda: len(server.connections)) == 0, 10)
        with pytest.raises(ConnectionResetError):  # what was sent is dropped, not delivered
            drain(sock)


def test_a_scenario_reload_keeps_nothing_of_the_sessions_it_replaced(tmp_path: Path) -> None:
    # Each reload parses the recorded body anew: a session it replaced, still held (with its
    # 256 KB body) by what answered it, would cost that much more memory at every reload.
    path = big_scenario(tmp_path)
    settings = Settings(api_keys=(KEY,), rate_limit=OPEN, scenario=path)
    with serving(settings) as server:
        assert isinstance(server.app, Flask)
        state = state_of(server.app)
        replaced = []
        for _ in range(3):
            replaced.append(weakref.ref(state.named["big"]))
            status, _, body = split(raw_request(server.effective_port, get("big")))
            assert status == 200
            assert len(body) == BIG
            state.apply(load_scenario(path))  # what the file watcher and SIGHUP do
        gc.collect()
        assert [ref() is None for ref in replaced] == [True, True, True]  # freed
        status, _, body = split(raw_request(server.effective_port, get("big")))
        assert (status, len(body)) == (200, BIG)  # the session now named is served


def test_the_answer_caches_keep_no_big_body_of_a_scenario_reloaded_again_and_again(
    tmp_path: Path,
) -> None:
    # Answers are kept for speed; a recorded body is new at each reload (the operator edits
    # it): were big ones kept, 20 reloads would hold 20 bodies of 256 KB, even with the
    # sessions themselves freed. Memory is traced in this process, where the server runs.
    path = tmp_path / "big.json"
    settings = Settings(api_keys=(KEY,), rate_limit=OPEN, scenario=big_scenario(tmp_path))
    with serving(settings) as server:
        assert isinstance(server.app, Flask)
        state = state_of(server.app)
        tracemalloc.start()
        try:
            held = []
            for round_ in range(20):
                padding = f"{round_:02}" + "x" * BIG
                body = json.dumps({"verdict": "refused", "padding": padding})[:BIG]
                scenario = {"sessions": {"big": {"recorded": {"status": 200, "body": body}}}}
                path.write_text(json.dumps(scenario))
                state.apply(load_scenario(path))
                for _ in range(2):  # the first answer builds, the second is found
                    status, _, answered = split(raw_request(server.effective_port, get("big")))
                    assert (status, answered) == (200, body.encode())
                gc.collect()
                held.append(tracemalloc.get_traced_memory()[0])
        finally:
            tracemalloc.stop()
    assert held[-1] - held[1] < 4 * BIG  # 18 more reloads: 4.5 MB were they kept


# --- requests queued per connection, connections per server -----------------------------------


@pytest.mark.parametrize("count", [MAX_PIPELINED, MAX_PIPELINED + 1])
def test_requests_queued_on_one_connection_are_bounded(count: int) -> None:
    settings = Settings(api_keys=(KEY,), rate_limit=OPEN)
    with serving(settings) as server:
        base = f"http://127.0.0.1:{server.effective_port}"
        with httpx.Client(base_url=base) as client:
            slow = mint(client, script=[{"delay_ms": 100}])  # the rest queue behind it
        requests = get(slow) + get("demo-refused") * (count - 2)
        requests += get("demo-refused")[:-2] + b"Connection: close\r\n\r\n"
        with socket.create_connection(("127.0.0.1", server.effective_port), timeout=10) as sock:
            sock.sendall(requests)
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", data)
    if count <= MAX_PIPELINED:
        assert statuses == [b"200"] * count
    else:
        assert statuses == [b"200"] * MAX_PIPELINED + [b"503"]
        refusal = data[data.rindex(b"HTTP/1.1 503") :]
        status, headers, body = split(refusal)
        assert error_of(status, headers["content-type"], body)["code"] == (
            "too_many_pipelined_requests"
        )


@dataclass
class TwoPlaces:
    """A mock of ``--max-connections 2`` on a thread, and the sockets a test holds to it."""

    server: AsyncServer
    held: contextlib.ExitStack

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.effective_port}"

    def connect(self) -> socket.socket:
        address = ("127.0.0.1", self.server.effective_port)
        return self.held.enter_context(socket.create_connection(address, timeout=5))


@contextmanager
def two_places(monkeypatch: pytest.MonkeyPatch, make_room_after: float) -> Iterator[TwoPlaces]:
    monkeypatch.setattr(asyncserver, "MAKE_ROOM_AFTER", make_room_after)
    settings = Settings(api_keys=(KEY,), rate_limit=OPEN, max_connections=2)
    with serving(settings) as server, contextlib.ExitStack() as held:
        yield TwoPlaces(server, held)


def test_connections_past_the_bound_are_refused_and_fresh_ones_served_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with two_places(monkeypatch, 3600.0) as places:  # none gives way
        server, base = places.server, places.base
        first = places.connect()
        places.connect()
        assert wait_until(lambda: on_loop(server, lambda: server.open) == 2)
        refused = httpx.get(f"{base}/e", params={"n": "demo-refused"}, headers=bearer())
        assert refused.status_code == 503
        assert refused.headers["connection"] == "close"
        assert refused.headers["retry-after"] == "1"
        error = error_of(503, refused.headers["content-type"], refused.content)
        assert error["code"] == "too_many_connections"
        assert "--max-connections" in error["message"]
        first.close()
        assert wait_until(lambda: on_loop(server, lambda: server.open) == 1)
        served = httpx.get(f"{base}/e", params={"n": "demo-refused"}, headers=bearer())
        assert served.status_code == 200


def test_slowloris_holding_every_place_does_not_keep_the_probe_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with two_places(monkeypatch, 0.0) as places:  # no clock to wait on
        server, drips = places.server, [places.connect() for _ in "ab"]
        for drip in drips:  # each a request head that never ends
            drip.sendall(b"GET /e?n=demo-refused HTTP/1.1\r\nHost: x\r\nX-Drip: a")

        def arriving() -> int:
            return sum(c.arriving is not None for c in server.connections)

        assert wait_until(lambda: on_loop(server, arriving) == 2)
        for _ in drips:  # each probe's connection kept open: the bound is reached again
            probe = places.held.enter_context(httpx.Client())
            assert probe.get(f"{places.base}/_mock/livez").status_code == 200
        for drip in drips:  # each gave its place with a 408 (then lingers, as a refusal does)
            data = drip.recv(65536)
            while b"}}" not in data:  # the end of the error's JSON
                data += drip.recv(65536)
            status, headers, body = split(data)
            assert headers["connection"] == "close"
            assert status == 408
            assert error_of(status, headers["content-type"], body)["code"] == "request_timeout"


# --- bodies ------------------------------------------------------------------------------------


def test_a_body_in_tiny_chunks_costs_about_its_size() -> None:
    body = b"2\r\nxx\r\n" * (512 * 1024) + b"0\r\n\r\n"  # 1 MiB (the default --max-body)
    head = b"POST /nowhere HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    with mock_process() as (proc, port):
        with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
            sock.sendall(get("demo-refused"))  # warm up: the app has answered once
            sock.recv(65536)
            before = memory_kb(proc.pid)
            sock.sendall(head + body)
            assert split(sock.recv(65536))[0] == 404  # read whole, then answered by the app
        grown = memory_kb(proc.pid) - before
    assert grown < 8 * 1024, f"a 1 MiB body in 2-byte chunks cost {grown} KiB"


def test_http_client_sending_a_body_over_the_limit_reads_the_413() -> None:
    settings = Settings(max_body=1000)
    with serving(settings) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.effective_port, timeout=10)
        try:  # http.client sends the whole body before it reads: the server must let it
            connection.request("POST", "/_mock/sessions", body=b"x" * (4 * 1024 * 1024))
            response = connection.getresponse()
            status, body = response.status, response.read()
        finally:
            connection.close()
    assert status == 413
    assert json.loads(body)["error"]["code"] == "request_entity_too_large"


def test_http_client_sending_a_body_far_past_the_old_byte_drain_reads_the_413() -> None:
    # The drain after a refusal is bounded by time alone (as nginx's lingering_time): 64 MiB,
    # four times the 16 MiB at which it used to reset, is read, discarded, and the 413 read.
    # The drain is made generous here so that a slow machine still sends it all in time.
    size, piece = 64 * 1024 * 1024, b"x" * (1024 * 1024)
    with serving(Settings(max_body=1024 * 1024), drain_seconds=120.0) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.effective_port, timeout=30)
        try:
            connection.request(
                "POST",
                "/_mock/sessions",
                body=iter([piece] * (size // len(piece))),
                headers={"Content-Length": str(size), "Content-Type": "application/json"},
            )
            response = connection.getresponse()
            status, body = response.status, response.read()
        finally:
            connection.close()
    assert status == 413
    assert json.loads(body)["error"]["code"] == "request_entity_too_large"


# --- the key before the query ------------------------------------------------------------------


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every query the mock parses, as /e's decision and the journal read them."""
    from verdict_contract.mockserver import explain

    lengths: list[int] = []
    parse = explain.parse_query

    def counting(query: bytes) -> list[tuple[str, str]] | None:
        lengths.append(len(query))
        return parse(query)

    monkeypatch.setattr(explain, "parse_query", counting)  # journal_elsewhere's reader too
    return lengths


def test_the_query_of_a_request_without_a_key_is_not_parsed_whole(parsed: list[int]) -> None:
    from verdict_contract.mockserver import explain

    query = "n=demo-refused&" + "&".join(f"p{i}=v" for i in range(40_000))  # ~300 KB: 240 KB
    query = query[: 240 * 1024]
    settings = Settings(api_keys=(KEY,), rate_limit=OPEN)
    with running(create_app(settings), server="async") as background:

        def status(key: bytes) -> int:
            request = f"GET /e?{query} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n".encode()
            return split(raw_request(background.effective_port, request + key + b"\r\n"))[0]

        assert status(b"") == 401
        assert max(parsed, default=0) <= explain.MAX_UNAUTHORIZED_QUERY
        assert status(f"Authorization: Bearer {KEY}\r\n".encode()) == 200  # a key: parsed whole
        assert max(parsed) == len(query)


@pytest.mark.parametrize(
    ("method", "path", "kib", "status"),
    [
        ("POST", "/e", 255, 405),  # answered on the loop
        ("PUT", "/e", 255, 405),
        ("DELETE", "/e", 255, 405),
        ("HEAD", "/e", 255, 401),
        # answered by the app (whose URL parser takes 64 KiB), journaled as sent elsewhere
        ("POST", "/nowhere", 60, 404),
    ],
)
def test_no_method_parses_more_than_4_kib_of_a_keyless_query(
    parsed: list[int], method: str, path: str, kib: int, status: int
) -> None:
    from verdict_contract.mockserver import explain

    query = ("n=demo-refused&" + "&".join(f"p{i}=v" for i in range(40_000)))[: kib * 1024]
    settings = Settings(api_keys=(KEY,), rate_limit=OPEN)
    with running(create_app(settings), server="async") as background:
        head = f"{method} {path}?{query} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        answer = raw_request(background.effective_port, head.encode())
        assert split(answer)[0] == status
        assert parsed, "the journal read none of the query"
        assert max(parsed) <= explain.MAX_UNAUTHORIZED_QUERY


# --- the journal against a web page ------------------------------------------------------------


def test_requests_without_a_key_do_not_evict_the_journal() -> None:
    settings = Settings(api_keys=(KEY,), rate_limit=OPEN, journal_size=50)
    with (
        running(create_app(settings), server="async") as background,
        httpx.Client(base_url=background.base_url) as client,
    ):
        assert client.get("/e", params={"n": "demo-refused"}, headers=bearer()).status_code == 200
        for _ in range(UNTRUSTED_KEPT + 100):  # what no-cors fetches from any page can do
            assert client.get("/e", params={"n": "demo-refused"}).status_code == 401
        entries = client.get("/_mock/requests").json()
        assert [e["status"] for e in entries].count(200) == 1  # the test's own request stays
        assert [e["status"] for e in entries].count(401) == UNTRUSTED_KEPT
        for _ in range(60):  # requests with the key share the main ring: it does evict
            client.get("/e", params={"n": "unknown"}, headers=bearer())
        entries = client.get("/_mock/requests").json()
        assert [e["status"] for e in entries].count(200) == 0


# --- stopping ----------------------------------------------------------------------------------


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("attempt", [1, 2])  # Ctrl-C used to be lost now and then
def test_a_signal_stops_the_server_with_a_connection_open(number: int, attempt: int) -> None:
    with mock_process() as (proc, port), httpx.Client() as client:
        base = f"http://127.0.0.1:{port}"
        assert client.get(f"{base}/_mock/health").status_code == 200  # a kept-alive connection
        proc.send_signal(number)
        proc.wait(timeout=5)  # a TimeoutExpired here: the signal was lost
    assert proc.returncode is not None


def test_a_signal_stops_the_proxy_with_a_call_upstream_in_flight() -> None:
    with socket.create_server(("127.0.0.1", 0)) as upstream:  # accepts, never answers
        upstream_port = upstream.getsockname()[1]
        flags = ("--proxy-to", f"http://127.0.0.1:{upstream_port}", "--proxy-timeout", "60")
        with mock_process(*flags) as (proc, port):
            outcome: list[object] = []

            def call() -> None:
                try:
                    outcome.append(httpx.get(f"http://127.0.0.1:{port}/e?n=x", timeout=70))
                except httpx.TransportError as exc:
                    outcome.append(exc)

            caller = threading.Thread(target=call, daemon=True)
            caller.start()
            upstream.settimeout(10)
            accepted, _ = upstream.accept()  # the call has reached the upstream
            with accepted:
                proc.send_signal(signal.SIGINT)  # Ctrl-C
                proc.wait(timeout=5)  # not the 60 s of --proxy-timeout
            caller.join(timeout=10)
    assert outcome, "the client's call did not end"


# --- smaller points ----------------------------------------------------------------------------


def test_an_upgrade_is_answered_with_connection_close(server_with_key: AsyncServer) -> None:
    request = b"GET /e HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server_with_key.effective_port), timeout=5) as s:
        s.sendall(request)  # and no shutdown: the server closes by itself
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    status, headers, _ = split(data)
    assert (status, headers["connection"]) == (401, "close")


@pytest.mark.parametrize(("version", "status"), [(b"HTTP/2.0", 400), (b"HTTP/1.1", 200)])
def test_a_request_line_of_http_2_is_refused(
    server_with_key: AsyncServer, version: bytes, status: int
) -> None:
    request = b"GET /e?n=demo-refused " + version + b"\r\nHost: x\r\n" + _auth() + b"\r\n"
    with socket.create_connection(("127.0.0.1", server_with_key.effective_port), timeout=5) as s:
        s.sendall(request)
        got, headers, body = split(s.recv(65536))
    assert got == status
    if status == 400:
        assert "HTTP/2.0" in error_of(got, headers["content-type"], body)["message"]


def test_mock_without_its_slash_is_a_json_redirect(server_with_key: AsyncServer) -> None:
    response = httpx.get(f"http://127.0.0.1:{server_with_key.effective_port}/_mock")
    assert response.status_code == 308
    assert response.headers["location"] == "/_mock/"
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["code"] == "moved"


def test_a_second_start_response_with_exc_info_replaces_the_headers() -> None:
    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        start_response("200 OK", [("X-First", "1")])
        try:
            raise KeyError("late")
        except KeyError:
            start_response("400 Bad Request", [("X-Error", "1")], sys.exc_info())
        return [b"error page"]

    server = AsyncServer(app, "127.0.0.1", 0, 1)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        response = httpx.get(f"http://127.0.0.1:{server.effective_port}/")
    finally:
        server.stop()
        thread.join(timeout=10)
    assert (response.status_code, response.text) == (400, "error page")
    assert "x-first" not in response.headers
    assert response.headers["x-error"] == "1"


def test_concurrent_mints_get_their_own_numbers(server_with_key: AsyncServer) -> None:
    base = f"http://127.0.0.1:{server_with_key.effective_port}"
    ids: list[str] = []

    def mint_one() -> None:
        with httpx.Client(base_url=base) as client:
            ids.append(mint(client))

    threads = [threading.Thread(target=mint_one) for _ in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert isinstance(server_with_key.app, Flask)
    state = state_of(server_with_key.app)
    sessions = [state.codec.read(n) for n in ids]
    keys = [s.spec.key for s in sessions if s is not None]
    assert len(ids) == 24
    assert len(set(keys)) == 24


@pytest.mark.parametrize(
    ("header", "status"),
    [
        ("Content-Length", 422),
        ("transfer-encoding", 422),
        ("Connection", 422),
        ("Keep-Alive", 422),
        ("X-Request-Id", 201),
    ],
)
def test_a_script_may_not_set_the_headers_that_frame_the_connection(
    server_with_key: AsyncServer, header: str, status: int
) -> None:
    base = f"http://127.0.0.1:{server_with_key.effective_port}"
    step = {"status": 200, "headers": {header: "5"}}
    response = httpx.post(f"{base}/_mock/sessions", json={"script": [step]})
    assert response.status_code == status, response.text
    if status == 422:
        assert repr(header) in response.json()["error"]["message"]


def test_the_script_store_is_bounded_in_bytes_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bound = 20 * STEP_BYTES + 2 * SCRIPT_BYTES  # 20 steps in two scripts
    monkeypatch.setattr("verdict_contract.mockserver.model.scripts.MAX_SCRIPT_BYTES", bound)
    with (
        serving(Settings(api_keys=(KEY,), rate_limit=OPEN)) as server,
        httpx.Client(base_url=f"http://127.0.0.1:{server.effective_port}") as client,
    ):
        n = mint(client, script=[503] * 15)
        full = client.post("/_mock/sessions", json={"script": [503] * 10})
        assert full.status_code == 409
        error = error_of(409, full.headers["content-type"], full.content)
        assert error["code"] == "script_store_full"
        assert f"at most {bound}" in error["message"]
        held = client.get("/_mock/health").json()["script_bytes"]
        assert held == 15 * STEP_BYTES + SCRIPT_BYTES
        for _ in range(10):  # steps answered are freed
            assert client.get("/e", params={"n": n}, headers=bearer()).status_code == 503
        assert client.post("/_mock/sessions", json={"script": [503] * 10}).status_code == 201


def test_a_scenario_over_the_script_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bound = 4 * STEP_BYTES + SCRIPT_BYTES
    monkeypatch.setattr("verdict_contract.mockserver.model.scripts.MAX_SCRIPT_BYTES", bound)
    scenario = tmp_path / "s.yaml"
    scenario.write_text("sessions:\n  flaky: {script: [503, 503, 503]}\n")
    assert create_app(Settings(scenario=scenario)) is not None  # within the bound
    scenario.write_text("sessions:\n  flaky: {script: [503, 503, 503, 503, 503]}\n")
    with pytest.raises(ScenarioError, match=rf"at most {bound} bytes of scripts"):
        create_app(Settings(scenario=scenario))


@pytest.fixture
def server_with_key() -> Iterator[AsyncServer]:
    with serving(Settings(api_keys=(KEY,), rate_limit=OPEN)) as server:
        yield server


def _auth() -> bytes:
    return f"Authorization: Bearer {KEY}\r\n".encode()


@pytest.mark.parametrize(("soft", "hard", "raised"), [(256, 4096, 1128), (200, 200, 200)])
def test_the_open_file_limit_makes_room_for_max_connections(
    soft: int, hard: int, raised: int
) -> None:
    script = (
        "import logging, resource\n"
        "logging.basicConfig(level=logging.WARNING)\n"
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({soft}, {hard}))\n"
        "from verdict_contract.mockserver import Settings, create_app\n"
        "from verdict_contract.mockserver.server.asyncserver import AsyncServer\n"
        "AsyncServer(create_app(Settings()), '127.0.0.1', 0, 1).close()\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert int(done.stdout) == raised
    assert ("--max-connections" in done.stderr) == (raised < 1128), done.stderr  # 1000, 64, 64
