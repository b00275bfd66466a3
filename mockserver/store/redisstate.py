"""The mock's per-call state in Redis, so processes on any number of hosts behave as one mock.

Requests to ``/e`` are decided by a Lua script (:data:`DECIDE`), one run for the requests of
one round trip (:mod:`.redisbatch`): for each, in order, it counts the key in its fixed window,
takes the session's next scripted step, checks expiry against the shared clock offset and
appends the journal entry, atomically. Redis runs scripts one at a time, so the count is exact,
each step is used once, and the journal is in order of arrival.

Why a script of our own rather than the ``limits`` library: one round trip must also take the
step and journal the request, which ``limits`` (its own commands, its own keys) cannot join;
and its windows follow the real clock, not the mock's ``advance``.

Every key of one mock is under ``verdict-mock:{<name>.<digest>}:`` (``--state-name``; without
it ``verdict-mock:{<digest>}:``), the digest a slow hash of the signing secret that does not give
it back: mocks with other secrets share a Redis without meeting, an operator reads whose keys
they are, and the braces keep them in one Redis Cluster slot, as a script needs. Every key lives
``--state-ttl`` seconds past the mock's last use: each request and control call renews them all
in its own round trip. API keys are stored as HMAC digests, never as they are.

On the event loop, ``/e`` goes through its own connection (:mod:`.redisline`: hiredis over the
connection's protocol), or, on a cluster or over TLS, ``redis.asyncio``'s pipeline; the control
API, on worker threads, uses the blocking client (:mod:`.redisclients`: one server or a
cluster).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import heapq
import json
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from redis.exceptions import OutOfMemoryError, ReadOnlyError

from ..model import scripts as script_store
from ..model.scripts import ScriptStoreFull, script_bytes, step_costs, store_full
from ..model.sessions import Step
from ..model.steps import encode_step, outcome, scripted
from .availability import Calls
from .backend import (
    DEFAULT_STATE_TTL,
    Facts,
    SharedCall,
    StateUnavailable,
    StateURL,
    secrets_of,
)
from .journal import UNTRUSTED_KEPT, JournalEntry, decode_entry, entry_tail, head_past_time
from .luascripts import (
    APPEND,
    DECIDE,
    LOAD,
    AppendArgs,
    DecideKeys,
    JournalKeys,
    LoadArgs,
    LoadKeys,
    flat,
)
from .redisbatch import Batches, Done, decide_argv, read_facts
from .redisclients import TIMEOUT as TIMEOUT
from .redisclients import AsyncClient, Clients, ClusterURLError
from .redisline import Command, Line

JOURNAL_BYTES: Final = 16 * 1024 * 1024
"""The shared journal's size in bytes, besides its ``--journal-size`` entries (oldest go)."""
REPLY_SLACK: Final = 1024 * 1024
"""A reply's bytes past what the journal may hold (its framing, the ring, a script)."""
_ENTRY_FRAMING: Final = 32
"""Bytes of RESP framing per journal entry in a reply (``$<length>\r\n...\r\n``), at most."""
_NAMING: Final = (b"verdict-mock state keys", 20_000)
"""PBKDF2's salt and rounds for the secret's digest in key names: slow to guess back from."""


def _stored(steps: tuple[Step, ...]) -> str:
    """A script as the store keeps it: per step, the journal's tail of its answer, the step,
    its bytes (:func:`.scripts.step_costs`: the store frees them as used) and
    the delay of a delay step (its answer is the session's own: the script journals the delay
    into that answer's tail, as the memory store journals it)."""
    if not steps:
        return ""
    items = []
    for step, cost in zip(steps, step_costs(steps), strict=True):
        answer = scripted(step, b"")  # status, outcome and fault do not depend on the body
        tail = entry_tail(outcome(answer)) if answer is not None else ""
        delay = step.delay_ms if answer is None else 0
        items.append([tail, encode_step(step), cost, delay])
    return json.dumps(items, separators=(",", ":"))


