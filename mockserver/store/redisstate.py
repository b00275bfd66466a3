"""The mock's per-call state in Redis, so processes on any number of hosts behave as one mock.

Each request to ``/e`` is one run of a Lua script (:data:`DECIDE`): it counts the key in its
fixed window, takes the session's next scripted step, checks expiry against the shared clock
offset and appends the journal entry, atomically. Redis runs scripts one at a time, so the
count is exact, each step is used once, and the journal is in order of arrival. On the event
loop, the requests decided in one turn of the loop go as one pipeline: one round trip for all
of them, never more than one per request.

Why a script of our own rather than the ``limits`` library: one round trip must also take the
step and journal the request, which ``limits`` (its own commands, its own keys) cannot join;
and its windows follow the real clock, not the mock's ``advance``.

Every key of one mock is under ``verdict-mock:{<digest of the signing secret>}:``: mocks with
other secrets share a Redis without meeting, and the braces keep them in one Redis Cluster
slot, as a script needs. API keys are stored as HMAC digests, never as they are.

The event loop's client is ``redis.asyncio`` (hiredis parses where installed); the control API,
on worker threads, uses the blocking client. Both give up after :data:`TIMEOUT` seconds, without
retrying: the request gets a 503 and the next one tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import heapq
import json
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Final, cast

import redis
import redis.asyncio
import redis.asyncio.retry
import redis.retry
from redis._parsers import _AsyncHiredisParser, _HiredisParser  # its parser_class option
from redis._parsers.hiredis import NOT_ENOUGH_DATA
from redis.backoff import NoBackoff
from redis.exceptions import InvalidResponse, NoScriptError, OutOfMemoryError, ReadOnlyError

from ..model import scripts as script_store
from ..model.scripts import ScriptStoreFull, script_bytes, store_full
from ..model.sessions import Step
from ..model.steps import Outcome, encode_step, outcome, scripted
from .backend import Facts, SharedCall, StateUnavailable, StateURL
from .journal import UNTRUSTED_KEPT, Entry, EntryParts, decode_entry, entry_head, entry_tail
from .journal import untrusted as is_untrusted
from .luascripts import (
    APPEND,
    DECIDE,
    LOAD,
    AppendArgs,
    DecideArgs,
    DecideKeys,
    JournalKeys,
    LoadArgs,
    LoadKeys,
    flat,
)

TIMEOUT: Final = 1.0
"""Seconds a call to Redis may take (connecting included) before the request gets a 503."""
JOURNAL_BYTES: Final = 16 * 1024 * 1024
"""The shared journal's size in bytes, besides its ``--journal-size`` entries (oldest go)."""
REPLY_SLACK: Final = 1024 * 1024
"""A reply's bytes past what the journal may hold (its framing, the ring, a script)."""
_ENTRY_FRAMING: Final = 32
"""Bytes of RESP framing per journal entry in a reply (``$<length>\r\n...\r\n``), at most."""
_MINTED: Final = "minted"
_DECIDE_SHA: Final = hashlib.sha1(DECIDE.encode()).hexdigest()  # noqa: S324 - Redis names it so


def _stored(steps: tuple[Step, ...]) -> str:
    """A script as the store keeps it: per step, the journal's tail of its answer, the step and
    its bytes (as :func:`.scripts.script_bytes` counts them: the store frees them as used)."""
    if not steps:
        return ""
    items = []
    for step in steps:
        answer = scripted(step, b"")  # status, outcome and fault do not depend on the body
        tail = entry_tail(outcome(answer)) if answer is not None else ""
        items.append([tail, encode_step(step), script_bytes((step,))])
    return json.dumps(items, separators=(",", ":"))


def _number(value: float | None) -> str:
    return "" if value is None else repr(float(value))


