"""``--server waitress`` bounded where waitress lets it be (issue 27, item 9), over real sockets.

waitress reads a whole request before the app sees it: without a bound of its own it spooled a
900 MiB chunked body to a temporary file before the app's 413, and 100 idle sockets (its default
connection limit) kept every other client waiting for its 120 s channel timeout.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import pytest

from tests.helpers import KEY, bearer, running
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.server import serve
from verdict_contract.mockserver.server.serve import BackgroundServer

MAX_BODY = 64 * 1024
DEADLINE = 10.0  # generous: what is bounded answers at once; unbounded, it took 120 s or more


@pytest.fixture
def server() -> Iterator[BackgroundServer]:
    app = create_app(Settings(api_keys=(KEY,), server="waitress", max_body=MAX_BODY))
    with running(app) as background:
        yield background


def _send_until_answered(sock: socket.socket, chunk: bytes, most: int) -> int:
    """Send ``chunk`` again and again until the server answers (or ``most`` bytes); bytes sent."""
    sent = 0
    while sent < most:
        readable, _, _ = select.select([sock], [], [], 0)
        if readable:
            break
        try:
            sock.sendall(chunk)
        except OSError:  # the server answered and closed while the client was still sending
            break
        sent += len(chunk)
    return sent


def _answer(sock: socket.socket) -> bytes:
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            got = sock.recv(65536)
            if not got:
                break
            data += got
    except OSError:
        pass
    return data


def test_a_chunked_body_is_refused_as_it_passes_the_bound(server: BackgroundServer) -> None:
    """Not read to its end (64 MiB here, 900 MiB in the report) before the 413."""
    chunk = b"%x\r\n%s\r\n" % (16 * 1024, b"x" * 16 * 1024)
    with socket.create_connection(("127.0.0.1", server.effective_port), timeout=DEADLINE) as sock:
        sock.sendall(
            b"POST /_mock/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        sent = _send_until_answered(sock, chunk, 64 * 1024 * 1024)
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    # what the kernel's buffers hold besides, and the bound: twice --max-body, framing counted
    assert sent < 8 * 1024 * 1024, f"{sent} bytes sent before the 413"


def test_a_declared_body_over_the_bound_is_refused_before_it_is_read(
    server: BackgroundServer,
) -> None:
    with socket.create_connection(("127.0.0.1", server.effective_port), timeout=DEADLINE) as sock:
        sock.sendall(
            b"POST /_mock/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 943718400\r\n\r\n"
        )
        answer = _answer(sock)  # no byte of the body sent: the answer comes all the same
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_a_body_at_the_limit_still_reaches_the_app(server: BackgroundServer) -> None:
    body = b'{"verdict": "refused", "pad": "' + b"x" * (MAX_BODY - 40) + b'"}'
    with httpx.Client(base_url=server.base_url, timeout=DEADLINE) as http:
        chunked = http.post(
            "/_mock/sessions",
            content=iter([body[:1000], body[1000:]]),
            headers={"Content-Type": "application/json"},
        )
        just_over = http.post(
            "/_mock/sessions",
            content=body + b" " * 40,
            headers={"Content-Type": "application/json"},
        )
    assert chunked.status_code == 422, chunked.text  # read and judged ("pad" is no field)
    assert just_over.status_code == 413  # the app's own JSON answer, naming --max-body
    assert "--max-body" in just_over.json()["error"]["message"]


def test_150_idle_connections_do_not_keep_a_client_out(server: BackgroundServer) -> None:
    with ExitStack() as idle:
        for _ in range(150):  # waitress's default connection_limit is 100
            idle.enter_context(
                socket.create_connection(("127.0.0.1", server.effective_port), timeout=DEADLINE)
            )
        with httpx.Client(base_url=server.base_url, timeout=DEADLINE) as http:
            answer = http.get("/e", params={"n": "demo-refused"}, headers=bearer())
    assert answer.status_code == 200


def test_an_idle_connection_is_closed_after_the_idle_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(serve, "WAITRESS_IDLE_SECONDS", 1)
    monkeypatch.setattr(serve, "WAITRESS_CLEANUP_SECONDS", 1)
    app = create_app(Settings(api_keys=(KEY,), server="waitress"))
    with (
        running(app) as background,
        socket.create_connection(("127.0.0.1", background.effective_port)) as sock,
    ):
        sock.settimeout(DEADLINE)
        began = time.monotonic()
        try:
            closed = sock.recv(1) == b""
        except ConnectionResetError:
            closed = True
        except TimeoutError:
            closed = False
    assert closed, f"still open after {time.monotonic() - began:.0f} s"
