"""The hot path's own connection to Redis: a turn's commands written at once, replies read in turn.

``GET /e`` on Redis is one EVALSHA; the requests decided in one turn of the event loop go
together. Through redis-py's async pipeline a round trip cost the mock about 50 µs of CPU (its
pipeline and pool objects, a timeout and a parser call per reply: measured against this module
on one machine, 68 µs against 15 µs a sequential call, hiredis packing both), a third of what
a request cost. So the event loop keeps one connection of its own: hiredis packs the commands
and parses the replies (C, as redis-py does with it), an asyncio stream carries them, and one
batch at a time goes (the next waits its turn, gathering the requests that came meanwhile).
Error replies become redis-py's exceptions (its own ``parse_error``), so the rest of the store
reads them as from redis-py; each reply is bounded as redis-py's are (:class:`.BoundedReader`).

For one server over TCP or a unix socket; TLS (``rediss://``) and a Redis Cluster keep
redis-py's pipeline. A failure or a timeout drops the connection (its replies would be out of
step) and fails the batch; the next connects again.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Final

import hiredis
from redis._parsers.base import BaseParser
from redis._parsers.hiredis import NOT_ENOUGH_DATA
from redis.connection import UnixDomainSocketConnection, parse_url
from redis.exceptions import ResponseError

from .redisclients import BoundedReader

READ_SIZE: Final = 65536
Command = tuple[str | int, ...]
"""A command and its arguments, as hiredis packs them."""


class Line:
    """One connection of one event loop's (see the module's docstring)."""

    def __init__(self, options: dict[str, Any], reply_bytes: int, timeout: float) -> None:
        self._options = options
        self._reply_bytes = reply_bytes
        self._timeout = timeout
        self._stream: tuple[asyncio.StreamReader, asyncio.StreamWriter, BoundedReader] | None
        self._stream = None
        self._queue: list[tuple[list[Command], asyncio.Future[list[Any]]]] = []
        self._flushing: asyncio.Task[None] | None = None

    @classmethod
    def of(cls, url: str, reply_bytes: int, timeout: float) -> Line | None:
        """A line to the Redis of ``url``, or None where redis-py's pipeline must go (TLS)."""
        options: dict[str, Any] = parse_url(url)  # type: ignore[no-untyped-call]
        kind = options.get("connection_class")
        if kind is not None and kind is not UnixDomainSocketConnection:
            return None
        return cls(options, reply_bytes, timeout)

    async def send(self, commands: list[Command]) -> list[Any]:
        """Each command's reply, in order (an error reply as redis-py's exception, not raised)."""
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._queue.append((commands, future))
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        """Send what is queued, one round trip at a time, until nothing is; each round trip
        takes at most the timeout (a Redis that never answers frees the line)."""
        while self._queue:
            queued, self._queue = self._queue, []
            # A caller that gave up meanwhile (its request answered 503 on a timeout) is not
            # sent: it would count against the rate limit, take a step and be journaled.
            queued = [(some, future) for some, future in queued if not future.done()]
            if not queued:
                continue
            commands = [command for some, _ in queued for command in some]
            try:
                async with asyncio.timeout(self._timeout):
                    stream = self._stream or await self._connect()
                    replies = await _exchange(stream, commands)
            except BaseException as exc:  # the line is out of step: dropped, its callers told
                self.close()
                for _, future in queued:
                    if not future.done():
                        future.set_exception(
                            exc if isinstance(exc, Exception) else ConnectionError()
                        )
                if not isinstance(exc, Exception):
                    raise
                continue
            start = 0
            for some, future in queued:
                if not future.done():
                    future.set_result(replies[start : start + len(some)])
                start += len(some)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, BoundedReader]:
        options = self._options
        if "path" in options:
            reader, writer = await asyncio.open_unix_connection(options["path"])
        else:
            host, port = options.get("host", "localhost"), options.get("port", 6379)
            reader, writer = await asyncio.open_connection(host, port)
        parser = hiredis.Reader(
            encoding="utf-8", replyError=BaseParser.parse_error, notEnoughData=NOT_ENOUGH_DATA
        )
        stream = reader, writer, BoundedReader(parser, self._reply_bytes)
        self._stream = stream
        hello: list[Command] = []
        if options.get("password") is not None:
            user = options.get("username")
            hello.append(("AUTH", *([user] if user else []), options["password"]))
        if options.get("db", 0):
            hello.append(("SELECT", int(options["db"])))
        for reply in await _exchange(stream, hello) if hello else ():
            if isinstance(reply, ResponseError):
                raise reply
        return stream

    async def aclose(self) -> None:
        """Stop: a round trip under way is abandoned (its callers told), the connection closed."""
        flushing, self._flushing = self._flushing, None
        if flushing is not None and not flushing.done():
            flushing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flushing
        self.close()

    def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            with contextlib.suppress(Exception):  # closing a broken connection: nothing to do
                stream[1].close()


async def _exchange(
    stream: tuple[asyncio.StreamReader, asyncio.StreamWriter, BoundedReader],
    commands: list[Command],
) -> list[Any]:
    reader, writer, parser = stream
    writer.write(b"".join(hiredis.pack_command(command) for command in commands))  # type: ignore[arg-type]
    await writer.drain()
    replies: list[Any] = []
    while len(replies) < len(commands):
        reply = parser.gets()
        if reply is NOT_ENOUGH_DATA:
            data = await reader.read(READ_SIZE)
            if not data:
                raise ConnectionError("Redis closed the connection")
            parser.feed(data)
        else:
            replies.append(reply)
    return replies
