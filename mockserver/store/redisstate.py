"""``RedisStore`` (``--state``): the primitives of :mod:`.primitives` in Redis, so processes on
any number of hosts behave as one mock.

The primitives of a round trip are one short Lua script, so they are atomic across processes.
A mock's keys share one hash tag (one Redis Cluster slot, as a script needs) made of its name and
a slow digest of its secret, and live ``--state-ttl`` seconds past its last use
(docs/servers.md); API keys are kept as keyed BLAKE2b digests. On the event loop a round trip goes
through the loop's own connection (:class:`.redisclients.Line`) or redis-py's async client (a
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
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from operator import attrgetter
from typing import Any, Final, NamedTuple, TypeVar

from redis.exceptions import AuthenticationError, NoScriptError, OutOfMemoryError, ReadOnlyError

from verdict_contract.core.redact import KeyFinder, printable

from ..model import scripts as script_store
from ..model.scripts import ScriptStoreFull, admits, script_bytes, step_costs, store_full
from ..model.sessions import Step
from ..model.steps import decode_step, encode_step
from .backend import DEFAULT_STATE_TTL, StateUnavailable, StateURL, secrets_of
from .journal import UNTRUSTED_KEPT, JournalEntry, decode_entry, encode_entry
from .primitives import Ask, Trip
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


_KEY: Final = {field: index + 1 for index, field in enumerate(Keys._fields)}  # KEYS[i], by name

# The asks of one turn of the loop, in one call (KEYS: the Keys, then the step list of each ask
# that takes a step; ARGV: the TTL, then per ask: the API key's digest to count or '', now, the
# window, the clock offset now was read with, then '=' and the session whose mark is read, and
# '=' and the session whose step is taken, each '' if not asked). Per ask: the clock's offset,
# the journal's generation, the hit counted as {start, count} (false: none, or the clock moved
# since it was read), 1 if the session was expired by hand, the step taken (false: none left).
# A window is "start count" in a hash, the start as the mock sent it (Python's repr of a float
# reads back exactly); a step is "<bytes it frees> <step as JSON>".
ASK: Final = f"""
local clock, generation = unpack(redis.call('MGET', KEYS[1], KEYS[{_KEY["generation"]}]))
local ttl, limits, steps, answers = ARGV[1], KEYS[{_KEY["limits"]}], {len(Keys._fields)}, {{}}
for i = 2, #ARGV, 6 do
  local digest, now, marked, session = ARGV[i], ARGV[i + 1], ARGV[i + 4], ARGV[i + 5]
  local counted, expired, step = false, 0, false
  if digest ~= '' and tonumber(clock or '0') == tonumber(ARGV[i + 3]) then
    local start, count = now, 0
    local held = redis.call('HGET', limits, digest)
    if held then
      local s, c = string.match(held, '^(%S+) (%d+)$')
      if s and tonumber(now) - tonumber(s) < tonumber(ARGV[i + 2]) then
        start, count = s, tonumber(c)  -- within the window: counted in it
      end
    end
    count = count + 1
    if redis.call('HSET', limits, digest, start .. ' ' .. count) == 1 then
      redis.call('PEXPIRE', limits, ttl)  -- a key's first count, made between renewals
    end
    counted = {{start, count}}
  end
  if marked ~= '' then
    expired = redis.call('SISMEMBER', KEYS[{_KEY["expired"]}], string.sub(marked, 2))
  end
  if session ~= '' then
    steps = steps + 1
    local held = redis.call('LPOP', KEYS[steps])
    if held then
      local cost, text = string.match(held, '^(%d+) (.*)$')
      redis.call('DECRBY', KEYS[{_KEY["script_bytes"]}], cost)
      if redis.call('LLEN', KEYS[steps]) == 0 then
        redis.call('SREM', KEYS[{_KEY["scripted"]}], string.sub(session, 2))
      else
        redis.call('PEXPIRE', KEYS[steps], ttl)
      end
      step = text
    end
  end
  answers[#answers + 1] = {{clock or '0', generation or '0', counted, expired, step}}
end
return answers
"""

# Every key of the mock given its TTL again (KEYS: the Keys; ARGV: the TTL, the step lists'
# prefix): a mock in use keeps its state, an idle one's goes away by itself.
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
MOST_BATCHED: Final = 64
"""Asks or entries one call of ASK or APPEND takes at most (a turn with more makes more calls)."""

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


# The clock moved (KEYS: the clock; ARGV: seconds): summed as Python sums floats (INCRBYFLOAT's
# long double would not: 0.1 three times makes 0.3, where this process's memory makes
# 0.30000000000000004), and kept in 17 digits, which read back exactly.
ADVANCE: Final = """
local sum = tonumber(redis.call('GET', KEYS[1]) or '0') + tonumber(ARGV[1])
return redis.call('SET', KEYS[1], string.format('%.17g', sum))
"""


_SHA: Final = {script: hashlib.sha1(script.encode()).hexdigest() for script in (ASK, APPEND)}  # noqa: S324
"""The scripts of ``/e`` by their SHA-1, EVALSHA's name for them (loaded at start or if lost)."""


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


class Call(NamedTuple):
    """One call of a round trip: asks (:data:`ASK`) or entries to append (:data:`APPEND`)."""

    asks: list[Ask]
    appends: list[JournalEntry]


Answered = Sequence[Ask | bool] | Exception
"""A call on the loop answered: its asks, answered, whether each entry was kept, or why not."""


def _answer_each(
    batch: list[tuple[Trip, Callable[[Ask | bool | Exception], None]]], answered: Answered
) -> None:
    """Tell each round trip of one call its answer (its Ask, or its entry kept), or why none."""
    each: Sequence[Ask | bool | Exception]
    each = [answered] * len(batch) if isinstance(answered, Exception) else answered
    for (_, done), answer in zip(batch, each, strict=True):
        done(answer)


class TripHealth:
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
                "state store back: %s answers again after %.1f s (calls failed meanwhile: %d)",
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
            self._calls = TripHealth(self.label)  # counted; its going down and back logged
            with self._guard():  # a cluster is found from the server: it must answer now
                self._clients = Clients(url, self.reply_bytes)
                self._load_scripts()
        else:
            self._calls, self._clients = connections._calls, connections._clients
        self.sync = self._clients.sync
        self._async: AsyncClient | None = None
        self._line: Line | None = None  # the loop's own connection (not on a cluster)
        self._async_loop: asyncio.AbstractEventLoop | None = None
        self._turn: list[tuple[Trip, Callable[[Ask | bool | Exception], None]]] = []

    @property
    def cluster(self) -> bool:
        """Whether the state is on a Redis Cluster (from its URL, or as the server said)."""
        return self._clients.cluster

    def __repr__(self) -> str:
        return f"RedisStore({self.label!r})"

    # -- the primitives ------------------------------------------------------------------------
    def _command(self, call: Call) -> Command:
        """The round trip's one command: a call of :data:`ASK` or of :data:`APPEND`."""
        keys = self.keys
        if call.appends:
            bounds = (self._journal_size, UNTRUSTED_KEPT, self.ttl_ms, self._steps_prefix)
            entries: list[str | int] = []
            for entry in call.appends:
                generation = "" if entry.generation is None else entry.generation
                entries += ("r" if entry.untrusted else "j", generation, encode_entry(entry))
            return ("EVALSHA", _SHA[APPEND], len(keys), *keys, *bounds, *entries)
        steps, args = list[str](), list[str | int]([self.ttl_ms])
        for ask in call.asks:
            if ask.key is None:
                args += ("", "", "", "")
            else:  # Redis never holds a key itself, only its digest
                args += (self._digest(ask.key), repr(ask.now), repr(ask.window))
                args.append(repr(ask.now_offset))
            args.append("" if ask.marked is None else f"={ask.marked}")
            args.append("" if ask.take is None else f"={ask.take}")
            if ask.take is not None:
                steps.append(self._steps_prefix + ask.take)
        return ("EVALSHA", _SHA[ASK], len(keys) + len(steps), *keys, *steps, *args)

    def _digest(self, key: str) -> str:
        """How Redis names an API key (its window's field): a digest keyed with the secret."""
        digest = self._keyed.copy()
        digest.update(key.encode())
        return digest.hexdigest()

    @staticmethod
    def _reply(call: Call, answered: Any) -> Sequence[Ask | bool]:
        """The call answered: each Ask with its answers filled in, or whether each entry was
        kept (an error Redis answered is raised)."""
        if isinstance(answered, Exception):
            raise answered
        if len(answered) != len(asked := call.asks or call.appends):
            raise ValueError(f"{len(answered)} answers to a call of {len(asked)}")
        if call.appends:
            return [bool(each) for each in answered]
        asks = call.asks
        for ask, (offset, generation, counted, expired, step) in zip(asks, answered, strict=True):
            if ask.clock:
                ask.offset, ask.generation = float(offset), int(generation)
            if ask.key is not None and counted is not None:
                start, count = counted
                ask.started, ask.hits = float(start), int(count)
            if ask.marked is not None:
                ask.expired = bool(expired)
            if ask.take is not None and step is not None:
                ask.step = decode_step(step)
        return asks

    def run(self, ask: Ask) -> Ask:
        self._trip(Call([ask], []))
        return ask

    def append(self, entry: JournalEntry) -> bool:
        (kept,) = self._trip(Call([], [entry]))
        return bool(kept)

    def _trip(self, call: Call) -> Sequence[Ask | bool]:
        with self._guard():
            execute = partial(self.sync.execute_command, *self._command(call))
            try:
                return self._reply(call, execute())
            except NoScriptError:  # Redis forgot the scripts (a restart, SCRIPT FLUSH): none
                self._load_scripts()  # of the call ran
                return self._reply(call, execute())

    def _load_scripts(self) -> None:
        for script in _SHA:
            self._clients.sync.script_load(script)

    def submit(self, trip: Trip, done: Callable[[Ask | bool | Exception], None]) -> None:
        """One round trip on the running loop, within :data:`TIMEOUT`; ``done`` is told. The
        asks of one turn of the loop go to Redis in one call (:data:`ASK`), and so do the
        entries appended (:data:`APPEND`)."""
        if not self._turn:  # one call a turn, not one a request: about a third of the CPU of a
            asyncio.get_running_loop().call_soon(self._send_turn)  # GET /e (bench_serve --cpu)
        self._turn.append((trip, done))

    def _send_turn(self) -> None:
        """Send the round trips of this turn of the loop, :data:`MOST_BATCHED` a call."""
        turn, self._turn = self._turn, []
        for kind in (Ask, JournalEntry):
            trips = [each for each in turn if type(each[0]) is kind]
            for first in range(0, len(trips), MOST_BATCHED):
                batch = trips[first : first + MOST_BATCHED]
                each = [trip for trip, _ in batch]
                call = Call(each, []) if kind is Ask else Call([], each)  # type: ignore[arg-type]
                self._submit(call, partial(_answer_each, batch))

    def _submit(self, call: Call, done: Callable[[Answered], None], again: bool = True) -> None:
        command = self._command(call)
        line = self._line_of(asyncio.get_running_loop())
        arrived = partial(self._arrived, call=call, done=done, again=again)
        if line is not None and line.usable:  # the usual way: no future, no task
            line.exchange(command, arrived)
            return
        # connecting first (the line), or redis-py's client (a cluster, Sentinel, TLS)
        send = self._execute if line is None else line.send
        task = asyncio.ensure_future(asyncio.wait_for(send(command), TIMEOUT))
        task.add_done_callback(
            lambda sent: arrived(
                TimeoutError() if sent.cancelled() else sent.exception() or sent.result()
            )
        )

    def _arrived(
        self, reply: Any, call: Call, done: Callable[[Answered], None], again: bool
    ) -> None:
        """The call answered (a reply, an error Redis answered, or why there is none)."""
        try:
            try:
                if isinstance(reply, BaseException):
                    raise reply
                result: Answered = self._reply(call, reply)
            except NoScriptError:
                if not again:
                    raise
                self._load_scripts()  # as _trip does (blocking, once), then sent again
                self._submit(call, done, again=False)
                return
            self._calls.count(None)
        except Exception as exc:  # a failed, late or garbled round trip: a 503 for its requests
            self._calls.count(result := self._unavailable(exc))
        done(result)

    def _line_of(self, loop: asyncio.AbstractEventLoop) -> Line | None:
        """The running loop's line (None: redis-py's client), made on its first round trip."""
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

    async def _execute(self, command: Command) -> Any:
        """A round trip through redis-py (a cluster, Sentinel, TLS), set up first: a cluster's
        client sends its first command to the first node it lists, down or not."""
        assert self._async is not None
        await self._async.initialize()
        return await self._async.execute_command(*command)

    async def close_async(self) -> None:
        """Close the running loop's connections (before the loop closes)."""
        self._turn.clear()  # what its aborted connections left unsent: no one waits for it
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
        if (refused := _REFUSALS.get(type(exc))) is not None:
            code, reason = refused  # Redis answers, and refuses to be written: retrying is no use
            return StateUnavailable(self.label, reason, code=code, retry=False)
        reason = type(exc).__name__ if isinstance(exc, TimeoutError) else str(exc) or repr(exc)
        reason = reason.replace(self._url, self.label)
        # a Redis's own words (an error reply) may quote the password, encoded, or a part of it
        if KeyFinder.of(secret.encode() for secret in secrets_of(self._url)).finds(reason):
            reason = f"{type(exc).__name__} (its text, which holds the password, not shown)"
        return StateUnavailable(self.label, printable(reason[:200]))

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
            reply = self.sync.eval(LOAD, len(keys), *keys, fingerprint, counted, self.ttl_ms, *args)
            _expect_ok(reply)

    def offset(self) -> float:
        return self._renewing(lambda replies: float(replies[0] or 0.0), ("GET", self.keys.clock))

    def advance(self, seconds: float) -> None:
        self._renewing(list, ("EVAL", ADVANCE, 1, self.keys.clock, repr(seconds)))

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
            _expect_ok(self.sync.eval(CLEAR, 2 + len(rest), *kept[:2], *rest, self._steps_prefix))
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

    def scripts_left(self) -> dict[str, tuple[Step, ...]]:
        """Every step list, read after the set of sessions that have one (a step taken in
        between is not listed)."""
        scripted = self._renewing(
            lambda replies: sorted(replies[0]), ("SMEMBERS", self.keys.scripted)
        )
        lists = (("LRANGE", self._steps_prefix + session, 0, -1) for session in scripted)
        held = self._renewing(list, *lists) if scripted else []
        return {
            session: tuple(decode_step(kept.partition(" ")[2]) for kept in steps)
            for session, steps in zip(scripted, held, strict=True)
            if steps
        }

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
    OutOfMemoryError: ("state_full", "Redis is full (used memory over maxmemory, noeviction)"),
    ReadOnlyError: ("state_read_only", "Redis is a read-only replica"),
    AuthenticationError: ("state_auth_refused", "Redis refuses the URL's user or password"),
}
"""Redis's refusals to be written (or used), each with the 503's code and its reason."""


def _expect_ok(reply: object) -> None:
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
