"""The hot path's own connection to Redis: a round trip's commands written at once, replies read.

A request to ``GET /e`` on Redis makes two or three round trips of a few commands. Through
redis-py's async pipeline a round trip cost the mock about 50 µs of CPU (its
pipeline and pool objects, a timeout and a parser call per reply: measured against this module
on one machine, 68 µs against 15 µs a sequential call, hiredis packing both). So the event loop
keeps one connection of its own: hiredis packs the commands and parses the replies (C, as
redis-py does with it), as they arrive, in the connection's protocol (:class:`_Replies`; an
asyncio stream's reader and its coroutines cost a round trip 9 µs more).
Error replies become redis-py's exceptions (its own ``parse_error``), so the rest of the store
reads them as from redis-py; each reply is bounded as redis-py's are (:class:`.BoundedReader`).

For one server over TCP or a unix socket; TLS (``rediss://``) and a Redis Cluster keep
redis-py's pipeline. A failure, a timeout or a cancellation drops the connection (its replies
would be out of step); the next round trip connects again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import hiredis
from redis._parsers.base import BaseParser
from redis._parsers.hiredis import NOT_ENOUGH_DATA
from redis.connection import UnixDomainSocketConnection, parse_url
from redis.exceptions import ResponseError

from .redisclients import TIMEOUT, BoundedReader

Command = tuple[str | int, ...]
"""A command and its arguments, as hiredis packs them."""


class Line:
    """One connection of one event loop's (see the module's docstring); round trips pipelined,
    their replies matched in order."""

    def __init__(self, options: dict[str, Any], reply_bytes: int) -> None:
        self._options = options
        self._reply_bytes = reply_bytes
        self._replies: _Replies | None = None
        self._connecting: asyncio.Future[_Replies] | None = None

    @classmethod
    def of(cls, url: str, reply_bytes: int) -> Line | None:
        """A line to the Redis of ``url``, or None where redis-py's pipeline must go (TLS)."""
        options: dict[str, Any] = parse_url(url)  # type: ignore[no-untyped-call]
        kind = options.get("connection_class")
        if kind is not None and kind is not UnixDomainSocketConnection:
            return None
        return cls(options, reply_bytes)

    @property
    def usable(self) -> bool:
        """Connected, and not broken since: :meth:`exchange` may be called."""
        return self._replies is not None and self._replies.usable

    def exchange(self, commands: list[Command], done: Done) -> None:
        """Send ``commands``; ``done`` is told their replies, or why there are none (the line
        :attr:`usable`)."""
        assert self._replies is not None
        self._replies.exchange(commands, done)

    async def send(self, commands: list[Command]) -> list[Any]:
        """Each command's reply, in order (an error reply as redis-py's exception, not raised);
        connects first if it must. The caller bounds the time it takes."""
        try:
            replies = self._replies
            if replies is None or not replies.usable:  # never made, or broken since
                if self._connecting is None:  # one attempt, whoever comes meanwhile waits on it
                    self._connecting = asyncio.ensure_future(self._connect())
                replies = await asyncio.shield(self._connecting)
            return await replies.replies_of(commands)
        except BaseException:  # the line is out of step: dropped
            self.close()
            raise

    async def _connect(self) -> _Replies:
        try:
            return await self._connected()
        finally:
            self._connecting = None

    async def _connected(self) -> _Replies:
        self.close()
        options = self._options
        loop = asyncio.get_running_loop()
        made = lambda: _Replies(self._reply_bytes)  # noqa: E731
        if "path" in options:
            _, replies = await loop.create_unix_connection(made, options["path"])
        else:
            host, port = options.get("host", "localhost"), options.get("port", 6379)
            _, replies = await loop.create_connection(made, host, port)
        self._replies = replies
        hello: list[Command] = []
        if options.get("password") is not None:
            user = options.get("username")
            hello.append(("AUTH", *([user] if user else []), options["password"]))
        if options.get("db", 0):
            hello.append(("SELECT", int(options["db"])))
        for reply in await replies.replies_of(hello) if hello else ():
            if isinstance(reply, ResponseError):
                raise reply
        return replies

    def close(self) -> None:
        replies, self._replies = self._replies, None
        if replies is not None:
            replies.close()