def key_prefix(secret: str, name: str | None = None) -> str:
    """Where a mock's keys are: its name, if given, and a digest of its secret, as a hash tag."""
    salt, rounds = _NAMING
    digest = hashlib.pbkdf2_hmac("sha256", secret.encode(), salt, rounds).hex()[:16]
    return f"verdict-mock:{{{f'{name}.{digest}' if name else digest}}}:"


class RedisBackend:
    """The per-call state in Redis (see the module's docstring); one per mock app."""

    def __init__(
        self,
        url: StateURL,
        secret: str,
        journal_size: int,
        ttl: float = DEFAULT_STATE_TTL,
        name: str | None = None,
    ) -> None:
        self.label = url.label
        self._url = str(url)
        self.prefix = key_prefix(secret, name)
        self.keys = DecideKeys(*(self.prefix + field for field in DecideKeys._fields))
        keys = self.keys
        self.journal_keys = JournalKeys(
            keys.journal, keys.journal_bytes, keys.ring, keys.ring_bytes
        )
        self.load_keys = LoadKeys(keys.scripts, keys.script_bytes, keys.named)
        self.ttl_ms = str(max(1, math.ceil(ttl * 1000)))
        self._journal_size = journal_size
        self.capacity = script_store.MAX_SCRIPT_BYTES  # read when made, as ScriptBook's
        # the biggest reply: the journal as LRANGE returns it, its framing, the ring, a script
        most = JOURNAL_BYTES + _ENTRY_FRAMING * journal_size + REPLY_SLACK
        self.reply_bytes = most
        self._calls = Calls(self.label)  # counted; its going down and back logged
        with self._guard():  # a cluster is found from the server: it must answer now
            self._clients = Clients(url, most)
        self.sync = self._clients.sync
        self._decide = self.sync.register_script(DECIDE)
        self._append = self.sync.register_script(APPEND)
        self._load = self.sync.register_script(LOAD)
        self._async: AsyncClient | None = None
        self._line: Line | None = None  # the hot path's own connection (not on a cluster)
        self._async_loop: asyncio.AbstractEventLoop | None = None
        self._batches_now: Batches | None = None

    @property
    def cluster(self) -> bool:
        """Whether the state is on a Redis Cluster (from its URL, or as the server said)."""
        return self._clients.cluster

    def _all_keys(self, named: tuple[str, ...]) -> list[str]:
        """A script's KEYS: those it names, then the rest of the mock's (for it to renew)."""
        return [*named, *(key for key in self.keys if key not in named)]

    def __repr__(self) -> str:
        return f"RedisBackend({self.label!r})"

    # -- the hot path -------------------------------------------------------------------------
    @property
    def bounds(self) -> tuple[str, str, str, str]:
        """The journal's entries and bytes, the ring's entries, the keys' TTL (as DECIDE reads
        them)."""
        return str(self._journal_size), str(JOURNAL_BYTES), str(UNTRUSTED_KEPT), self.ttl_ms

    def decide(self, call: SharedCall) -> Facts:
        argv = decide_argv(self.bounds, [call])
        with self._guard():
            (facts,) = read_facts(self._decide(keys=list(self.keys), args=argv), 1)
            return facts

    def _batches(self) -> Batches:
        """The running loop's batches (made on the first request of each loop)."""
        loop = asyncio.get_running_loop()
        if self._async_loop is not loop or self._batches_now is None:
            self._async = self._clients.make_async()
            url = StateURL(self._url).client_url
            plain = not (self.cluster or self._clients.sentinel)  # else redis-py's pipeline
            if self._line is not None:  # the previous loop's connection: closed, not left open
                self._line.close()
            self._line = Line.of(url, self.reply_bytes) if plain else None
            send = self._pipeline if self._line is None else self._line.send
            self._async_loop = loop
            self._batches_now = Batches(
                self.keys, self.bounds, send, self._calls, self._unavailable, TIMEOUT
            )
        return self._batches_now

    def submit(self, call: SharedCall, done: Done) -> None:
        """Decide ``call`` in the running loop's next round trip; ``done`` is told."""
        self._batches().submit(call, done)

    async def _pipeline(self, commands: list[Command]) -> list[Any]:
        """A round trip through redis-py (a cluster, Sentinel, TLS)."""
        assert self._async is not None
        pipe = self._async.pipeline(transaction=False)
        for command in commands:  # by name: redis-py's cluster pipeline refuses .evalsha()
            pipe.execute_command(*command)  # lest a script's keys span slots (ours share one)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        return replies

    async def close_async(self) -> None:
        client, self._async, self._async_loop = self._async, None, None
        batches, self._batches_now = self._batches_now, None
        if batches is not None:
            await batches.aclose()
        if self._line is not None:
            self._line.close()
        if client is not None:
            await self._clients.aclose(client)

    def _unavailable(self, exc: BaseException) -> StateUnavailable:
        return unavailable(exc, self.label, self._url)

    def writable(self) -> StateUnavailable | None:
        """Whether Redis would run a write now, asked without writing (readiness), of the node
        that holds this mock's keys: the probe names one of them, so a Redis Cluster sends it
        where ``/e`` goes (keyless, it went to any node: ready while the owner was full)."""
        try:
            with self._guard():
                self.sync.eval(PROBE, 1, self.keys.clock)
        except StateUnavailable as exc:
            return exc
        return None

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """Any failure of a call to the store, or of reading its reply, as StateUnavailable:
        a Redis down, slow or speaking garbage gets a 503 naming it, never another answer."""
        failed = False
        try:
            yield
        except (StateUnavailable, ScriptStoreFull, ClusterURLError):
            raise
        except Exception as exc:  # a garbled reply raises anything
            failed = True
            self._calls.failed(problem := self._unavailable(exc))
            raise problem from None
        else:
            self._calls.answered()
        finally:
            self._calls.blocking(failed)

    def calls(self) -> tuple[int, int]:
        return self._calls.totals()

    # -- the control API (worker threads) -----------------------------------------------------
    def _renewing(self, *commands: Callable[[Any], object]) -> list[Any]:
        """Run ``commands`` (each queues one on a pipeline) and renew every key of the mock,
        in one transaction: one round trip. Their replies, in order."""
        with self._guard():
            pipe = self.sync.pipeline(transaction=True)
            for command in commands:
                command(pipe)
            for key in self.keys:
                pipe.pexpire(key, int(self.ttl_ms))
            replies: list[Any] = pipe.execute()
            return replies[: len(commands)]

    def offset(self) -> float:
        (clock,) = self._renewing(lambda pipe: pipe.get(self.keys.clock))
        with self._guard():
            return float(clock or 0.0)

    def advance(self, seconds: float) -> None:
        self._renewing(lambda pipe: pipe.incrbyfloat(self.keys.clock, seconds))

    def expire(self, session_id: str) -> None:
        self._renewing(lambda pipe: pipe.sadd(self.keys.expired, session_id))

    def marked_expired(self, session_id: str) -> bool:
        (marked,) = self._renewing(lambda pipe: pipe.sismember(self.keys.expired, session_id))
        return bool(marked)

    def next_mint(self) -> int:
        (count,) = self._renewing(lambda pipe: pipe.incr(self.keys.minted))
        with self._guard():
            return int(count)

    def _run_load(
        self, mode: str, fingerprint: str, scripts: Mapping[str, tuple[Step, ...]]
    ) -> None:
        extra: list[str] = []
        needed = 0
        for session_id, steps in scripts.items():
            size = script_bytes(steps)
            needed += size
            extra += [session_id, _stored(steps), str(size)]
        how = LoadArgs(mode, fingerprint, str(self.capacity), self.ttl_ms)
        keys, args = flat(self.load_keys, how, *extra)
        keys = self._all_keys(tuple(keys))  # "reset" deletes them all
        with self._guard():
            done, held = self._load(keys=keys, args=args)
            held = int(held)
        if not done:
            raise store_full(held, needed, self.capacity)

    def load_script(self, session_id: str, steps: tuple[Step, ...]) -> None:
        self._run_load("one", "", {session_id: steps})

    def load_named(self, scripts: Mapping[str, tuple[Step, ...]]) -> None:
        self._run_load("named", _fingerprint(scripts), scripts)

    def reset(self, scripts: Mapping[str, tuple[Step, ...]]) -> None:
        self._run_load("reset", _fingerprint(scripts), scripts)

    def script_bytes(self) -> int:
        (held,) = self._renewing(lambda pipe: pipe.get(self.keys.script_bytes))
        with self._guard():
            return int(held or 0)

    def record(self, entry: JournalEntry) -> None:
        """Journal an entry decided apart from ``/e`` (its latency as the store has it: null;
        its generation unread: a reset clears the store's journal at once, nothing is in
        flight)."""
        tail = entry_tail(entry.reading)
        args = AppendArgs(
            untrusted="1" if entry.untrusted else "",
            now=repr(entry.time),
            fields=head_past_time(entry) + tail,
            max_entries=str(self._journal_size),
            max_bytes=str(JOURNAL_BYTES),
            ring_entries=str(UNTRUSTED_KEPT),
            ttl_ms=self.ttl_ms,
        )
        keys, argv = flat(self.journal_keys, args)
        with self._guard():
            self._append(keys=self._all_keys(tuple(keys)), args=argv)

    def entries(self) -> list[JournalEntry]:
        """The journal and the ring, merged in time order (read in one transaction)."""
        kept, ring = self._renewing(
            lambda pipe: pipe.lrange(self.keys.journal, 0, -1),
            lambda pipe: pipe.lrange(self.keys.ring, 0, -1),
        )
        with self._guard():
            entries = [decode_entry(text) for text in kept]
            if ring:
                untrusted = [decode_entry(text, untrusted=True) for text in ring]
                entries = list(heapq.merge(entries, untrusted, key=_entry_time))
            return entries

    def clear_journal(self) -> None:
        (deleted,) = self._renewing(lambda pipe: pipe.delete(*self.journal_keys))
        with self._guard():
            int(deleted)  # a count, or broken

    def journal_length(self) -> int:
        lengths = self._renewing(
            lambda pipe: pipe.llen(self.keys.journal), lambda pipe: pipe.llen(self.keys.ring)
        )
        with self._guard():
            return sum(int(length) for length in lengths)

    def close(self) -> None:
        self._clients.close()


