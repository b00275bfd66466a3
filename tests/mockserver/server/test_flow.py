"""mockserver.server.flow: reading, the client's reading and closing, on a fake transport.

No socket and no sleep: the fake loop's clock moves when the test says (uvicorn's shape).
"""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from tests.mockserver.fakes import FakeLoop, FakeTransport
from verdict_contract.mockserver.server.flow import (
    MOVES,
    Closing,
    ClosingError,
    FlowControl,
)

DRAIN = 5.0


@pytest.fixture
def loop() -> FakeLoop:
    return FakeLoop()


@pytest.fixture
def transport() -> FakeTransport:
    return FakeTransport()


@pytest.fixture
def flow(transport: FakeTransport, loop: FakeLoop) -> FlowControl:
    return FlowControl(
        cast("asyncio.Transport", transport), cast("asyncio.AbstractEventLoop", loop)
    )


def test_reading_is_paused_and_resumed_once_each(
    flow: FlowControl, transport: FakeTransport
) -> None:
    flow.read(False)
    flow.read(False)
    assert (flow.read_paused, transport.read_paused, transport.pauses) == (True, True, 1)
    flow.read(True)
    flow.read(True)
    assert (flow.read_paused, transport.read_paused, transport.resumes) == (False, False, 1)


def test_the_client_not_reading_stops_answers_and_notes_when(
    flow: FlowControl, loop: FakeLoop
) -> None:
    assert flow.answers
    loop.now = 1234.5
    flow.pause_writing()
    assert (flow.answers, flow.writes, flow.paused_at) == (False, True, 1234.5)
    flow.resume_writing()
    assert flow.answers


def test_ending_reads_no_further_request_but_still_answers(flow: FlowControl) -> None:
    flow.end()
    assert flow.state is Closing.ENDING  # not OPEN: no further request is read
    assert flow.answers


def test_lingering_writes_the_answer_reads_on_and_aborts_when_the_drain_ends(
    flow: FlowControl, transport: FakeTransport, loop: FakeLoop
) -> None:
    flow.read(False)  # reading was paused while the answers before were waited on
    flow.linger(b"HTTP/1.1 413 ...", DRAIN)
    assert bytes(transport.written) == b"HTTP/1.1 413 ..."
    assert transport.eof_written
    assert not transport.read_paused  # what the client still sends is read (and discarded)
    assert (flow.state, flow.writes) == (Closing.LINGERING, False)
    flow.read(False)  # nothing else pauses a drain
    assert not transport.read_paused
    loop.run_later(DRAIN - 0.5)
    assert not transport.is_closing()
    loop.run_later(1.0)
    assert transport.aborted
    assert flow.state is Closing.ABORTED


def test_a_client_that_closes_its_side_ends_the_drain_and_its_timer(
    flow: FlowControl, transport: FakeTransport, loop: FakeLoop
) -> None:
    flow.linger(b"HTTP/1.1 400 ...", DRAIN)
    flow.lost()  # the transport closed itself on the client's EOF
    assert flow.state is Closing.CLOSED
    assert loop.pending == []
    loop.run_later(DRAIN * 2)
    assert not transport.aborted


def test_close_then_abort_drops_what_is_unsent_and_abort_is_final(
    flow: FlowControl, transport: FakeTransport
) -> None:
    flow.close()
    assert (transport.closed, transport.aborted, flow.state) == (True, False, Closing.CLOSED)
    flow.close()  # again: nothing more
    flow.abort()  # a server stopping drops what a closing connection still owes
    assert (transport.aborted, flow.state) == (True, Closing.ABORTED)
    flow.close()
    flow.lost()
    assert flow.state is Closing.ABORTED
    with pytest.raises(ClosingError):
        flow.linger(b"late", DRAIN)
    assert bytes(transport.written) == b""


def test_nothing_is_written_or_paused_once_closed(
    flow: FlowControl, transport: FakeTransport
) -> None:
    flow.close()
    flow.read(False)
    assert (transport.pauses, flow.writes, flow.answers) == (0, False, False)


@pytest.mark.parametrize("state", list(Closing))
def test_every_state_but_aborted_has_a_way_to_aborted(state: Closing) -> None:
    assert (Closing.ABORTED in MOVES[state]) is (state is not Closing.ABORTED)
    assert Closing.OPEN not in MOVES[state]  # nothing reopens
