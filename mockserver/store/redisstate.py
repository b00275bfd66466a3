"""``RedisStore`` (``--state``): the primitives of :mod:`.primitives` in Redis, so processes on
any number of hosts behave as one mock.

Each primitive is one Redis command or one short Lua script, so each is atomic across processes.
A mock's keys share one hash tag (one Redis Cluster slot, as a script needs) made of its name and
a slow digest of its secret, and live ``--state-ttl`` seconds past its last use
(docs/servers.md); API keys are kept as keyed BLAKE2b digests. On the event loop a round trip goes
through the loop's own connection (:class:`.redisclients.Line`) or redis-py's async pipeline (a
cluster, Sentinel, TLS).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import heapq
import json
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from operator import attrgetter
from typing import Any, Final, NamedTuple, TypeVar

from redis.exceptions import NoScriptError, OutOfMemoryError, ReadOnlyError

from ..model import scripts as script_store
from ..model.scripts import ScriptStoreFull, admits, script_bytes, step_costs, store_full
from ..model.sessions import Step
from ..model.steps import decode_step, encode_step
from .backend import DEFAULT_STATE_TTL, StateUnavailable, StateURL, secrets_of
from .journal import UNTRUSTED_KEPT, JournalEntry, decode_entry, encode_entry
from .primitives import Append, Ask, Trip
from .redisclients import TIMEOUT, AsyncClient, Clients, ClusterURLError, Command, Line

ENTRY_BYTES: Final = 64 * 1024
"""An entry's bytes at most as the store keeps it (every field of it is bounded: journal.py)."""
REPLY_SLACK: Final = 1024 * 1024
"""A reply's bytes past the journal's and the ring's entries (framing, a script)."""
T = TypeVar("T")
log = logging.getLogger("mockserver.state")
_NAMING: Final = (b"verdict-mock state keys", 20_000)
"""PBKDF2's salt and rounds for the secret's digest in key names: slow to guess back from."""


class Keys(NamedTuple):
    """Every key of a mock but the step lists (``steps:<session>``, listed in ``scripted``)."""

    clock: str
    generation: str  # moved by each clear of the journal (primitives.Ask.generation)
    limits: str  # per API key digest: its window, "start count"
    expired: str  # sessions expired by hand
    journal: str
    ring: str  # the untrusted requests' journal
    seq: str  # the last entry's number, in both
    minted: str
    script_bytes: str
    scripted: str  # the sessions that have steps left
    named: str  # the fingerprint of the named scripts last loaded
    answering: str  # the settings that change answers, as the first process gave them


# Counting a hit (Ask.key): its window as "start count" in a hash, the start as the mock sent
# it (Python's repr of a float reads back exactly); nothing counted if the clock moved.
COUNT: Final = """
if tonumber(redis.call('GET', KEYS[2]) or '0') ~= tonumber(ARGV[4]) then return false end
local start, count = ARGV[2], 0
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held then
  local s, c = string.match(held, '^(%S+) (%d+)$')
  if s and tonumber(ARGV[2]) - tonumber(s) < tonumber(ARGV[3]) then
    start, count = s, tonumber(c)  -- within the window: counted in it
  end
end
count = count + 1
if redis.call('HSET', KEYS[1], ARGV[1], start .. ' ' .. count) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[5])  -- a key's first count, made between renewals
end
return {start, count}
"""

# TakeStep: a step is kept as "<bytes it frees> <step as JSON>" (KEYS: its list, the bytes held,
# the scripted set; ARGV: the session, the TTL).
TAKE: Final = """
local step = redis.call('LPOP', KEYS[1])
if not step then return false end
local cost, text = string.match(step, '^(%d+) (.*)$')
redis.call('DECRBY', KEYS[2], cost)
if redis.call('LLEN', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[3], ARGV[1])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return text
"""

