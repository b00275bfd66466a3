"""The hot path's own connection to Redis: a round trip's commands written at once, replies read.

``GET /e`` on Redis is one EVALSHA a batch (:mod:`.redisbatch`, which sends one round trip at a
time). Through redis-py's async pipeline a round trip cost the mock about 50 µs of CPU (its
pipeline and pool objects, a timeout and a parser call per reply: measured against this module
on one machine, 68 µs against 15 µs a sequential call, hiredis packing both). So the event loop
keeps one connection of its own: hiredis packs the commands and parses the replies (C, as
redis-py does with it) and an asyncio stream carries them.
Error replies become redis-py's exceptions (its own ``parse_error``), so the rest of the store
reads them as from redis-py; each reply is bounded as redis-py's are (:class:`.BoundedReader`).

For one server over TCP or a unix socket; TLS (``rediss://``) and a Redis Cluster keep
redis-py's pipeline. A failure, a timeout or a cancellation drops the connection (its replies
would be out of step); the next round trip connects again.
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
    """One connection of one event loop's (see the module's docstring); one round trip at a
    time."""

    def __init__(self, options: dict[str, Any], reply_bytes: int) -> None:
        self._options = options
        self._reply_bytes = reply_bytes
        self._stream: tuple[asyncio.StreamReader, asyncio.StreamWriter, BoundedReader] | None
        self._stream = None

    @classmethod
    def of(cls, url: str, reply_bytes: int) -> Line | None:
        """A line to the Redis of ``url``, or None where redis-py's pipeline must go (TLS)."""
        options: dict[str, Any] = parse_url(url)  # type: ignore[no-untyped-call]
        kind = options.get("connection_class")
        if kind is not None and kind is not UnixDomainSocketConnection:
            return None
        return cls(options, reply_bytes)

    async def send(self, commands: list[Command]) -> list[Any]:
        """Each command's reply, in order (an error reply as redis-py's exception, not raised);
        connects first if it must. The caller bounds the time it takes."""
        try:
            stream = self._stream or await self._connect()
            return await _exchange(stream, commands)
        except BaseException:  # the line is out of step: dropped
            self.close()
            raise

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
