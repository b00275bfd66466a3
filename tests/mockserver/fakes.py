"""A fake transport, loop and server for driving the async server's connection without sockets.

As uvicorn's protocol tests do: the transport records what was written and whether reading is
paused or the connection closed; the loop's clock moves only when the test says
(:meth:`FakeLoop.run_later`), which fires the timers that fall due. Nothing sleeps.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.explain import Decision
from verdict_contract.mockserver.server.asyncserver import (
    DRAIN_SECONDS,
    AsyncServer,
    HttpConnection,
)
from verdict_contract.mockserver.server.wire import Heads
from verdict_contract.mockserver.state import MockState
from verdict_contract.mockserver.web.answers import EXTENSION


@dataclass
class FakeTimer:
    when: float
    callback: Callable[..., object]
    args: tuple[Any, ...]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class FakeLoop:
    """A loop whose time moves only by :meth:`run_later`."""

    now: float = 1000.0
    timers: list[FakeTimer] = field(default_factory=list)

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> FakeTimer:
        timer = FakeTimer(self.now + delay, callback, args)
        self.timers.append(timer)
        return timer

    def run_later(self, seconds: float) -> None:
        """Move the clock on by ``seconds``, firing each timer that falls due, in order."""
        self.now += seconds
        while due := sorted(
            (t for t in self.timers if not t.cancelled and t.when <= self.now),
            key=lambda t: t.when,
        ):
            timer = due[0]
            self.timers.remove(timer)
            timer.callback(*timer.args)

    @property
    def pending(self) -> list[FakeTimer]:
        return [t for t in self.timers if not t.cancelled]


@dataclass
class FakeTransport:
    """Records writes, reading paused or not, closing and aborting."""

    written: bytearray = field(default_factory=bytearray)
    read_paused: bool = False
    pauses: int = 0  # pause_reading calls
    resumes: int = 0
    eof_written: bool = False
    closed: bool = False
    aborted: bool = False
    unsent: int = 0  # what get_write_buffer_size says

    def write(self, data: bytes) -> None:
        assert not self.is_closing(), "written after closing"
        self.written += data

    def pause_reading(self) -> None:
        self.read_paused = True
        self.pauses += 1

    def resume_reading(self) -> None:
        self.read_paused = False
        self.resumes += 1

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.eof_written = True

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_write_buffer_size(self) -> int:
        return self.unsent

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def take(self) -> bytes:
        """What was written since the last take."""
        data = bytes(self.written)
        self.written.clear()
        return data


@dataclass
class FakeServer:
    """What a connection needs of its :class:`.asyncserver.AsyncServer`, on a fake loop."""

    state: MockState
    loop: FakeLoop = field(default_factory=FakeLoop)
    app: Any = None
    hot: bool = True
    max_body: int = 1000
    max_connections: int = 10
    drain_seconds: float = DRAIN_SECONDS
    access_log: bool = False
    heads: Heads = field(default_factory=Heads)
    connections: set[HttpConnection] = field(default_factory=set)
    open: int = 0
    lingering: OrderedDict[HttpConnection, None] = field(default_factory=OrderedDict)
    no_room_until: float = 0.0
    address: tuple[str, int] = ("127.0.0.1", 8080)
    pool: Any = None  # nothing here goes to the app on a worker thread
    tasks: set[asyncio.Task[Decision]] = field(default_factory=set)


def fake_server(settings: Settings) -> FakeServer:
    state: MockState = create_app(settings).extensions[EXTENSION]
    return FakeServer(state=state)


def connect(server: FakeServer) -> tuple[HttpConnection, FakeTransport]:
    """A connection of ``server`` on a fresh fake transport."""
    connection = HttpConnection(cast("AsyncServer", server))
    transport = FakeTransport()
    connection.connection_made(cast("asyncio.Transport", transport))
    return connection, transport
