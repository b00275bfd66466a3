"""Flow control and the closing of one connection of the mock's own server.

As uvicorn's ``protocols/http/flow_control.py``: whether the server reads (``read_paused``), whether
the client reads (``write_paused``), and the connection's :class:`Closing` state, moved only as
:data:`MOVES` allows. After a refusal the connection lingers (RFC 9112 §9.6, nginx's
``lingering_close``), so a client sending a large body reads the refusal.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass
from typing import Final

from .wire import reset_on_close, unsent


class Closing(enum.IntEnum):
    """Where a connection is on its way to closed (an ``IntEnum``: a plain ``Enum`` hashes in
    Python, at every question asked of it on the hot path)."""

    OPEN = 1  # requests are read and answered
    ENDING = 2  # no further request is read; closed once the answers owed are written
    LINGERING = 3  # a refusal is written; what the client sends is discarded, then closed
    CLOSED = 4  # closed: what was written is still sent
    ABORTED = 5  # cut: what the client has not taken is dropped


OPEN, ENDING, LINGERING, CLOSED, ABORTED = Closing

MOVES: Final[dict[Closing, frozenset[Closing]]] = {
    OPEN: frozenset({ENDING, LINGERING, CLOSED, ABORTED}),
    ENDING: frozenset({LINGERING, CLOSED, ABORTED}),
    LINGERING: frozenset({CLOSED, ABORTED}),
    CLOSED: frozenset({ABORTED}),  # a server stopping drops what a closing connection still owes
    ABORTED: frozenset(),
}
MIN_TAKEN: Final = 64 * 1024  # bytes a client not reading on must take per idle timeout
_WRITING: Final = frozenset({OPEN, ENDING})
_GONE: Final = frozenset({CLOSED, ABORTED})


class ClosingError(RuntimeError):
    """A move between closing states that :data:`MOVES` does not list: a bug in the server."""


@dataclass(slots=True, eq=False)
class FlowControl:
    """One connection's reading, its client's reading, and its closing state."""

    transport: asyncio.Transport
    _loop: asyncio.AbstractEventLoop
    state: Closing = OPEN
    read_paused: bool = False  # the server does not read (transport.pause_reading)
    write_paused: bool = False  # the client does not read what is written (pause_writing)
    paused_at: float = 0.0  # when the client last took MIN_TAKEN of its answers
    unsent: int = 0  # what its transport and socket held then
    _drain: asyncio.TimerHandle | None = None

    @property
    def writes(self) -> bool:
        """Whether an answer owed may still be written (lingering has written its last)."""
        return self.state in _WRITING

    @property
    def answers(self) -> bool:
        """Whether an answer may be written now: the connection writes and the client reads."""
        return self.state in _WRITING and not self.write_paused

    @property
    def gone(self) -> bool:
        return self.state in _GONE

    def read(self, wanted: bool) -> None:
        """Read from the client or not (once closing, nothing of the choice is left to make)."""
        if self.state not in _WRITING or wanted != self.read_paused:
            return
        self.read_paused = not wanted
        if wanted:
            self.transport.resume_reading()
        else:
            self.transport.pause_reading()

    def pause_writing(self) -> None:
        self.write_paused, self.paused_at = True, self._loop.time()
        self.unsent = unsent(self.transport)

    def stalled(self, now: float, seconds: float) -> bool:
        """Whether the client has taken less than MIN_TAKEN of its answers in ``seconds``."""
        late = now - self.paused_at > seconds
        if not late and (left := unsent(self.transport)) <= self.unsent - MIN_TAKEN:
            self.paused_at, self.unsent = now, left  # reading, if slowly (the kernel's MBs first)
        return late

    def resume_writing(self) -> None:
        self.write_paused = False

    # -- closing --------------------------------------------------------------------------------
    def end(self) -> None:
        """Read no further request; the answers owed are still written (then :meth:`close`)."""
        if self.state is OPEN:
            self._move(ENDING)

    def linger(self, data: bytes, seconds: float) -> None:
        """Write a closing answer, shut the write side, and discard what the client still
        sends for at most ``seconds`` (then abort; the client's EOF closes it sooner)."""
        self._move(LINGERING)
        transport = self.transport
        transport.write(data)
        if transport.can_write_eof():
            transport.write_eof()
        if self.read_paused:
            self.read_paused = False
            transport.resume_reading()
        self._drain = self._loop.call_later(seconds, self.abort)

    def close(self) -> None:
        """Close once what was written is sent."""
        if self.state in _GONE:
            return
        self._move(CLOSED)
        self._stop_drain()
        self.transport.close()

    def abort(self) -> None:
        """Close at once, dropping what the client never took."""
        if self.state is ABORTED:
            return
        self._move(ABORTED)
        self._stop_drain()
        self.transport.abort()

    def reset(self) -> None:
        """Abort with a TCP reset (``SO_LINGER`` 0): the client gets no further byte."""
        if self.state is not ABORTED:
            reset_on_close(self.transport)
        self.abort()

    def lost(self) -> None:
        """The transport is gone (``connection_lost``): closed, if it was not already."""
        self._stop_drain()
        if self.state not in _GONE:
            self._move(CLOSED)

    def _move(self, state: Closing) -> None:
        if state not in MOVES[self.state]:
            raise ClosingError(f"a connection cannot go from {self.state.name} to {state.name}")
        self.state = state

    def _stop_drain(self) -> None:
        if self._drain is not None:
            self._drain.cancel()
            self._drain = None