PROBE: Final = "#!lua\nreturn 1"
"""A script that writes nothing but declares no ``no-writes`` flag: Redis refuses to run it as
it would refuse :data:`.luascripts.DECIDE`'s writes (OOM when full under ``noeviction``, READONLY
on a read-only replica, MISCONF when it cannot persist), so readiness asks without writing."""

_REFUSALS: Final[dict[type[BaseException], tuple[str, str]]] = {
    OutOfMemoryError: (
        "state_full",
        "Redis is full (used memory over maxmemory, with a noeviction policy)",
    ),
    ReadOnlyError: ("state_read_only", "Redis is a read-only replica"),
}
"""Redis's refusals to be written, each with the 503's code and its reason."""


def unavailable(exc: BaseException, label: str, url: str) -> StateUnavailable:
    """A failure of the store as the 503 it gives: whether retrying can help, and the URL
    (which may hold a password) shown as its label."""
    if isinstance(exc, StateUnavailable):
        return exc
    refused = _REFUSALS.get(type(exc))
    if refused is not None:  # Redis answers, and refuses to be written: retrying is no use
        code, reason = refused
        return StateUnavailable(label, reason, code=code, retry=False)
    reason = type(exc).__name__ if isinstance(exc, TimeoutError) else str(exc) or repr(exc)
    reason = reason.replace(url, label)
    for secret in secrets_of(url):  # whatever redis-py quoted of it
        reason = reason.replace(secret, "…")
    return StateUnavailable(label, reason[:200])


def _entry_time(entry: JournalEntry) -> float:
    return entry.time


def _fingerprint(scripts: Mapping[str, tuple[Step, ...]]) -> str:
    """Which named scripts were loaded: a process that finds them loaded leaves them be."""
    digest = hashlib.sha256()
    for session_id, text in sorted((sid, _stored(steps)) for sid, steps in scripts.items()):
        digest.update(f"{len(session_id)}:{session_id}{len(text)}:{text}".encode())
    return digest.hexdigest()
