"""mockserver.server.connection driven through a fake transport and a fake loop.

No socket and no sleep (uvicorn's protocol tests): the test feeds bytes with
``data_received``, reads what was written, and moves the loop's clock itself. What only the
kernel shows (a reset, a full socket) stays in the real-socket tests of test_asyncserver*.py.
"""

from __future__ import annotations

import json
import logging
import sys

import pytest

from tests.helpers import KEY, error_of
from tests.mockserver.fakes import FakeServer, connect, fake_server
from tests.mockserver.server.test_asyncserver import split
from verdict_contract.core.rates import RateLimit
from verdict_contract.mockserver import Settings
from verdict_contract.mockserver.server import asyncserver
from verdict_contract.mockserver.server.asyncserver import (
    IDLE_TIMEOUT,
    MAKE_ROOM_AFTER,
    ROOM_LOOKED_FOR_EVERY,
)
from verdict_contract.mockserver.server.flow import MIN_TAKEN, Closing

AUTH = f"Authorization: Bearer {KEY}\r\n".encode()


def get(n: str) -> bytes:
    return f"GET /e?n={n} HTTP/1.1\r\nHost: x\r\n".encode() + AUTH + b"\r\n"


def answers(data: bytes) -> list[tuple[int, bytes]]:
    """Status and body of each answer written (each carries a Content-Length)."""
    found = []
    while data:
        status, headers, rest = split(data)
        length = int(headers["content-length"])
        found.append((status, rest[:length]))
        data = rest[length:]
    return found


@pytest.fixture
def server() -> FakeServer:
    return fake_server(Settings(api_keys=(KEY,), rate_limit=RateLimit.parse("off")))


def test_a_request_is_answered_and_journaled(server: FakeServer) -> None:
    connection, transport = connect(server)
    connection.data_received(get("demo-refused"))
    ((status, body),) = answers(transport.take())
    assert status == 200
    assert json.loads(body)["verdict"] == "refused"
    assert [e.status for e in server.state.memory.journal.entries()] == [200]
    assert not transport.is_closing()
    assert connection.pipeline == type(connection.pipeline)()  # nothing left waiting


def test_pipelined_requests_wait_while_the_client_does_not_read_then_come_in_order(
    server: FakeServer,
) -> None:
    connection, transport = connect(server)
    connection.pause_writing()  # the client stopped reading its answers
    assert transport.read_paused  # ... so nothing more is read either
    connection.data_received(get("demo-refused") + get("no-such-id") + get("demo-contradicted"))
    assert transport.take() == b""  # nothing is answered while the client does not read
    assert len(connection.pipeline) == 3
    connection.resume_writing()
    written = answers(transport.take())
    assert [status for status, _ in written] == [200, 404, 200]
    assert json.loads(written[0][1])["verdict"] == "refused"
    assert json.loads(written[2][1])["verdict"] == "contradicted"
    assert not transport.read_paused
    assert not connection.pipeline


def test_an_idle_connection_is_closed_by_the_sweep_and_not_before(server: FakeServer) -> None:
    connection, transport = connect(server)
    connection.data_received(b"GET /e HTTP/1.1\r\nHost: x\r\n")  # and never the end of its head
    server.loop.run_later(IDLE_TIMEOUT - 1)
    connection.sweep(server.loop.time(), IDLE_TIMEOUT)
    assert not transport.is_closing()
    server.loop.run_later(2)
    connection.sweep(server.loop.time(), IDLE_TIMEOUT)
    assert transport.closed
    assert connection.flow.state is Closing.CLOSED


def test_a_client_that_stops_reading_is_cut_by_the_sweep(server: FakeServer) -> None:
    connection, transport = connect(server)
    connection.pause_writing()
    connection.data_received(get("demo-refused"))
    server.loop.run_later(IDLE_TIMEOUT + 1)
    connection.sweep(server.loop.time(), IDLE_TIMEOUT)
    assert transport.aborted  # its answers will never drain: dropped
    assert not connection.pipeline