# Every key of the mock given its TTL again (KEYS: the Keys; ARGV: the TTL, the step lists'
# prefix): a mock in use keeps its state, an idle one's goes away by itself.
_KEY: Final = {field: index + 1 for index, field in enumerate(Keys._fields)}  # KEYS[i], by name
_RENEW: Final = f"""
local function renew(ttl, steps)
  for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ttl) end
  for _, session in ipairs(redis.call('SMEMBERS', KEYS[{_KEY["scripted"]}])) do
    redis.call('PEXPIRE', steps .. session, ttl)
  end
end
"""
RENEW: Final = _RENEW + "renew(ARGV[1], ARGV[2])\nreturn 1\n"

# Append: the entries of one turn of the loop in one call (KEYS: the Keys; ARGV: the journal's
# bound, the ring's, the TTL, the step lists' prefix, then per entry: its list, 'j' or 'r', the
# generation it was decided in ('': now) and the entry). An entry of an earlier generation is
# not kept; every key is renewed when a list written was renewed over a tenth of the TTL (at
# most 1 s) ago. Returns, per entry, 1 if it was kept, else 0.
APPEND: Final = (
    _RENEW
    + f"""
local generation = redis.call('GET', KEYS[{_KEY["generation"]}]) or '0'
local ttl, kept, written = tonumber(ARGV[3]), {{}}, {{}}
for i = 5, #ARGV, 3 do
  if ARGV[i + 1] ~= '' and ARGV[i + 1] ~= generation then
    kept[#kept + 1] = 0
  else
    local ring = ARGV[i] == 'r'
    local list = ring and KEYS[{_KEY["ring"]}] or KEYS[{_KEY["journal"]}]
    local most = tonumber(ring and ARGV[2] or ARGV[1])
    local entry = redis.call('INCR', KEYS[{_KEY["seq"]}]) .. ' ' .. ARGV[i + 2]
    if redis.call('RPUSH', list, entry) > most then redis.call('LTRIM', list, -most, -1) end
    written[list] = true
    kept[#kept + 1] = 1
  end
end
for _, list in ipairs({{KEYS[{_KEY["journal"]}], KEYS[{_KEY["ring"]}]}}) do
  if written[list] and redis.call('PTTL', list) < ttl - math.min(1000, ttl / 10) then
    renew(ttl, ARGV[4])
    break
  end
end
return kept
"""
)
MOST_APPENDED: Final = 64
"""Entries one call of APPEND takes at most (a turn of the loop with more makes more calls)."""

# Scripts replaced whole (KEYS: named, script_bytes, scripted, then one list per session; ARGV:
# the fingerprint ('' for a mint), bytes counted already, the TTL, then per session its id,
# its count of steps and its steps). Named scripts found loaded with this fingerprint stay.
LOAD: Final = """
if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) == ARGV[1] then return 1 end
local change = 0 - tonumber(ARGV[2])  -- not -0, which INCRBY refuses
local i, k = 4, 4
while i <= #ARGV do
  local session, count = ARGV[i], tonumber(ARGV[i + 1])
  for _, old in ipairs(redis.call('LRANGE', KEYS[k], 0, -1)) do
    change = change - tonumber(string.match(old, '^%d+'))
  end
  redis.call('DEL', KEYS[k])
  for j = i + 2, i + 1 + count, 1000 do
    redis.call('RPUSH', KEYS[k], unpack(ARGV, j, math.min(j + 999, i + 1 + count)))
  end
  for j = i + 2, i + 1 + count do change = change + tonumber(string.match(ARGV[j], '^%d+')) end
  if count > 0 then
    redis.call('PEXPIRE', KEYS[k], ARGV[3])
    redis.call('SADD', KEYS[3], session)
  else
    redis.call('SREM', KEYS[3], session)
  end
  i, k = i + 2 + count, k + 1
end
redis.call('INCRBY', KEYS[2], change)
if ARGV[1] ~= '' then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
"""

# Reset: every key and step list gone, the generation moved, the entries' numbers kept counting
# (KEYS: scripted, generation, the rest; ARGV: the step lists' prefix).
CLEAR: Final = """
for _, session in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  redis.call('DEL', ARGV[1] .. session)
end
for i = 3, #KEYS do redis.call('DEL', KEYS[i]) end
redis.call('DEL', KEYS[1])
redis.call('INCR', KEYS[2])
return 1
"""


