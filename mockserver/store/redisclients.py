"""The connections of the shared state to Redis: redis-py's clients (one server, a Redis Cluster,
or the primary Redis Sentinel names), and the event loop's own :class:`Line`; each reply bounded,
nothing retried (a ``MOVED`` is followed, not retried).

A cluster is named by its URL (``redis+cluster://``, ``rediss+cluster://``) or found from the
server (``INFO cluster``); redis-py's cluster clients send each command to the node of its slot
(a mock's keys share one). A ``redis+sentinel://`` URL names the sentinels and their service:
redis-py's ``Sentinel`` clients ask them for the primary at each new connection, so a failover
is followed.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final, NamedTuple, cast
from urllib.parse import urlsplit, urlunsplit

import hiredis
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.retry
import redis.asyncio.sentinel
import redis.cluster
import redis.retry
import redis.sentinel
from redis._parsers import _AsyncHiredisParser, _HiredisParser  # its parser_class option
from redis._parsers.base import BaseParser
from redis._parsers.commands import AsyncCommandsParser
from redis._parsers.hiredis import NOT_ENOUGH_DATA
from redis.asyncio.cluster import ClusterNode
from redis.backoff import NoBackoff
from redis.connection import UnixDomainSocketConnection, parse_url
from redis.exceptions import InvalidResponse, ResponseError

from .backend import SentinelTarget, StateURL

TIMEOUT: Final = 1.0
"""Seconds a call to Redis may take (connecting included) before the request gets a 503."""

SyncClient = redis.Redis | redis.cluster.RedisCluster
AsyncClient = redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster


BYTES_PER_ELEMENT: Final = 32
"""A reply may hold one element per this many bytes of its byte bound: an element costs hiredis
a Python object (an empty list about 60 bytes), and every element of the mock's replies (an
entry, a step, a count) is longer than this on the wire."""


_DECLARED: Final = re.compile(rb"\r\n[*%~>|](\d{1,20})\r\n")
"""An aggregate's header (array, map, set, push, attribute) and the count it declares."""


class BoundedReader:
    """hiredis's reader, refusing a reply past ``limit`` bytes or past one element per
    :data:`BYTES_PER_ELEMENT` of them, so a Redis speaking garbage costs at most about twice
    the bound. Each element of RESP ends a line, so counting lines bounds the elements; an
    aggregate's declared count is checked first, as hiredis makes its list at once."""

    def __init__(self, reader: Any, limit: int) -> None:
        self._reader = reader
        self._limit = limit
        self._elements = limit // BYTES_PER_ELEMENT
        self._fed = self._lines = 0  # since the last whole reply
        self._tail = b""  # the end of the last chunk: a header cut in two is read whole

    def feed(self, data: Any, *span: int) -> None:
        chunk = bytes(memoryview(data)[span[0] : span[0] + span[1]]) if len(span) == 2 else data
        if not self._fed:  # a reply's first bytes: the socket's timeout bounds each read only
            self._since = time.monotonic()
        elif time.monotonic() - self._since > TIMEOUT:  # a reply dripped, byte by byte
            raise redis.TimeoutError(f"a reply still arriving after {TIMEOUT:g} s")
        self._fed += len(chunk)
        self._lines += chunk.count(b"\r\n")
        if self._fed > self._limit:
            raise InvalidResponse(f"a reply longer than {self._limit} bytes")
        scanned = (self._tail or b"\r\n") + chunk  # a first line reads as after a line end
        declared = max((int(m[1]) for m in _DECLARED.finditer(scanned)), default=0)
        if self._lines > self._elements or declared > self._elements:
            raise InvalidResponse(f"a reply of more than {self._elements} elements")
        self._tail = scanned[-24:]
        self._reader.feed(data, *span)

    def gets(self, *args: Any) -> Any:
        reply = self._reader.gets(*args)
        if reply is not NOT_ENOUGH_DATA:
            self._fed = self._lines = 0
        return reply

    def has_data(self) -> bool:
        return bool(self._reader.has_data())