@pytest.mark.parametrize(("taken", "cut"), [(MIN_TAKEN, False), (MIN_TAKEN - 1, True)])
def test_a_client_that_reads_slowly_is_cut_only_below_a_rate(
    server: FakeServer, taken: int, cut: bool
) -> None:
    """Reading a large answer at a crawl is reading (an 11 MB journal at 60 KB/s was cut at
    30 s), as long as MIN_TAKEN of it is taken in each idle timeout: a byte now and then would
    hold the place, and the answer's memory, for ever."""
    connection, transport = connect(server)
    transport.unsent = 11_000_000  # a large answer, handed to the transport
    connection.pause_writing()
    for _ in range(3):  # longer than the idle timeout in all
        server.loop.run_later(IDLE_TIMEOUT - 1)
        transport.unsent -= taken
        connection.sweep(server.loop.time(), IDLE_TIMEOUT)
    assert transport.aborted is cut
    server.loop.run_later(IDLE_TIMEOUT + 1)  # then none taken
    connection.sweep(server.loop.time(), IDLE_TIMEOUT)
    assert transport.aborted


def test_a_refusal_lingers_discards_any_size_and_ends_with_the_drain(server: FakeServer) -> None:
    connection, transport = connect(server)
    connection.data_received(
        b"POST /_mock/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 268435456\r\n\r\n"
    )
    ((status, body),) = answers(transport.take())
    assert status == 413
    assert json.loads(body)["error"]["code"] == "request_entity_too_large"
    assert transport.eof_written
    assert connection.flow.state is Closing.LINGERING
    piece = b"x" * (1024 * 1024)
    references = sys.getrefcount(piece)
    for _ in range(256):  # 256 MiB of the body still sent: read and discarded, whatever its size
        connection.data_received(piece)
    assert sys.getrefcount(piece) == references  # nothing of it was kept
    assert not transport.is_closing()
    assert transport.take() == b""
    server.loop.run_later(server.drain_seconds + 0.1)
    assert transport.aborted


def test_the_clients_eof_while_lingering_lets_the_transport_close(server: FakeServer) -> None:
    connection, transport = connect(server)
    connection.data_received(b"GET /e HTTP/2.0\r\nHost: x\r\n\r\n")
    assert split(transport.take())[0] == 400
    assert connection.eof_received() is False  # False: the transport closes itself
    connection.connection_lost(None)
    assert connection.flow.state is Closing.CLOSED
    assert server.loop.pending == []  # the drain's timer went with it
    assert server.connections == set()
    assert server.open == 0


def test_a_connection_past_the_bound_is_answered_503_and_lingers(server: FakeServer) -> None:
    server.max_connections = 1
    first, _ = connect(server)
    second, transport = connect(server)
    assert split(transport.take())[0] == 503
    assert second.flow.state is Closing.LINGERING
    assert first.flow.state is Closing.OPEN
    assert server.open == 1


def test_a_newcomer_past_the_bound_takes_the_place_of_a_connection_idle_long_enough(
    server: FakeServer,
) -> None:
    server.max_connections = 1
    idle, idle_transport = connect(server)
    idle.data_received(get("demo-refused"))  # answered: it owes nothing
    assert answers(idle_transport.take())[0][0] == 200
    server.loop.run_later(MAKE_ROOM_AFTER - 0.1)
    refused, refused_transport = connect(server)
    assert split(refused_transport.take())[0] == 503  # not idle long enough yet
    server.loop.run_later(0.1)
    newcomer, transport = connect(server)
    assert idle_transport.closed
    assert idle_transport.take() == b""
    newcomer.data_received(get("demo-refused"))
    assert answers(transport.take())[0][0] == 200
    assert server.open == 1
    assert newcomer.counted
    assert not idle.counted
    assert not refused.counted
    idle.connection_lost(None)
    assert server.open == 1  # its place was given back once


def test_a_request_still_arriving_gives_its_place_with_a_408(server: FakeServer) -> None:
    server.max_connections = 2
    slow, slow_transport = connect(server)
    slow.data_received(b"GET /e?n=demo-refused HTTP/1.1\r\nHost: x\r\nX-Drip: a")  # slowloris
    server.loop.run_later(MAKE_ROOM_AFTER / 2)
    fresher, fresher_transport = connect(server)
    fresher.data_received(b"GET /e?n=demo-refused HTTP/1.1\r\n")
    server.loop.run_later(MAKE_ROOM_AFTER / 2 - 0.1)
    slow.data_received(b"b")  # a byte now and then: its request has still been arriving 2 s
    server.loop.run_later(0.1)
    connect(server)  # takes the place of the one arriving longest
    status, headers, body = split(slow_transport.take())
    assert status == 408
    assert headers["connection"] == "close"
    error = error_of(status, headers["content-type"], body)
    assert error["code"] == "request_timeout"
    assert "--max-connections" in error["message"]
    assert slow.flow.state is Closing.LINGERING
    assert fresher.flow.state is Closing.OPEN
    assert fresher_transport.take() == b""
    _, transport = connect(server)  # the fresher one has held its place 1 s only: refused
    assert split(transport.take())[0] == 503