class _BoundedReader:
    """hiredis's reader, refusing a reply past ``limit`` bytes: a Redis speaking garbage (an
    endless bulk string) costs the mock at most that much, not what fits in its timeout."""

    def __init__(self, reader: Any, limit: int) -> None:
        self._reader = reader
        self._limit = limit
        self._fed = 0  # since the last whole reply

    def feed(self, data: Any, *span: int) -> None:
        self._fed += span[1] if len(span) == 2 else len(data)
        if self._fed > self._limit:
            raise InvalidResponse(f"a reply longer than {self._limit} bytes")
        self._reader.feed(data, *span)

    def gets(self, *args: Any) -> Any:
        reply = self._reader.gets(*args)
        if reply is not NOT_ENOUGH_DATA:
            self._fed = 0
        return reply

    def has_data(self) -> bool:
        return bool(self._reader.has_data())


def _bounded_parsers(limit: int) -> tuple[type[_HiredisParser], type[_AsyncHiredisParser]]:
    """redis-py's hiredis parsers (its ``parser_class`` option), each reply bounded."""

    class Bounded(_HiredisParser):
        def on_connect(self, connection: Any, **kwargs: Any) -> None:
            super().on_connect(connection, **kwargs)  # type: ignore[no-untyped-call]
            self._reader = cast(Any, _BoundedReader(self._reader, limit))  # its reader's duck

    class AsyncBounded(_AsyncHiredisParser):
        def on_connect(self, connection: Any) -> None:
            super().on_connect(connection)  # type: ignore[no-untyped-call]
            self._reader = cast(Any, _BoundedReader(self._reader, limit))

    return Bounded, AsyncBounded