def _bounded_parsers(limit: int) -> tuple[type[_HiredisParser], type[_AsyncHiredisParser]]:
    """redis-py's hiredis parsers (its ``parser_class`` option), each reply bounded."""

    class Bounded(_HiredisParser):
        def on_connect(self, connection: Any, **kwargs: Any) -> None:
            super().on_connect(connection, **kwargs)  # type: ignore[no-untyped-call]
            self._reader = cast(Any, BoundedReader(self._reader, limit))  # its reader's duck

    class AsyncBounded(_AsyncHiredisParser):
        def on_connect(self, connection: Any) -> None:
            super().on_connect(connection)  # type: ignore[no-untyped-call]
            self._reader = cast(Any, BoundedReader(self._reader, limit))

    return Bounded, AsyncBounded


_OPTIONS: Final[dict[str, Any]] = {
    "socket_timeout": TIMEOUT,
    "socket_connect_timeout": TIMEOUT,
    "decode_responses": True,
}


class Clients:
    """How to reach one state URL: a blocking client now, an async one per event loop."""

    def __init__(self, url: StateURL, reply_bytes: int) -> None:
        self._url = url.client_url
        self._sync_parser, self._async_parser = _bounded_parsers(reply_bytes)
        self.sentinel = url.sentinel
        self._asked: list[Any] = []  # the sentinels' own clients, closed with the primary's
        self.cluster = False
        if self.sentinel is not None:  # the primary, asked of the sentinels at each connection
            self.sync: SyncClient = _primary(
                redis.sentinel.Sentinel, self.sentinel, self._sync_parser, self._asked
            )
            return
        standalone = redis.Redis.from_url(
            self._url,
            retry=redis.retry.Retry(NoBackoff(), 0),
            parser_class=self._sync_parser,
            **_OPTIONS,
        )
        self.cluster = url.cluster or (url.cluster is None and _cluster_enabled(standalone))
        self.sync = standalone
        if self.cluster:
            standalone.close()
            self.sync = self._sync_cluster()

    def _sync_cluster(self) -> redis.cluster.RedisCluster:
        options: dict[str, Any] = parse_url(self._url)  # type: ignore[no-untyped-call]
        if options.get("db", 0) != 0:
            raise ClusterURLError(_NO_DB)
        # It takes a connection class, not a parser class; rediss:// only picks the TLS class,
        # which the URL would put back over ours.
        base = options.get("connection_class", redis.Connection)
        plain = urlunsplit(urlsplit(self._url)._replace(scheme="redis"))
        return redis.cluster.RedisCluster.from_url(
            plain,
            connection_class=_with_parser(base, self._sync_parser),
            retry=redis.retry.Retry(NoBackoff(), 0),
            **_OPTIONS,
        )

    def make_async(self) -> AsyncClient:
        """A client for the running event loop (a client belongs to the loop that made it)."""
        retry = redis.asyncio.retry.Retry(NoBackoff(), 0)
        if self.cluster:
            client = redis.asyncio.cluster.RedisCluster.from_url(self._url, retry=retry, **_OPTIONS)
            nodes, found = client.nodes_manager, cast(redis.cluster.RedisCluster, self.sync)
            for known in found.nodes_manager.nodes_cache.values():  # found at start: the URL's
                node = ClusterNode(known.host, known.port, **nodes.connection_kwargs)  # may go
                nodes.startup_nodes.setdefault(node.name, node)
            client.commands_parser = _KeptCommands()
            client.commands_parser.commands = dict(found.commands_parser.commands)
            # It takes no parser_class: given to the node settings it copies into each
            # connection (as redis-py gives its own maintenance handler), before the first.
            startup = (node.connection_kwargs for node in nodes.startup_nodes.values())
            for kwargs in (nodes.connection_kwargs, *startup):
                kwargs["parser_class"] = self._async_parser
            return client
        if self.sentinel is not None:
            kind = redis.asyncio.sentinel.Sentinel
            return cast(AsyncClient, _primary(kind, self.sentinel, self._async_parser, self._asked))
        return redis.asyncio.Redis.from_url(
            self._url, retry=retry, parser_class=self._async_parser, **_OPTIONS
        )

    async def aclose(self, client: AsyncClient) -> None:
        """Close ``client`` and the async clients of the sentinels it was found through."""
        for each in (client, *[c for c in self._asked if hasattr(c, "aclose")]):
            with contextlib.suppress(Exception):  # closing a broken connection: nothing to do
                await each.aclose()
        self._asked = [c for c in self._asked if not hasattr(c, "aclose")]

    def close(self) -> None:
        """Close the blocking client (and its sentinels')."""
        if isinstance(self.sync, redis.cluster.RedisCluster):  # its close leaves each node's
            for node in self.sync.nodes_manager.nodes_cache.values():  # pool open: closed here
                if node.redis_connection is not None:
                    node.redis_connection.connection_pool.disconnect()
        for each in (self.sync, *[c for c in self._asked if not hasattr(c, "aclose")]):
            each.close()


