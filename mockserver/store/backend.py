"""Where the mock's per-call state lives (``--state``): ``memory``, or a Redis URL, read once.

Per-call state is what a request changes or reads that another process must see (the
primitives of :mod:`.primitives`); everything else (keys, named sessions, signed ids, the
generator) is the same in every process started with the same settings, so it stays local.
The URL's credentials never print: every message shows :attr:`StateURL.label`.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple
from urllib.parse import parse_qs, parse_qsl, unquote, urlsplit, urlunsplit

from verdict_contract.core.errors import StateUnavailable as StateUnavailable

MEMORY: Final = "memory"
DEFAULT_STATE_TTL: Final = 24 * 60 * 60
"""Seconds a mock's keys outlive its last use in Redis (``--state-ttl``): a day."""
STATE_NAME: Final = re.compile(r"[A-Za-z0-9._-]{1,64}")
"""A name for a mock's keys (``--state-name``): readable, and no brace to break its hash tag."""
CLUSTER_SUFFIX: Final = "+cluster"
SENTINEL: Final = "redis+sentinel"
STATE_SCHEMES: Final = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster", SENTINEL)
"""``redis+cluster://`` names a Redis Cluster; ``redis://`` finds out from the server;
``redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB]`` the primary Sentinel names."""


class SentinelTarget(NamedTuple):
    """A primary found through Redis Sentinel: where the sentinels are, and what to ask them."""

    nodes: list[tuple[str, int]]
    service: str
    db: int
    password: str | None  # the primary's


def _sentinel(text: str) -> SentinelTarget:
    """``redis+sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT...]/SERVICE[/DB]``, or ValueError."""
    where, _, path = text.split("://", 1)[1].partition("/")
    credentials, _, hosts = where.rpartition("@")
    nodes = []
    for node in hosts.split(","):
        host, _, number = node.rpartition(":")
        if not host or not number.isdigit():
            raise ValueError(f"{_masked(text)!r}: each sentinel is HOST:PORT")
        nodes.append((host.strip("[]"), int(number)))
    service, _, db = path.partition("/")
    if not service or not (db == "" or db.isdigit()):
        raise ValueError(f"{_masked(text)!r}: the sentinels' HOST:PORT list, then /SERVICE[/DB]")
    password = unquote(credentials.partition(":")[2]) if credentials else None
    return SentinelTarget(nodes, unquote(service), int(db or 0), password)


class StateURL(str):
    """Where the state lives: ``memory``, or a Redis URL; its credentials never print (``str()``
    gives the URL for redis-py; everything shown uses :attr:`label`)."""

    __slots__ = ()

    @classmethod
    def parse(cls, raw: str) -> StateURL:
        text = raw.strip()
        if text.lower() == MEMORY:
            return cls(MEMORY)
        parts = urlsplit(text)
        pairs = parse_qsl(parts.query, keep_blank_values=True)  # ?password=p@ss: a password's
        at = [
            n for n, v in pairs if "@" in n or ("@" in v and not any(w in n for w in _SECRET_WORDS))
        ]
        if "@" not in parts.netloc and ("@" in parts.path + parts.fragment or at):
            raise ValueError(  # a "/", "?" or "#" ended the host inside a user or password
                f"'{parts.scheme}://…': the user or password holds a '/', '?' or '#'; write "
                "them as %2F, %3F and %23"
            )
        if parts.scheme == SENTINEL:
            _sentinel(text)
            return cls(text)
        if parts.scheme not in STATE_SCHEMES or not (parts.hostname or parts.path):
            raise ValueError(
                f"{_masked(text)!r} is not a state URL: 'memory', or redis://HOST:PORT/DB "
                "(rediss:// for TLS, unix:///path/redis.sock; redis+cluster:// for a Redis "
                "Cluster, redis+sentinel://HOST:PORT/SERVICE for Sentinel)"
            )
        try:
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        except ValueError:
            raise ValueError(f"{_masked(text)!r}: the port is not a number") from None
        dbs = [v for n, v in pairs if n == "db"] + [parts.path[1:]] * bool(parts.hostname)
        if not all(db.isascii() and db.isdigit() for db in dbs if db):  # redis-py: "/7x" is 0
            raise ValueError(f"{_masked(text)!r}: the database is not a number (HOST:PORT/DB)")
        return cls(text)

    @property
    def is_memory(self) -> bool:
        return self == MEMORY

    @property
    def cluster(self) -> bool | None:
        """A Redis Cluster: True when the URL says so, False for a socket or Sentinel, None: ask
        Redis."""
        scheme = urlsplit(self).scheme
        if scheme.endswith(CLUSTER_SUFFIX):
            return True
        return False if scheme in ("unix", SENTINEL) else None

    @property
    def sentinel(self) -> SentinelTarget | None:
        """The primary to find through Redis Sentinel, or None."""
        return _sentinel(self) if urlsplit(self).scheme == SENTINEL else None

    @property
    def client_url(self) -> str:
        """The URL as redis-py takes it (``redis+cluster://`` as ``redis://``)."""
        parts = urlsplit(self)
        if not parts.scheme.endswith(CLUSTER_SUFFIX):
            return str(self)
        return urlunsplit(parts._replace(scheme=parts.scheme.removesuffix(CLUSTER_SUFFIX)))

    @property
    def label(self) -> str:
        """The URL as messages show it: scheme, hosts, ports, path and db; no credential."""
        return _masked(str(self))  # a plain str: repr() of it does not come back here

    def __repr__(self) -> str:
        return repr(self.label)


def _masked(url: str) -> str:
    """A state URL as every message, answer, probe and log line shows it: its scheme, hosts and
    ports, path and database, and nothing else (no user, password or query parameter: redis-py
    takes a password as ``user:pw@``, ``?password=`` and ``?ssl_password=`` alike)."""
    scheme, separator, rest = url.partition("://")
    if not separator:  # not a URL at all (an error message quotes it): up to a query, no user
        return url.partition("?")[0].rpartition("@")[2]
    rest, _, query = rest.partition("#")[0].partition("?")
    where, slash, path = rest.rpartition("@")[2].partition("/")
    db = parse_qs(query).get("db", [])
    return f"{scheme}://{where}{slash}{path}" + (f"?db={db[0]}" if db else "")


def secrets_of(url: str) -> list[str]:
    """What a state URL holds that no text may show: its password, and the value of any query
    parameter named for a secret (``password``, ``ssl_password``, a token, a key)."""
    parts = urlsplit(url)
    found = [parts.password, unquote(parts.password)] if parts.password else []
    for name, values in parse_qs(parts.query).items():
        if any(word in name.lower() for word in _SECRET_WORDS):
            found += values
    return sorted({secret for secret in found if secret}, key=len, reverse=True)


_SECRET_WORDS: Final = ("pass", "secret", "token", "key", "auth", "credential")