Done = Callable[[list[Any] | Exception], None]
"""Told a round trip's replies, in order (an error reply as redis-py's exception, not raised),
or why there are none (the line broke, or the round trip outlasted its time)."""


class _Exchange(NamedTuple):
    """A round trip under way: whom to tell, by when, how many replies it waits for, those
    come."""

    done: Done
    deadline: float  # the loop's time
    expected: int
    replies: list[Any]


class _Replies(asyncio.Protocol):
    """The connection's end: round trips' commands written, their replies parsed as they come
    (bounded: :class:`.BoundedReader`), each round trip's future told when all of its are in."""

    def __init__(self, reply_bytes: int) -> None:
        reader = hiredis.Reader(
            encoding="utf-8", replyError=BaseParser.parse_error, notEnoughData=NOT_ENOUGH_DATA
        )
        self._parser = BoundedReader(reader, reply_bytes)
        self._transport: asyncio.Transport | None = None
        self._waiting: deque[_Exchange] = deque()  # in the order sent
        self._unsent: list[bytes] = []  # packed this turn of the loop, written at its end
        self._watch: asyncio.TimerHandle | None = None
        self._broken: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is none by class

    @property
    def usable(self) -> bool:
        return self._transport is not None and self._broken is None

    def exchange(self, commands: list[Command], done: Done) -> None:
        """Write ``commands`` (at the end of this turn of the loop, with the others of the
        turn); ``done`` is told their replies, or why there are none, within :data:`TIMEOUT`."""
        if self._broken is not None or self._transport is None:
            done(self._broken or ConnectionError("not connected"))
            return
        loop = asyncio.get_running_loop()
        self._waiting.append(_Exchange(done, loop.time() + TIMEOUT, len(commands), []))
        if self._watch is None:
            self._watch = loop.call_later(TIMEOUT, self._watched)
        if not self._unsent:  # the round trips of this turn of the loop go in one write
            loop.call_soon(self._flush)
        self._unsent += [hiredis.pack_command(c) for c in commands]  # type: ignore[arg-type]

    def replies_of(self, commands: list[Command]) -> asyncio.Future[list[Any]]:
        """:meth:`exchange` as a future (connecting)."""
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()

        def done(replies: list[Any] | Exception) -> None:
            if future.done():
                return
            if isinstance(replies, Exception):
                future.set_exception(replies)
            else:
                future.set_result(replies)

        self.exchange(commands, done)
        return future

    def _watched(self) -> None:
        """One timer for all the round trips: the oldest one late breaks the line (its
        replies would come out of step), else the timer waits for it."""
        self._watch = None
        if not self._waiting:
            return
        loop = asyncio.get_running_loop()
        late = self._waiting[0].deadline - loop.time()
        if late <= 0:
            self._fail(TimeoutError())
        else:
            self._watch = loop.call_later(late, self._watched)

    def _flush(self) -> None:
        unsent, self._unsent = self._unsent, []
        if self._transport is not None and self._broken is None:
            self._transport.write(b"".join(unsent))

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed(data)
            while (reply := self._parser.gets()) is not NOT_ENOUGH_DATA:
                if not self._waiting:
                    raise ConnectionError("a reply to no command")  # out of step
                head = self._waiting[0]
                head.replies.append(reply)
                if len(head.replies) == head.expected:
                    self._waiting.popleft()
                    head.done(head.replies)
        except Exception as exc:  # garbage, a reply too long, out of step: the line is broken
            self._fail(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(ConnectionError("Redis closed the connection"))

    def _fail(self, exc: Exception) -> None:
        self._broken = self._broken or exc
        waiting, self._waiting = self._waiting, deque()
        self.close()
        for exchange in waiting:
            exchange.done(exc)

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        transport, self._transport = self._transport, None
        if transport is not None:
            with contextlib.suppress(Exception):  # closing a broken connection: nothing to do
                transport.close()