class _KeptCommands(AsyncCommandsParser):
    """The table of commands the blocking client read at start, not asked again of a node."""

    async def initialize(self, node: ClusterNode | None = None) -> None:
        if node is not None:
            self.node = node


def _primary(kind: Any, target: SentinelTarget, parser: type[Any], asked: list[Any]) -> Any:
    """A client of the primary the sentinels name (``kind``: redis-py's blocking or async
    ``Sentinel``), no retries, each reply bounded; the sentinels asked within the timeout, their
    clients added to ``asked``."""
    timeouts = {"socket_timeout": TIMEOUT, "socket_connect_timeout": TIMEOUT}
    sentinels = kind(target.nodes, sentinel_kwargs=timeouts)
    asked.extend(sentinels.sentinels)
    client = sentinels.master_for(
        target.service, db=target.db, password=target.password, parser_class=parser, **_OPTIONS
    )
    retries = redis.asyncio.retry.Retry if kind is redis.asyncio.sentinel.Sentinel else None
    client.set_retry((retries or redis.retry.Retry)(NoBackoff(), 0))
    return client


def _with_parser(base: type[redis.Connection], parser: type[_HiredisParser]) -> type[Any]:
    """``base`` (a plain or TLS connection) reading with ``parser``: the cluster client takes
    a connection class, not a parser class."""

    class Bounded(base):  # type: ignore[valid-type,misc]
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**{**kwargs, "parser_class": parser})

    return Bounded


_NO_DB: Final = "a Redis Cluster has database 0 only: end the URL with /0"


class ClusterURLError(ValueError):
    """A state URL a Redis Cluster cannot take (said at start, as a wrong setting is)."""


def _cluster_enabled(client: redis.Redis) -> bool:
    """Whether the server is a node of a Redis Cluster (``INFO cluster``)."""
    try:
        info = client.info("cluster")
    except redis.ResponseError as exc:  # SELECT of another database, refused by a cluster node
        if "cluster mode" in str(exc):
            raise ClusterURLError(_NO_DB) from None
        raise
    return bool(int(info.get("cluster_enabled", 0)))


# -- the event loop's own connection -----------------------------------------------------------
# Through redis-py's async pipeline a round trip cost the mock about 50 µs of CPU more than
# through a Line (68 µs against 15, measured on one machine): its pipeline and pool objects, a
# timeout and a parser call per reply. So the event loop keeps one connection of its own, for
# one server over TCP or a unix socket (TLS and a cluster keep redis-py's client): hiredis
# packs the commands and parses the replies in the connection's protocol (:class:`_Replies`),
# error replies as redis-py's exceptions. A failure, a timeout or a cancellation drops the
# connection (its replies would be out of step); the next round trip connects again.

Command = tuple[str | int, ...]
"""A command and its arguments, as hiredis packs them."""


