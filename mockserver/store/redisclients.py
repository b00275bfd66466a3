"""The Redis clients of the shared state: one server, a Redis Cluster, or the primary Redis
Sentinel names; each reply bounded.

A cluster is named by its URL (``redis+cluster://``, ``rediss+cluster://``) or found from the
server (``INFO cluster`` says ``cluster_enabled:1``); it is then reached through redis-py's own
cluster clients (``redis.cluster.RedisCluster``, ``redis.asyncio.cluster.RedisCluster``), which
send each command to the node that holds its slot and follow ``MOVED``. Every key of a mock
shares one hash tag, so one slot: a script and a transaction may touch them all.

A ``redis+sentinel://`` URL names the sentinels and their service: redis-py's ``Sentinel``
clients (blocking and async) ask them for the primary at each new connection, so a failover
is followed; the sentinels' own connections close with the primary's client.

The async client packs its commands with hiredis's ``pack_command`` (C), as redis-py's blocking
client does where hiredis is installed: redis-py's async one packs them in Python, which cost
more than anything else the mock did per ``GET /e`` on Redis (each request is an EVALSHA of
some 30 arguments).

Both give up after :data:`TIMEOUT` seconds, without retrying (a ``MOVED`` is followed, not
retried): the request gets a 503 and the next one tries again.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any, Final, cast
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
from redis._parsers.hiredis import NOT_ENOUGH_DATA
from redis.backoff import NoBackoff
from redis.connection import parse_url
from redis.exceptions import InvalidResponse

from .backend import SentinelTarget, StateURL

TIMEOUT: Final = 1.0
"""Seconds a call to Redis may take (connecting included) before the request gets a 503."""

SyncClient = redis.Redis | redis.cluster.RedisCluster
AsyncClient = redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster


BYTES_PER_ELEMENT: Final = 32
"""A reply may hold one element per this many bytes of its byte bound. An element costs hiredis
a Python object (about 60 bytes for an empty list) whatever its few bytes on the wire: a reply of
millions of ``*0`` would cost 18 times its bytes. Every element the mock's replies hold (a
journal entry, a step, a count) is longer than this on the wire."""


_DECLARED: Final = re.compile(rb"\r\n[*%~>|](\d{1,20})\r\n")
"""An aggregate's header (array, map, set, push, attribute) and the count it declares."""


class BoundedReader:
    """hiredis's reader, refusing a reply past ``limit`` bytes or past one element per
    :data:`BYTES_PER_ELEMENT` of them: a Redis speaking garbage (an endless bulk string, millions
    of empty arrays) costs the mock at most about twice its byte bound, not what fits in its
    timeout. Each element of RESP ends a line (``\r\n``), so counting the lines bounds the
    elements sent; an aggregate's declared count is checked before hiredis sees it, since
    hiredis makes its list at once (``*4000000`` alone is a list of 32 MB)."""

    def __init__(self, reader: Any, limit: int) -> None:
        self._reader = reader
        self._limit = limit
        self._elements = limit // BYTES_PER_ELEMENT
        self._fed = self._lines = 0  # since the last whole reply
        self._tail = b""  # the end of the last chunk: a header cut in two is read whole

    def feed(self, data: Any, *span: int) -> None:
        chunk = bytes(memoryview(data)[span[0] : span[0] + span[1]]) if len(span) == 2 else data
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
        parts = urlsplit(self._url)
        plain = urlunsplit(parts._replace(scheme="redis"))
        return redis.cluster.RedisCluster.from_url(
            plain,
            connection_class=_with_parser(base, self._sync_parser),
            retry=redis.retry.Retry(NoBackoff(), 0),
            **_OPTIONS,
        )

    def make_async(self) -> AsyncClient:
        """A client for the running event loop (a client belongs to the loop that made it)."""
        retry = redis.asyncio.retry.Retry(NoBackoff(), 0)
        if self.sentinel is not None:
            primary = _primary(
                redis.asyncio.sentinel.Sentinel, self.sentinel, self._async_parser, self._asked
            )
            primary.connection_pool.connection_class = packing(
                primary.connection_pool.connection_class
            )
            return cast(redis.asyncio.Redis, primary)
        if not self.cluster:
            single = redis.asyncio.Redis.from_url(
                self._url, retry=retry, parser_class=self._async_parser, **_OPTIONS
            )
            pool = single.connection_pool
            pool.connection_class = packing(pool.connection_class)
            return single
        client = redis.asyncio.cluster.RedisCluster.from_url(self._url, retry=retry, **_OPTIONS)
        # It takes no parser_class: given to the node settings it copies into each connection
        # (as redis-py gives its own maintenance handler), before the first is made.
        nodes = client.nodes_manager
        for kwargs in (nodes.connection_kwargs, *(n.connection_kwargs for n in _startup(nodes))):
            kwargs["parser_class"] = self._async_parser
        nodes.connection_kwargs["connection_class"] = packing(
            nodes.connection_kwargs.get("connection_class", redis.asyncio.Connection)
        )
        for node in _startup(nodes):
            node.connection_class = packing(node.connection_class)
        return client

    async def aclose(self, client: AsyncClient) -> None:
        """Close ``client`` and the async clients of the sentinels it was found through."""
        for each in (client, *[c for c in self._asked if hasattr(c, "aclose")]):
            with contextlib.suppress(Exception):  # closing a broken connection: nothing to do
                await each.aclose()
        self._asked = [c for c in self._asked if not hasattr(c, "aclose")]

    def close(self) -> None:
        """Close the blocking client (and its sentinels')."""
        for each in (self.sync, *[c for c in self._asked if not hasattr(c, "aclose")]):
            each.close()


def packing(base: type[Any]) -> type[Any]:
    """``base`` (an async connection class: plain, TLS or unix) packing commands with hiredis."""

    class Packing(base):  # type: ignore[misc]
        def pack_command(self, *args: Any) -> list[bytes]:
            # redis-py names some commands in two words ("SCRIPT LOAD"), split as it does
            if isinstance(args[0], str) and " " in args[0]:
                args = (*args[0].split(), *args[1:])
            return [hiredis.pack_command(args)]

    return Packing


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


def _startup(nodes: Any) -> list[Any]:
    return list(nodes.startup_nodes.values())


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