_SHA: Final = {
    script: hashlib.sha1(script.encode()).hexdigest()  # noqa: S324 - Redis names scripts so
    for script in (COUNT, TAKE, APPEND)
}
"""The scripts of ``/e`` by the name EVALSHA gives them (loaded at start, and again if lost)."""


def key_prefix(secret: str, name: str | None = None) -> str:
    """Where a mock's keys are: its name, if given, and a digest of its secret, as a hash tag."""
    salt, rounds = _NAMING
    digest = hashlib.pbkdf2_hmac("sha256", secret.encode(), salt, rounds).hex()[:16]
    return f"verdict-mock:{{{f'{name}.{digest}' if name else digest}}}:"


def _stored(steps: tuple[Step, ...]) -> list[str]:
    """A script as the store keeps it: each step with the bytes it frees (step_costs)."""
    return [
        f"{cost} {encode_step(step)}" for step, cost in zip(steps, step_costs(steps), strict=True)
    ]


class Calls:
    """The store's round trips and failures (metrics), and one log line when it goes down, one
    when it is back: not one per request."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.trips = self.errors = 0
        self.down_since: float | None = None  # time.monotonic() of the first failure
        self.failed_since = 0  # calls failed since
        self._lock = threading.Lock()  # the event loop's and the control API's threads count

    def count(self, problem: StateUnavailable | None) -> None:
        """Count a round trip, failed (``problem``) or answered."""
        with self._lock:
            self.trips += 1
            since, failed = self.down_since, self.failed_since
            if problem is None:
                self.down_since, self.failed_since = None, 0
            else:
                self.errors += 1
                self.failed_since += 1
                self.down_since = time.monotonic() if since is None else since
        if problem is not None and since is None:
            log.error(
                "state store down: %s; its calls answer 503 until it is back",
                str(problem).rstrip("."),
                extra={"fields": {"state": self.label, "code": problem.code}},
            )
        elif problem is None and since is not None:
            log.warning(
                "state store back: %s answers again after %.1f s (%d calls failed meanwhile)",
                self.label,
                time.monotonic() - since,
                failed,
                extra={"fields": {"state": self.label, "failed": failed}},
            )


class RedisStore:
    """The per-call state in Redis (see the module's docstring); one per mock app."""

    def __init__(
        self,
        url: StateURL,
        secret: str,
        journal_size: int,
        ttl: float = DEFAULT_STATE_TTL,
        name: str | None = None,
        connections: RedisStore | None = None,
    ) -> None:
        """``connections``: a store whose connections this one uses (a tenant's, the operator's:
        one set of connections per process, however many tenants)."""
        self.label = url.label
        self._url = str(url)
        self.prefix = key_prefix(secret, name)
        # Keyed once, each digest from a copy: OpenSSL's HMAC keyed anew per request (hmac.digest)
        # cost about 5% of the mock's instructions on a GET /e over Redis (callgrind)
        self._keyed = hashlib.blake2b(key=hashlib.sha256(secret.encode()).digest(), digest_size=16)
        self.keys = Keys(*(self.prefix + field for field in Keys._fields))
        self._steps_prefix = self.prefix + "steps:"
        self._reporter = self.prefix + "reporter"  # not a Key: renewals would stretch its lease
        self._me = uuid.uuid4().hex
        self.ttl_ms = max(1, math.ceil(ttl * 1000))
        self._journal_size = journal_size
        self.capacity = script_store.MAX_SCRIPT_BYTES  # read when made, as ScriptBook's
        # the biggest reply read: the journal and the ring whole (past it: a 503, never the mock)
        self.reply_bytes = (journal_size + UNTRUSTED_KEPT) * ENTRY_BYTES + REPLY_SLACK
        self._owner = connections
        if connections is None:
            self._calls = Calls(self.label)  # counted; its going down and back logged
            with self._guard():  # a cluster is found from the server: it must answer now
                self._clients = Clients(url, self.reply_bytes)
                self._load_scripts()
        else:
            self._calls, self._clients = connections._calls, connections._clients
        self.sync = self._clients.sync
        self._async: AsyncClient | None = None
        self._line: Line | None = None  # the loop's own connection (not on a cluster)
        self._async_loop: asyncio.AbstractEventLoop | None = None
        self._appending: list[tuple[Append, Callable[[Ask | bool | Exception], None]]] = []

    @property
    def cluster(self) -> bool:
        """Whether the state is on a Redis Cluster (from its URL, or as the server said)."""
        return self._clients.cluster

    def __repr__(self) -> str:
        return f"RedisStore({self.label!r})"

    # -- the primitives ------------------------------------------------------------------------
    def _commands(self, trip: Ask | list[Append]) -> list[Command]:
        """The round trip's commands: an Ask's in the order of its fields, or one APPEND."""
        keys = self.keys
        if type(trip) is list:
            bounds = (self._journal_size, UNTRUSTED_KEPT, self.ttl_ms, self._steps_prefix)
            entries: list[str | int] = []
            for append in trip:
                generation = "" if append.generation is None else append.generation
                entries += ("r" if append.entry.untrusted else "j", generation)
                entries.append(encode_entry(append.entry))
            return [("EVALSHA", _SHA[APPEND], len(keys), *keys, *bounds, *entries)]
        ask: Ask = trip  # type: ignore[assignment]
        commands: list[Command] = []
        if ask.clock:
            commands.append(("MGET", keys.clock, keys.generation))
        if ask.key is not None:
            counted = self._digest(ask.key)  # Redis never holds a key itself
            args = (counted, repr(ask.now), repr(ask.window), repr(ask.now_offset), self.ttl_ms)
            commands.append(("EVALSHA", _SHA[COUNT], 2, keys.limits, keys.clock, *args))
        if ask.marked is not None:
            commands.append(("SISMEMBER", keys.expired, ask.marked))
        if (session := ask.take) is not None:
            steps = self._steps_prefix + session
            where = (steps, keys.script_bytes, keys.scripted)
            commands.append(("EVALSHA", _SHA[TAKE], 3, *where, session, self.ttl_ms))
        return commands

    def _digest(self, key: str) -> str:
        """How Redis names an API key (its window's field): a digest keyed with the secret."""
        digest = self._keyed.copy()
        digest.update(key.encode())
        return digest.hexdigest()

    @staticmethod
    def _reply(trip: Ask | list[Append], replies: list[Any]) -> Ask | list[bool]:
        """The round trip answered: an Ask with its answers filled in, or whether each entry
        was kept."""
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        if type(trip) is list:
            (kept,) = replies
            if len(kept) != len(trip):
                raise ValueError(f"{len(kept)} answers to an append of {len(trip)} entries")
            return [bool(each) for each in kept]
        ask: Ask = trip  # type: ignore[assignment]
        each = iter(replies)
        if ask.clock:
            offset, generation = next(each)
            ask.offset, ask.generation = float(offset or 0.0), int(generation or 0)
        if ask.key is not None and (counted := next(each)) is not None:
            start, count = counted
            ask.started, ask.hits = float(start), int(count)
        if ask.marked is not None:
            ask.expired = bool(next(each))
        if ask.take is not None and (taken := next(each)) is not None:
            ask.step = decode_step(taken)
        return ask

    def run(self, ask: Ask) -> Ask:
        answered = self._trip(ask)
        assert answered is ask
        return ask

    def append(self, append: Append) -> bool:
        (kept,) = self._trip([append])  # type: ignore[misc]
        return kept

    def _trip(self, trip: Ask | list[Append]) -> Ask | list[bool]:
        with self._guard():
            try:
                return self._reply(trip, self._send(trip))
            except NoScriptError:  # Redis forgot the scripts (a restart, SCRIPT FLUSH): no
                self._load_scripts()  # script of the round trip ran, the rest only reads
                return self._reply(trip, self._send(trip))

    def _send(self, trip: Ask | list[Append]) -> list[Any]:
        pipe = self.sync.pipeline(transaction=False)
        for command in self._commands(trip):
            pipe.execute_command(*command)
        replies: list[Any] = pipe.execute(raise_on_error=False)
        return replies

    def _load_scripts(self) -> None:
        for script in _SHA:
            self._clients.sync.script_load(script)

    def submit(self, trip: Trip, done: Callable[[Ask | bool | Exception], None]) -> None:
        """One round trip on the running loop, within :data:`TIMEOUT`; ``done`` is told. The
        entries appended in one turn of the loop go to Redis in one call (:data:`APPEND`)."""
        if type(trip) is not Append:
            self._submit(trip, done)  # type: ignore[arg-type]  # an Ask: told the Ask, or why not
            return
        if not self._appending:  # one call a turn, not one an entry: 16% of the CPU of a
            asyncio.get_running_loop().call_soon(self._append_all)  # GET /e (bench_serve --cpu)
        self._appending.append((trip, done))

    def _append_all(self) -> None:
        """Send the entries appended in this turn of the loop, :data:`MOST_APPENDED` a call."""
        appending, self._appending = self._appending, []
        for first in range(0, len(appending), MOST_APPENDED):
            batch = appending[first : first + MOST_APPENDED]
            self._submit([append for append, _ in batch], partial(_tell_each, batch))

    def _submit(
        self, trip: Ask | list[Append], done: Callable[[Answered], None], again: bool = True
    ) -> None:
        commands = self._commands(trip)
        line = self._line_of(asyncio.get_running_loop())
        arrived = partial(self._arrived, trip=trip, done=done, again=again)
        if line is not None and line.usable:  # the usual way: no future, no task
            line.exchange(commands, arrived)
            return
        # connecting first (the line), or redis-py's pipeline (a cluster, Sentinel, TLS)
        send = self._pipeline if line is None else line.send
        task = asyncio.ensure_future(asyncio.wait_for(send(commands), TIMEOUT))
        task.add_done_callback(
            lambda sent: arrived(
                TimeoutError() if sent.cancelled() else sent.exception() or sent.result()
            )
        )

    def _arrived(
        self,
        replies: list[Any] | BaseException,
        trip: Ask | list[Append],
        done: Callable[[Answered], None],
        again: bool,
    ) -> None:
        try:
            if isinstance(replies, BaseException):
                raise replies
            try:
                result: Answered = self._reply(trip, replies)
            except NoScriptError:
                if not again:
                    raise
                self._load_scripts()  # as _trip does (blocking, once), then sent again
                self._submit(trip, done, again=False)
                return
            self._calls.count(None)
        except Exception as exc:  # a failed, late or garbled round trip: a 503 for its requests
            self._calls.count(result := self._unavailable(exc))
        done(result)

    def _line_of(self, loop: asyncio.AbstractEventLoop) -> Line | None:
        """The running loop's line (None: redis-py's pipeline), made on its first round trip."""
        if self._owner is not None:  # the owner's connections
            line = self._owner._line_of(loop)
            self._async = self._owner._async
            return line
        if self._async_loop is not loop:
            self._async = self._clients.make_async()
            if self._line is not None:  # the previous loop's connection: closed, not left open
                self._line.close()
            plain = not (self.cluster or self._clients.sentinel)
            self._line = (
                Line.of(StateURL(self._url).client_url, self.reply_bytes) if plain else None
            )
            self._async_loop = loop
        return self._line

    async def _pipeline(self, commands: list[Command]) -> list[Any]:
        """A round trip through redis-py (a cluster, Sentinel, TLS)."""
        assert self._async is not None
        pipe = self._async.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        return replies

    async def close_async(self) -> None:
        """Close the running loop's connections (before the loop closes)."""
        if self._owner is not None:
            return  # its connections are the owner's, closed with it
        with contextlib.suppress(StateUnavailable), self._guard():  # another process reports
            self.sync.eval(RELEASE, 1, self._reporter, self._me)
        client, self._async, self._async_loop = self._async, None, None
        if self._line is not None:
            self._line.close()
        if client is not None:
            await self._clients.aclose(client)

    def calls(self) -> tuple[int, int]:
        """Round trips to the store so far, and how many of them failed (for the metrics)."""
        return self._calls.trips, self._calls.errors

    def _unavailable(self, exc: BaseException) -> StateUnavailable:
        """A failure of the store as the 503 it gives: whether retrying can help, and the URL
        (which may hold a password) shown as its label."""
        if isinstance(exc, StateUnavailable):
            return exc
        refused = _REFUSALS.get(type(exc))
        if refused is not None:  # Redis answers, and refuses to be written: retrying is no use
            code, reason = refused
            return StateUnavailable(self.label, reason, code=code, retry=False)
        reason = type(exc).__name__ if isinstance(exc, TimeoutError) else str(exc) or repr(exc)
        reason = reason.replace(self._url, self.label)
        for secret in secrets_of(self._url):  # whatever redis-py quoted of it
            reason = reason.replace(secret, "…")
        return StateUnavailable(self.label, reason[:200])

    def writable(self) -> StateUnavailable | None:
        """Whether Redis would run a write now, asked without writing (readiness); the probe
        names a key of the mock's, so a Redis Cluster asks the node that holds them."""
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
        problem = None
        try:
            yield
        except (StateUnavailable, ScriptStoreFull, ClusterURLError):
            raise
        except Exception as exc:  # a garbled reply raises anything
            problem = self._unavailable(exc)
            raise problem from None
        finally:
            self._calls.count(problem)

    # -- the control API (worker threads) -----------------------------------------------------
    def _renewing(self, read: Callable[[list[Any]], T], *commands: Command) -> T:
        """Run ``commands`` and renew every key of the mock, in one transaction (one round
        trip); ``read`` is given their replies, in order."""
        with self._guard():
            pipe = self.sync.pipeline(transaction=True)
            for command in commands:
                pipe.execute_command(*command)
            keys = self.keys
            pipe.execute_command("EVAL", RENEW, len(keys), *keys, self.ttl_ms, self._steps_prefix)
            return read(pipe.execute()[: len(commands)])

    def _load(
        self, scripts: Mapping[str, tuple[Step, ...]], fingerprint: str = "", counted: int = 0
    ) -> None:
        keys = [self.keys.named, self.keys.script_bytes, self.keys.scripted]
        args: list[str | int] = []
        for session_id, steps in scripts.items():
            keys.append(self._steps_prefix + session_id)
            args += [session_id, len(steps), *_stored(steps)]
        with self._guard():
            _done(self.sync.eval(LOAD, len(keys), *keys, fingerprint, counted, self.ttl_ms, *args))

    def offset(self) -> float:
        return self._renewing(lambda replies: float(replies[0] or 0.0), ("GET", self.keys.clock))

    def advance(self, seconds: float) -> None:
        self._renewing(list, ("INCRBYFLOAT", self.keys.clock, repr(seconds)))

    def expire(self, session_id: str) -> None:
        self._renewing(list, ("SADD", self.keys.expired, session_id))

    def next_mint(self) -> int:
        return self._renewing(lambda replies: int(replies[0]), ("INCR", self.keys.minted))

    def load_script(self, session_id: str, steps: tuple[Step, ...]) -> None:
        """The bound's rule (:func:`.scripts.admits`) on what every process holds: the bytes
        are counted first, and given back if they do not fit, so two mints at once never
        pass the bound together."""
        needed, counter = script_bytes(steps), self.keys.script_bytes
        held = self._renewing(lambda replies: int(replies[0]) - needed, ("INCRBY", counter, needed))
        if not admits(held, 0, needed, self.capacity):
            self._renewing(list, ("DECRBY", counter, needed))
            raise store_full(held, needed, self.capacity)
        self._load({session_id: steps}, counted=needed)

    def load_named(self, scripts: Mapping[str, tuple[Step, ...]]) -> None:
        self._load(scripts, _fingerprint(scripts))

    def reset(self, scripts: Mapping[str, tuple[Step, ...]]) -> None:
        keys = self.keys
        kept = (keys.scripted, keys.generation, keys.seq, keys.answering)
        rest = [key for key in keys if key not in kept]
        with self._guard():
            _done(self.sync.eval(CLEAR, 2 + len(rest), *kept[:2], *rest, self._steps_prefix))
        self._load(scripts, _fingerprint(scripts))

    def drift(self, answering: Mapping[str, str]) -> dict[str, str]:
        """The settings that change answers (``answering``, shown as text) where the processes
        sharing this state disagree with this one: what the first of them gave (recorded then,
        kept through resets), by name; empty if none."""
        key, given = self.keys.answering, json.dumps(dict(answering), sort_keys=True)
        first: dict[str, str] = self._renewing(
            lambda replies: json.loads(replies[1]), ("SET", key, given, "NX"), ("GET", key)
        )
        return {
            name: first.get(name, "") for name in answering if first.get(name) != answering[name]
        }

    def reports(self) -> bool:
        """Whether this process exports the shared state's gauges (journal entries, script
        bytes): one process at a time, holding a lease its scrapes renew; when it stops being
        scraped, the next process scraped takes it over."""
        with self._guard():
            return bool(self.sync.eval(REPORTER, 1, self._reporter, self._me, REPORTER_LEASE_MS))

    def script_bytes(self) -> int:
        return self._renewing(lambda replies: int(replies[0] or 0), ("GET", self.keys.script_bytes))

    def entries(self) -> list[JournalEntry]:
        """The journal and the ring, merged in time order (read in one transaction)."""

        def read(replies: list[Any]) -> list[JournalEntry]:
            kept, ring = replies
            untrusted = [decode_entry(text, untrusted=True) for text in ring]
            return list(heapq.merge(map(decode_entry, kept), untrusted, key=attrgetter("seq")))

        keys = self.keys
        return self._renewing(read, ("LRANGE", keys.journal, 0, -1), ("LRANGE", keys.ring, 0, -1))

    def clear_journal(self) -> None:
        keys = self.keys
        self._renewing(list, ("DEL", keys.journal, keys.ring), ("INCR", keys.generation))

    def journal_length(self) -> int:
        keys = self.keys
        return self._renewing(
            lambda replies: sum(map(int, replies)), ("LLEN", keys.journal), ("LLEN", keys.ring)
        )

    def close(self) -> None:
        if self._owner is None:  # else the owner's, closed with it
            self._clients.close()


REPORTER_LEASE_MS: Final = 60_000
"""How long a process reports the shared gauges after its last scrape (then any other may)."""
REPORTER: Final = """
local held = redis.call('GET', KEYS[1])
if held and held ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""
RELEASE: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""

PROBE: Final = "#!lua\nreturn 1"
"""A script that writes nothing but declares no ``no-writes`` flag: Redis refuses to run it as
it would refuse a primitive's writes (OOM when full under ``noeviction``, READONLY
on a read-only replica, MISCONF when it cannot persist), so readiness asks without writing."""

_REFUSALS: Final[dict[type[BaseException], tuple[str, str]]] = {
    OutOfMemoryError: (
        "state_full",
        "Redis is full (used memory over maxmemory, with a noeviction policy)",
    ),
    ReadOnlyError: ("state_read_only", "Redis is a read-only replica"),
}
"""Redis's refusals to be written, each with the 503's code and its reason."""


Answered = Ask | list[bool] | Exception
"""A round trip on the loop answered: an Ask, whether each entry appended was kept, or why not."""


def _tell_each(
    batch: list[tuple[Append, Callable[[Ask | bool | Exception], None]]], answered: Answered
) -> None:
    """Tell each append of one call whether its entry was kept (or why none was)."""
    kept = answered if isinstance(answered, list) else [answered] * len(batch)
    for (_, done), each in zip(batch, kept, strict=True):
        done(each)


def _done(reply: object) -> None:
    """A script's reply of success (1); anything else is a Redis speaking garbage."""
    if reply != 1:
        raise ValueError(f"a script answered {str(reply)[:40]!r}, not 1")


def _fingerprint(scripts: Mapping[str, tuple[Step, ...]]) -> str:
    """Which named scripts were loaded: a process that finds them loaded leaves them be."""
    digest = hashlib.sha256()
    for session_id, steps in sorted(scripts.items()):
        text = "\n".join(_stored(steps))
        digest.update(f"{len(session_id)}:{session_id}{len(text)}:{text}".encode())
    return digest.hexdigest()