class Line:
    """The event loop's own connection to one Redis (see above); round trips pipelined, their
    replies matched in order."""

    def __init__(self, options: dict[str, Any], reply_bytes: int) -> None:
        self._options = options
        self._reply_bytes = reply_bytes
        self._replies: _Replies | None = None
        self._connecting: asyncio.Future[_Replies] | None = None

    @classmethod
    def of(cls, url: str, reply_bytes: int) -> Line | None:
        """A line to the Redis of ``url``, or None where redis-py's client must go (TLS)."""
        options: dict[str, Any] = parse_url(url)  # type: ignore[no-untyped-call]
        kind = options.get("connection_class")
        if kind is not None and kind is not UnixDomainSocketConnection:
            return None
        return cls(options, reply_bytes)

    @property
    def usable(self) -> bool:
        """Connected, and not broken since: :meth:`exchange` may be called."""
        return self._replies is not None and self._replies.usable

    def exchange(self, command: Command, done: Done) -> None:
        """Send ``command``; ``done`` is told its reply, or why there is none (the line
        :attr:`usable`)."""
        assert self._replies is not None
        self._replies.exchange(command, done)

    async def send(self, command: Command) -> Any:
        """The command's reply (an error reply as redis-py's exception, not raised); connects
        first if it must. The caller bounds the time it takes."""
        try:
            replies = self._replies
            if replies is None or not replies.usable:  # never made, or broken since
                if self._connecting is None:  # one attempt, whoever comes meanwhile waits on it
                    self._connecting = asyncio.ensure_future(self._connect())
                    # its failure seen here too: else, once every waiter is gone, asyncio logs it
                    self._connecting.add_done_callback(lambda t: t.cancelled() or t.exception())
                replies = await asyncio.shield(self._connecting)
            return await replies.reply_of(command)
        except BaseException:  # the line is out of step: dropped
            self.close()
            raise

    async def _connect(self) -> _Replies:
        self.close()
        options, loop = self._options, asyncio.get_running_loop()
        made = lambda: _Replies(self._reply_bytes)  # noqa: E731
        try:
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
            for command in hello:
                if isinstance(reply := await replies.reply_of(command), ResponseError):
                    raise reply
            return replies
        finally:
            self._connecting = None

    def close(self) -> None:
        replies, self._replies = self._replies, None
        if replies is not None:
            replies.close()


Done = Callable[[Any], None]
"""Told a round trip's reply (an error reply as redis-py's exception, not raised), or why there
is none (the line broke, or the round trip outlasted its time: an exception too)."""


class _Exchange(NamedTuple):
    """A round trip under way: whom to tell, and by when (the loop's time)."""

    done: Done
    deadline: float


class _Replies(asyncio.Protocol):
    """The connection's end: round trips' commands written, their replies parsed as they come
    (bounded: :class:`.BoundedReader`), each round trip's future told when all of its are in."""

    def __init__(self, reply_bytes: int) -> None:
        reader = hiredis.Reader(
            encoding="utf-8", replyError=BaseParser.parse_error, notEnoughData=NOT_ENOUGH_DATA
        )
        self._parser = BoundedReader(reader, reply_bytes)
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()  # made on the loop it serves
        self._waiting: deque[_Exchange] = deque()  # in the order sent
        self._unsent: list[bytes] = []  # packed this turn of the loop, written at its end
        self._watch: asyncio.TimerHandle | None = None
        self._broken: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is none by class

    @property
    def usable(self) -> bool:
        return self._transport is not None and self._broken is None

    def exchange(self, command: Command, done: Done) -> None:
        """Write ``command`` (at the end of this turn of the loop, with the others of the
        turn); ``done`` is told its reply, or why there is none, within :data:`TIMEOUT`."""
        if self._broken is not None or self._transport is None:
            done(self._broken or ConnectionError("not connected"))
            return
        loop = self._loop
        self._waiting.append(_Exchange(done, loop.time() + TIMEOUT))
        if self._watch is None:
            self._watch = loop.call_later(TIMEOUT, self._watched)
        if not self._unsent:  # the round trips of this turn of the loop go in one write
            loop.call_soon(self._flush)
        self._unsent.append(hiredis.pack_command(command))  # type: ignore[arg-type]

    def reply_of(self, command: Command) -> asyncio.Future[Any]:
        """:meth:`exchange` as a future: a failure raises, an error reply is its result."""
        future: asyncio.Future[Any] = self._loop.create_future()

        def done(reply: Any) -> None:
            if future.done():
                return
            if isinstance(reply, Exception) and not isinstance(reply, ResponseError):
                future.set_exception(reply)
            else:
                future.set_result(reply)

        self.exchange(command, done)
        return future

    def _watched(self) -> None:
        """One timer for all the round trips: the oldest one late breaks the line (its
        replies would come out of step), else the timer waits for it."""
        self._watch = None
        if not self._waiting:
            return
        late = self._waiting[0].deadline - self._loop.time()
        if late <= 0:
            self._fail(TimeoutError())
        else:
            self._watch = self._loop.call_later(late, self._watched)

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
                self._waiting.popleft().done(reply)
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