class RedisBackend:
    """The per-call state in Redis (see the module's docstring); one per mock app."""

    def __init__(self, url: StateURL, secret: str, journal_size: int) -> None:
        self.label = url.label
        self._url = str(url)
        digest = hashlib.sha256(f"verdict-mock:{secret}".encode()).hexdigest()[:20]
        self.prefix = f"verdict-mock:{{{digest}}}:"
        self.keys = DecideKeys(*(self.prefix + name for name in DecideKeys._fields))
        keys = self.keys
        self.journal_keys = JournalKeys(
            keys.journal, keys.journal_bytes, keys.ring, keys.ring_bytes
        )
        self.load_keys = LoadKeys(keys.scripts, keys.script_bytes, self.prefix + "named")
        self._minted_key = self.prefix + _MINTED
        self._journal_size = journal_size
        self.capacity = script_store.MAX_SCRIPT_BYTES  # read when made, as ScriptBook's
        # the biggest reply: the journal as LRANGE returns it, its framing, the ring, a script
        most = JOURNAL_BYTES + _ENTRY_FRAMING * journal_size + REPLY_SLACK
        self.reply_bytes = most
        sync_parser, async_parser = _bounded_parsers(most)
        options: dict[str, Any] = {
            "socket_timeout": TIMEOUT,
            "socket_connect_timeout": TIMEOUT,
            "decode_responses": True,
        }
        self.sync = redis.Redis.from_url(
            self._url, retry=redis.retry.Retry(NoBackoff(), 0), parser_class=sync_parser, **options
        )
        self._options = {**options, "parser_class": async_parser}
        self._decide = self.sync.register_script(DECIDE)
        self._append = self.sync.register_script(APPEND)
        self._load = self.sync.register_script(LOAD)
        self._async: redis.asyncio.Redis | None = None
        self._async_loop: asyncio.AbstractEventLoop | None = None
        self._batch: list[tuple[SharedCall, asyncio.Future[Facts]]] = []
        self._sending: set[asyncio.Task[None]] = set()
        # Round trips and failures: on the loop as plain ints (one thread), on the control
        # API's threads under a lock (never the hot path's).
        self._trips = self._errors = 0
        self._sync_trips = self._sync_errors = 0
        self._count_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RedisBackend({self.label!r})"

    # -- the hot path -------------------------------------------------------------------------
    def _args(self, call: SharedCall) -> DecideArgs:
        limited, local, expired, served = call.tails
        return DecideArgs(
            now=repr(call.now),
            counted=call.key,
            budget=str(call.budget),
            window=repr(call.window),
            session=call.session,
            collected_at=_number(call.collected_at),
            lifetime=repr(call.lifetime),
            local_stands="1" if call.local_stands else "",
            untrusted="1" if call.untrusted else "",
            entry_head=call.entry,
            tail_limited=limited,
            tail_local=local,
            tail_expired=expired,
            tail_served=served,
            max_entries=str(self._journal_size),
            max_bytes=str(JOURNAL_BYTES),
            ring_entries=str(UNTRUSTED_KEPT),
        )

    @staticmethod
    def _facts(reply: list[Any]) -> Facts:
        wait, step, expired = reply
        return Facts(float(wait) if wait else None, step or None, bool(expired))

    def decide(self, call: SharedCall) -> Facts:
        keys, args = flat(self.keys, self._args(call))
        with self._guard():
            return self._facts(self._decide(keys=keys, args=args))

    async def decide_async(self, call: SharedCall) -> Facts:
        """One request's decision; the calls of one turn of the loop go as one pipeline."""
        loop = asyncio.get_running_loop()
        if self._async_loop is not loop:  # a client is per loop: made on the first that asks
            self._async = redis.asyncio.Redis.from_url(
                self._url, retry=redis.asyncio.retry.Retry(NoBackoff(), 0), **self._options
            )
            self._async_loop, self._batch = loop, []
        future: asyncio.Future[Facts] = loop.create_future()
        self._batch.append((call, future))
        if len(self._batch) == 1:
            loop.call_soon(self._send_batch)
        return await future

    def _send_batch(self) -> None:
        batch, self._batch = self._batch, []
        if batch and self._async_loop is not None:
            task = self._async_loop.create_task(self._run(batch))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _run(self, batch: list[tuple[SharedCall, asyncio.Future[Facts]]]) -> None:
        """Send a batch: each call one EVALSHA in one pipeline (one round trip for all)."""
        self._trips += 1
        try:
            async with asyncio.timeout(TIMEOUT):
                replies = await self._pipeline(batch)
                lost = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
                if lost:  # Redis restarted and forgot the script: those calls did not run
                    self._trips += 2
                    assert self._async is not None
                    await self._async.script_load(DECIDE)
                    again = await self._pipeline([batch[i] for i in lost])
                    for index, reply in zip(lost, again, strict=True):
                        replies[index] = reply
        except Exception as exc:  # whatever a broken store causes: a 503
            self._errors += 1
            failed = self._unavailable(exc)
            for _, future in batch:
                if not future.done():
                    future.set_exception(failed)
            return
        for (_, future), reply in zip(batch, replies, strict=True):
            if future.done():  # cancelled: the server is stopping
                continue
            try:
                if isinstance(reply, Exception):
                    raise reply
                future.set_result(self._facts(reply))
            except Exception as exc:  # a reply of the wrong shape, or refused (full): a 503
                self._errors += 1
                future.set_exception(self._unavailable(exc))

    async def _pipeline(self, batch: list[tuple[SharedCall, asyncio.Future[Facts]]]) -> list[Any]:
        assert self._async is not None
        pipe = self._async.pipeline(transaction=False)
        for call, _ in batch:
            keys, args = flat(self.keys, self._args(call))
            pipe.evalsha(_DECIDE_SHA, len(keys), *keys, *args)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        return replies

    async def close_async(self) -> None:
        client, self._async, self._async_loop = self._async, None, None
        if client is not None:
            with contextlib.suppress(Exception):  # closing a broken connection: nothing to do
                await client.aclose()

    def _unavailable(self, exc: BaseException) -> StateUnavailable:
        if isinstance(exc, StateUnavailable):
            return exc
        refused = _REFUSALS.get(type(exc))
        if refused is not None:  # Redis answers, and refuses to be written: retrying is no use
            code, reason = refused
            return StateUnavailable(self.label, reason, code=code, retry=False)
        reason = type(exc).__name__ if isinstance(exc, TimeoutError) else str(exc) or repr(exc)
        return StateUnavailable(self.label, reason.replace(self._url, self.label)[:200])

    def writable(self) -> StateUnavailable | None:
        """Whether Redis would run a write now, asked without writing (readiness)."""
        try:
            with self._guard():
                self.sync.eval(PROBE, 0)
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
        except (StateUnavailable, ScriptStoreFull):
            raise
        except Exception as exc:  # a garbled reply raises anything
            failed = True
            raise self._unavailable(exc) from None
        finally:
            with self._count_lock:
                self._sync_trips += 1
                self._sync_errors += failed

    def calls(self) -> tuple[int, int]:
        with self._count_lock:
            return self._trips + self._sync_trips, self._errors + self._sync_errors

    # -- the control API (worker threads) -----------------------------------------------------
    def offset(self) -> float:
        with self._guard():
            return float(self.sync.get(self.keys.clock) or 0.0)

    def advance(self, seconds: float) -> None:
        with self._guard():
            self.sync.incrbyfloat(self.keys.clock, seconds)

    def expire(self, session_id: str) -> None:
        with self._guard():
            self.sync.sadd(self.keys.expired, session_id)

    def marked_expired(self, session_id: str) -> bool:
        with self._guard():
            return bool(self.sync.sismember(self.keys.expired, session_id))

    def next_mint(self) -> int:
        with self._guard():
            return int(self.sync.incr(self._minted_key))

    def _run_load(
        self, mode: str, fingerprint: str, scripts: Mapping[str, tuple[Step, ...]]
    ) -> None:
        extra: list[str] = []
        needed = 0
        for session_id, steps in scripts.items():
            size = script_bytes(steps)
            needed += size
            extra += [session_id, _stored(steps), str(size)]
        keys, args = flat(self.load_keys, LoadArgs(mode, fingerprint, str(self.capacity)), *extra)
        if mode == "reset":
            keys += [k for k in (*self.keys, self._minted_key) if k not in keys]
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
        with self._guard():
            return int(self.sync.get(self.keys.script_bytes) or 0)

    def record(self, parts: EntryParts, generation: int) -> None:
        """Journal an entry decided apart from ``/e`` (its latency as the store has it: null)."""
        del generation  # a reset clears the store's journal at once: nothing is in flight
        untrusted = is_untrusted(parts.method, parts.path, parts.status, parts.outcome)
        tail = entry_tail(outcome_of(parts))
        args = AppendArgs(
            untrusted="1" if untrusted else "",
            entry=entry_head(parts) + tail,
            max_entries=str(self._journal_size),
            max_bytes=str(JOURNAL_BYTES),
            ring_entries=str(UNTRUSTED_KEPT),
        )
        keys, argv = flat(self.journal_keys, args)
        with self._guard():
            self._append(keys=keys, args=argv)

    def entries(self) -> list[Entry]:
        """The journal and the ring, merged in time order (read in one transaction)."""
        with self._guard():
            pipe = self.sync.pipeline(transaction=True)
            pipe.lrange(self.keys.journal, 0, -1)
            pipe.lrange(self.keys.ring, 0, -1)
            kept, ring = pipe.execute()
            entries = [decode_entry(text) for text in kept]
            if ring:
                entries = list(heapq.merge(entries, map(decode_entry, ring), key=_entry_time))
            return entries

    def clear_journal(self) -> None:
        with self._guard():
            int(self.sync.delete(*self.journal_keys))  # one command: atomic; a count, or broken

    def journal_length(self) -> int:
        with self._guard():
            pipe = self.sync.pipeline(transaction=True)
            pipe.llen(self.keys.journal)
            pipe.llen(self.keys.ring)
            return sum(int(length) for length in pipe.execute())

    def close(self) -> None:
        self.sync.close()


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


def _entry_time(entry: Entry) -> float:
    return entry.time


def outcome_of(parts: EntryParts) -> Outcome:
    return parts.reading


def _fingerprint(scripts: Mapping[str, tuple[Step, ...]]) -> str:
    """Which named scripts were loaded: a process that finds them loaded leaves them be."""
    digest = hashlib.sha256()
    for session_id, text in sorted((sid, _stored(steps)) for sid, steps in scripts.items()):
        digest.update(f"{len(session_id)}:{session_id}{len(text)}:{text}".encode())
    return digest.hexdigest()
