"""mockserver.server.wire: the answers' bytes, and their Date brought up to the second."""

from __future__ import annotations

import contextlib
import socket
import sys
import time
from typing import Any

import pytest

from tests.helpers import wait_until
from verdict_contract.mockserver.model.answer import error_answer
from verdict_contract.mockserver.server.wire import Heads, Reply, unsent

NOON = 1_790_000_000.0  # 2026-09-21 14:13:20 GMT


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [NOON]
    monkeypatch.setattr(time, "time", lambda: now[0])  # wire reads time.time()
    return now


def _date(data: bytes) -> bytes:
    return next(line for line in data.split(b"\r\n") if line.startswith(b"Date: "))


def test_the_date_is_the_ticks_not_each_answers(clock: list[float]) -> None:
    heads, answer = Heads(), error_answer(404, "not_found", "no such session")
    first = heads.answer(answer, False, False, True)[0]
    assert _date(first) == b"Date: Mon, 21 Sep 2026 14:13:20 GMT"
    clock[0] += 5
    assert _date(heads.answer(answer, False, False, True)[0]) == _date(first)
    heads.tick()
    assert _date(heads.answer(answer, False, False, True)[0]) == (
        b"Date: Mon, 21 Sep 2026 14:13:25 GMT"
    )


def test_an_apps_head_ends_with_the_same_date_and_server(clock: list[float]) -> None:
    head, close = Heads().reply(Reply("200 OK", [("Content-Length", "0")], b""), "GET", False)
    assert close
    assert head.endswith(
        b"Date: Mon, 21 Sep 2026 14:13:20 GMT\r\nServer: verdict-mock\r\nConnection: close\r\n\r\n"
    )


def test_an_apps_header_outside_latin_1_is_answered_not_hung() -> None:
    """A header value the app set outside latin-1 is sent with ``?`` for what latin-1 lacks,
    through the real server: the client gets its answer instead of waiting out its timeout."""
    import httpx
    from flask import Response

    from tests.helpers import running
    from verdict_contract.mockserver import Settings, create_app

    app = create_app(Settings())
    app.add_url_rule("/_mock/x", "x", lambda: Response("{}", headers={"X-City": "Łódź"}))
    with running(app, server="async") as server:
        answer = httpx.get(f"{server.base_url}/_mock/x", timeout=5)
    assert answer.status_code == 200
    assert answer.headers["X-City"] == "?ód?"


class _Held:
    """What :func:`unsent` asks of a transport: its own buffer (empty here) and its socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str) -> Any:
        return self.sock if name == "socket" else None


@pytest.mark.skipif(sys.platform != "linux", reason="the kernel's send queue is Linux's to tell")
def test_unsent_counts_what_the_kernel_holds_and_falls_as_the_client_reads() -> None:
    """A slow reader drains the kernel's megabytes before the transport's: that is progress."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        server, _ = listener.accept()
        with client, server:
            server.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                for _ in range(10_000):  # until the kernel holds all it will
                    server.send(b"x" * 65536)
            held = unsent(_Held(server))  # type: ignore[arg-type]
            assert held > 65536
            for _ in range(10):
                client.recv(65536)
            assert wait_until(lambda: unsent(_Held(server)) < held)  # type: ignore[arg-type]
