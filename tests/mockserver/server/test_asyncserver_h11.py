"""mockserver.server.asyncserver against h11: random pipelined streams, every answer well framed.

h11 is a strict HTTP/1.1 state machine; as a client it reads what the server wrote and rejects
anything badly framed (a length that lies, a body where none may be, an answer out of turn).
Hypothesis draws streams of pipelined requests, valid and hostile, cut at random points; each is
sent over a real socket, the client half-closes, and every answer must be one h11 accepts, in
order, with the status the request it answers calls for; the server must close, not hang.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import h11
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.helpers import KEY, wait_until
from tests.mockserver.server.test_asyncserver import on_loop, serving
from verdict_contract.core.rates import RateLimit
from verdict_contract.mockserver import Settings
from verdict_contract.mockserver.server.asyncserver import AsyncServer

AUTH = f"Authorization: Bearer {KEY}\r\n"


class Sent:
    """One request of a stream: its bytes, and what must answer it."""

    __slots__ = ("closes", "data", "method", "status")

    def __init__(self, data: bytes, method: str, status: int, closes: bool = False) -> None:
        self.data = data
        self.method = method  # as h11 must know it (a HEAD answer has no body)
        self.status = status
        self.closes = closes  # Connection: close, HTTP/1.0, a refusal: nothing after it answered

    def __repr__(self) -> str:  # short: a 70 KB header would make Hypothesis' report huge
        shown = self.data if len(self.data) <= 80 else self.data[:80] + b"..."
        return f"Sent({shown!r} ({len(self.data)} bytes), {self.status})"


def _valid(line: str, headers: str, status: int, body: bytes = b"", close: bool = False) -> Sent:
    method = line.split(" ", 1)[0]
    version = "HTTP/1.1"
    if close:
        headers += "Connection: close\r\n"
    head = f"{line} {version}\r\nHost: 127.0.0.1\r\n{headers}\r\n".encode()
    return Sent(head + body, method, status, close)


def _json_post(kind: str, close: bool) -> Sent:
    headers = "Content-Type: application/json\r\n"
    if kind == "chunked":
        return _valid(
            "POST /_mock/sessions",
            headers + "Transfer-Encoding: chunked\r\n",
            201,
            b"2\r\n{}\r\n0\r\n\r\n",
            close,
        )
    if kind == "continue":
        headers += "Expect: 100-continue\r\n"
    return _valid("POST /_mock/sessions", headers + "Content-Length: 2\r\n", 201, b"{}", close)


VALID = st.one_of(
    st.builds(lambda c: _valid("GET /e?n=demo-refused", AUTH, 200, close=c), st.booleans()),
    st.builds(lambda c: _valid("HEAD /e?n=demo-refused", AUTH, 200, close=c), st.booleans()),
    st.builds(lambda c: _valid("GET /e?n=demo-refused", "", 401, close=c), st.booleans()),
    st.builds(lambda c: _valid("GET /e?n=a&n=b", AUTH, 400, close=c), st.booleans()),
    st.builds(lambda c: _valid("POST /e", "Content-Length: 0\r\n", 405, close=c), st.booleans()),
    st.builds(lambda c: _valid("GET /_mock/health", "", 200, close=c), st.booleans()),
    st.builds(lambda c: _valid("HEAD /_mock/health", "", 200, close=c), st.booleans()),
    st.builds(lambda c: _valid("GET /nowhere", "", 404, close=c), st.booleans()),
    st.builds(_json_post, st.sampled_from(["length", "chunked", "continue"]), st.booleans()),
    st.just(
        Sent(b"GET /e?n=demo-refused HTTP/1.0\r\n" + AUTH.encode() + b"\r\n", "GET", 200, True)
    ),
)


def _refused(data: bytes, status: int) -> Sent:
    return Sent(data, "GET", status, closes=True)


REFUSALS = (
    _refused(b"NOT A REQUEST\r\n\r\n", 400),
    _refused(b"GET /e HTTP/2.0\r\nHost: x\r\n\r\n", 400),
    _refused(b"GET /e HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", 400),
    _refused(b"POST /_mock/sessions HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n{}", 413),
    _refused(b"POST /x HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
    _refused(b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
    _refused(b"POST /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400),
    _refused(b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1\r\nx\r\n" * 1001, 413),
    _refused(b"GET /e HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431),
)
HOSTILE = st.sampled_from(REFUSALS)
STREAMS = st.lists(st.one_of(VALID, VALID, VALID, HOSTILE), min_size=1, max_size=10)


@pytest.fixture(scope="module")
def server() -> Iterator[AsyncServer]:
    settings_ = Settings(api_keys=(KEY,), rate_limit=RateLimit.parse("off"), max_body=1000)
    with serving(settings_) as running:
        yield running
        assert wait_until(lambda: on_loop(running, lambda: len(running.connections)) == 0)


def exchange(port: int, data: bytes) -> bytes:
    """Send ``data``, half-close, and read until the server closes (a timeout: it hung)."""
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:  # refused while sending (a reset, a closed end): read what was answered
            pass
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass
    return received


def answers(data: bytes, sent: list[Sent]) -> list[int]:
    """The final statuses h11 reads from ``data``, one per request in turn (raises if framing
    is wrong); stops where the server closed."""
    client = h11.Connection(h11.CLIENT)
    client.receive_data(data)
    client.receive_data(b"")  # the server closed
    statuses: list[int] = []
    for request in sent:
        if client.trailing_data == (b"", True):
            return statuses  # closed between two answers
        headers = [("Host", "x")] + ([("Connection", "close")] if request.closes else [])
        client.send(h11.Request(method=request.method, target="/", headers=headers))
        client.send(h11.EndOfMessage())
        status, continued = None, False
        while True:
            try:
                event = client.next_event()
            except h11.RemoteProtocolError:  # as h11 reads a close after a 100 Continue alone
                if not continued:
                    raise  # the answers are not well framed
                assert status is None, "the connection closed inside an answer"
                return statuses  # the request was cut inside its body: no answer is owed
            if isinstance(event, h11.InformationalResponse):
                continued = True
            if isinstance(event, h11.ConnectionClosed):
                assert status is None, "the connection closed inside an answer"
                return statuses
            assert event is not h11.NEED_DATA, "an answer stops short"
            if isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.EndOfMessage):
                break
        assert status is not None
        statuses.append(status)
        if client.their_state is h11.MUST_CLOSE or client.our_state is h11.MUST_CLOSE:
            assert client.next_event() in (h11.ConnectionClosed(), h11.PAUSED), "bytes after close"
            return statuses
        client.start_next_cycle()
    assert isinstance(client.next_event(), h11.ConnectionClosed), "an answer nobody asked for"
    return statuses


@pytest.mark.parametrize("refusal", REFUSALS, ids=lambda r: r.data[:30].decode())
def test_each_refusal_comes_in_turn_and_ends_the_connection(
    server: AsyncServer, refusal: Sent
) -> None:
    valid = _valid("GET /e?n=demo-refused", AUTH, 200)
    stream = [valid, refusal, valid]
    data = exchange(server.effective_port, b"".join(s.data for s in stream))
    assert answers(data, stream) == [200, refusal.status]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=STREAMS, cut=st.one_of(st.none(), st.none(), st.floats(0, 1)))
@example(stream=[_json_post("continue", close=False)], cut=0.984375)  # its head whole, no body
def test_every_answer_is_well_framed_and_in_turn(
    server: AsyncServer, stream: list[Sent], cut: float | None
) -> None:
    data = b"".join(s.data for s in stream)
    end = len(data) if cut is None else int(len(data) * cut)
    required: list[int] = []  # the answers owed for the requests sent whole
    partial = False
    offset = 0
    for request in stream:
        offset += len(request.data)
        if offset > end:
            partial = True  # cut inside it: unanswered, or refused
            break
        required.append(request.status)
        if request.closes:
            break
    statuses = answers(exchange(server.effective_port, data[:end]), stream)
    assert len(required) <= len(statuses) <= len(required) + partial, (required, statuses)
    assert statuses[: len(required)] == required
    if len(statuses) > len(required):  # the request cut short was refused before its end
        assert statuses[-1] in (400, 413, 431), statuses