def test_a_connection_owing_an_answer_keeps_its_place(server: FakeServer) -> None:
    server.max_connections = 1
    owing, owing_transport = connect(server)
    owing.pause_writing()  # the client does not read: its answer waits in the pipeline
    owing.data_received(get("demo-refused"))
    server.loop.run_later(MAKE_ROOM_AFTER * 5)
    _, transport = connect(server)
    assert split(transport.take())[0] == 503
    owing.resume_writing()
    assert answers(owing_transport.take())[0][0] == 200


def test_a_client_that_does_not_read_gives_its_place_and_its_unsent_answers(
    server: FakeServer,
) -> None:
    """Closed, it would wait for its answers to drain, for ever, uncounted: it is aborted."""
    server.max_connections = 1
    deaf, deaf_transport = connect(server)
    deaf.data_received(get("demo-refused"))
    deaf_transport.unsent = 64 * 1024  # its answers sit in the transport: the client reads none
    server.loop.run_later(MAKE_ROOM_AFTER)
    connect(server)
    assert deaf_transport.aborted
    assert deaf.flow.state is Closing.ABORTED


def test_a_place_is_looked_for_again_only_a_moment_after_none_was_found(
    server: FakeServer,
) -> None:
    """Each look goes over every connection: a flood of newcomers at the bound looks once a
    moment, not once each."""
    server.max_connections = 1
    _, idle_transport = connect(server)
    server.loop.run_later(MAKE_ROOM_AFTER - ROOM_LOOKED_FOR_EVERY / 2)
    _, refused = connect(server)  # none found
    assert split(refused.take())[0] == 503
    server.loop.run_later(ROOM_LOOKED_FOR_EVERY / 2)  # the idle one could go now...
    _, refused = connect(server)
    assert split(refused.take())[0] == 503  # ... but is not looked for yet
    assert not idle_transport.closed
    server.loop.run_later(ROOM_LOOKED_FOR_EVERY)
    connect(server)
    assert idle_transport.closed


def test_refusals_drain_a_bounded_number_at_a_time(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the bound, the refusal that has drained longest is cut for the next: a flood of
    newcomers at --max-connections holds no more files than that, and each gets its 503."""
    monkeypatch.setattr(asyncserver, "MAX_LINGERING", 2)
    server.max_connections = 1
    connect(server)
    refused = [connect(server) for _ in range(3)]
    states = [connection.flow.state for connection, _ in refused]
    assert states == [Closing.ABORTED, Closing.LINGERING, Closing.LINGERING]
    assert all(split(transport.take())[0] == 503 for _, transport in refused)
    assert list(server.lingering) == [connection for connection, _ in refused[1:]]
    for connection, _ in refused:
        connection.connection_lost(None)
    assert server.lingering == {}


def test_blank_lines_before_a_request_keep_no_place(server: FakeServer) -> None:
    """A byte a second of ``\\r\\n`` (skipped before a request, RFC 9112 §2.2) begins none: the
    connection is idle all the same, for the sweep and at the bound."""
    server.max_connections = 1
    dripping, transport = connect(server)
    for _ in range(int(MAKE_ROOM_AFTER) + 1):
        server.loop.run_later(1)
        dripping.data_received(b"\r\n")
    connect(server)
    assert transport.closed
    assert transport.take() == b""


def test_the_bound_reached_is_logged_once_a_quiet_minute(
    server: FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Every refusal is answered; the operator reads one line when the bound is reached, not
    one per newcomer."""
    server.max_connections = 1
    holder, _ = connect(server)  # holds the place, fresh: none gives way
    with caplog.at_level(logging.WARNING, logger="mockserver.server"):
        for _ in range(3):
            connect(server)
            server.loop.run_later(ROOM_LOOKED_FOR_EVERY * 2)
        assert [r.getMessage() for r in caplog.records] == [
            "--max-connections 1 reached, none idle: 503"
        ]
        server.loop.run_later(61)
        holder.data_received(b"GET /e HTTP/1.1\r\n")  # a request begins: fresh again
        connect(server)
        assert len(caplog.records) == 2
