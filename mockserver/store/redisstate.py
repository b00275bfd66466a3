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
import json
import time
from collections.abc import Mapping
from typing import Any, Final

import redis
import redis.asyncio
import redis.asyncio.retry
import redis.retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError

from ..model.sessions import Step
from ..model.steps import encode_step, outcome, scripted
from .backend import (
    Facts,
    SharedCall,
    StateUnavailable,
    StateURL,
    decode_entry,
    entry_tail,
)
from .journal import Entry

TIMEOUT: Final = 1.0
"""Seconds a call to Redis may take (connecting included) before the request gets a 503."""
JOURNAL_BYTES: Final = 16 * 1024 * 1024
"""The shared journal's size in bytes, besides its ``--journal-size`` entries (oldest go)."""
SCRIPT_CAPACITY: Final = 10_000
"""Sessions with a script kept (oldest dropped first), as in memory (scripts.py)."""

_KEYS: Final = ("clock", "limits", "scripts", "expired", "journal", "bytes", "order", "minted")
_NAMED: Final = "named"  # the scenario whose named scripts were last loaded

# KEYS: clock limits scripts expired journal bytes order
# ARGV: now key budget window session collected lifetime local_stands entry
#       tail_limited tail_local tail_expired tail_served max_entries max_bytes
DECIDE: Final = """
local now = tonumber(ARGV[1]) + tonumber(redis.call('GET', KEYS[1]) or '0')
local wait = ''
if ARGV[2] ~= '' then
  local budget, window = tonumber(ARGV[3]), tonumber(ARGV[4])
  local start, count = now, 0
  local held = redis.call('HGET', KEYS[2], ARGV[2])
  if held then
    local s, c = string.match(held, '^(%S+) (%d+)$')
    start, count = tonumber(s), tonumber(c)
    if now - start >= window then start, count = now, 0 end
  end
  if count >= budget then
    wait = string.format('%.17g', start + window - now)
  else
    redis.call('HSET', KEYS[2], ARGV[2], string.format('%.17g %d', start, count + 1))
  end
end
local tail, step, expired = ARGV[11], '', 0
if wait ~= '' then
  tail = ARGV[10]
elseif ARGV[5] ~= '' then
  local own = ''
  local held = redis.call('HGET', KEYS[3], ARGV[5])
  if held then
    local steps = cjson.decode(held)
    local first = table.remove(steps, 1)
    own, step = first[1], first[2]
    if #steps == 0 then
      redis.call('HDEL', KEYS[3], ARGV[5])
      redis.call('ZREM', KEYS[7], ARGV[5])
    else
      redis.call('HSET', KEYS[3], ARGV[5], cjson.encode(steps))
    end
  end
  if own ~= '' then
    tail = own
  elseif step ~= '' or ARGV[8] ~= '1' then
    local marked = redis.call('SISMEMBER', KEYS[4], ARGV[5]) == 1
    if marked or (ARGV[6] ~= '' and now - tonumber(ARGV[6]) >= tonumber(ARGV[7])) then
      expired, tail = 1, ARGV[12]
    else
      tail = ARGV[13]
    end
  end
end
local entry = ARGV[9] .. tail
redis.call('RPUSH', KEYS[5], entry)
local bytes = redis.call('INCRBY', KEYS[6], #entry)
local excess = redis.call('LLEN', KEYS[5]) - tonumber(ARGV[14])
while excess > 0 or bytes > tonumber(ARGV[15]) do
  local old = redis.call('LPOP', KEYS[5])
  if not old then break end
  bytes = redis.call('DECRBY', KEYS[6], #old)
  excess = excess - 1
end
return {wait, step, expired}
"""

# KEYS: scripts order named [the rest: cleared first when ARGV[1] is 'reset']
# ARGV: mode ('one', 'named' or 'reset') fingerprint capacity now, then session/steps pairs
LOAD: Final = """
if ARGV[1] == 'named' and redis.call('GET', KEYS[3]) == ARGV[2] then return 0 end
if ARGV[1] == 'reset' then
  for i = 1, #KEYS do redis.call('DEL', KEYS[i]) end
end
if ARGV[1] ~= 'one' then redis.call('SET', KEYS[3], ARGV[2]) end
for i = 5, #ARGV, 2 do
  if ARGV[i + 1] == '' then
    redis.call('HDEL', KEYS[1], ARGV[i])
    redis.call('ZREM', KEYS[2], ARGV[i])
  else
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    redis.call('ZADD', KEYS[2], tonumber(ARGV[4]), ARGV[i])
  end
end
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[3])
if over > 0 then
  for _, dropped in ipairs(redis.call('ZPOPMIN', KEYS[2], over)) do
    redis.call('HDEL', KEYS[1], dropped)
  end
end
return 1
"""


_DECIDE_SHA: Final = hashlib.sha1(DECIDE.encode()).hexdigest()  # noqa: S324 - Redis names it so


def _stored(steps: tuple[Step, ...]) -> str:
    """A script as the store keeps it: per step, the journal's tail of its answer and itself."""
    if not steps:
        return ""
    items = []
    for step in steps:
        answer = scripted(step, b"")  # status, outcome and fault do not depend on the body
        tail = entry_tail(outcome(answer)) if answer is not None else ""
        items.append([tail, encode_step(step)])
    return json.dumps(items, separators=(",", ":"))


def _number(value: float | None) -> str:
    return "" if value is None else repr(float(value))


class RedisBackend:
    """The per-call state in Redis (see the module's docstring); one per mock app."""

    def __init__(self, url: StateURL, secret: str, journal_size: int) -> None:
        self.label = url.label
        self._url = str(url)
        digest = hashlib.sha256(f"verdict-mock:{secret}".encode()).hexdigest()[:20]
        self.prefix = f"verdict-mock:{{{digest}}}:"
        self.keys = [self.prefix + name for name in _KEYS]
        self._named_key = self.prefix + _NAMED
        self._limits = (journal_size, JOURNAL_BYTES)
        options: dict[str, Any] = {
            "socket_timeout": TIMEOUT,
            "socket_connect_timeout": TIMEOUT,
            "decode_responses": True,
        }
        self.sync = redis.Redis.from_url(
            self._url, retry=redis.retry.Retry(NoBackoff(), 0), **options
        )
        self._options = options
        self._decide = self.sync.register_script(DECIDE)
        self._load = self.sync.register_script(LOAD)
        self._async: redis.asyncio.Redis | None = None
        self._async_loop: asyncio.AbstractEventLoop | None = None
        self._batch: list[tuple[SharedCall, asyncio.Future[Facts]]] = []
        self._sending: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return f"RedisBackend({self.label!r})"

    # -- the hot path -------------------------------------------------------------------------
    def _args(self, call: SharedCall) -> list[str]:
        return [
            repr(call.now),
            call.key,
            str(call.budget),
            repr(call.window),
            call.session,
            _number(call.collected_at),
            repr(call.lifetime),
            "1" if call.local_stands else "",
            call.entry,
            *call.tails,
            str(self._limits[0]),
            str(self._limits[1]),
        ]

    @staticmethod
    def _facts(reply: list[Any]) -> Facts:
        wait, step, expired = reply
        return Facts(float(wait) if wait else None, step or None, bool(expired))

    def decide(self, call: SharedCall) -> Facts:
        try:
            reply = self._decide(keys=self.keys[:7], args=self._args(call))
        except redis.RedisError as exc:
            raise self._unavailable(exc) from None
        return self._facts(reply)

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
        try:
            async with asyncio.timeout(TIMEOUT):
                replies = await self._pipeline(batch)
                lost = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
                if lost:  # Redis restarted and forgot the script: those calls did not run
                    assert self._async is not None
                    await self._async.script_load(DECIDE)
                    again = await self._pipeline([batch[i] for i in lost])
                    for index, reply in zip(lost, again, strict=True):
                        replies[index] = reply
        except (redis.RedisError, OSError, TimeoutError) as exc:
            failed = self._unavailable(exc)
            for _, future in batch:
                if not future.done():
                    future.set_exception(failed)
            return
        for (_, future), reply in zip(batch, replies, strict=True):
            if future.done():  # cancelled: the server is stopping
                continue
            if isinstance(reply, Exception):
                future.set_exception(self._unavailable(reply))
            else:
                future.set_result(self._facts(reply))

    async def _pipeline(self, batch: list[tuple[SharedCall, asyncio.Future[Facts]]]) -> list[Any]:
        assert self._async is not None
        pipe = self._async.pipeline(transaction=False)
        for call, _ in batch:
            pipe.evalsha(_DECIDE_SHA, 7, *self.keys[:7], *self._args(call))
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        return replies

    async def close_async(self) -> None:
        client, self._async, self._async_loop = self._async, None, None
        if client is not None:
            with contextlib.suppress(redis.RedisError, OSError):
                await client.aclose()

    def _unavailable(self, exc: BaseException) -> StateUnavailable:
        reason = type(exc).__name__ if isinstance(exc, TimeoutError) else str(exc) or repr(exc)
        return StateUnavailable(self.label, reason.replace(self._url, self.label)[:200])

    # -- the control API (worker threads) -----------------------------------------------------
    def _call(self, name: str, *args: Any) -> Any:
        try:
            return getattr(self.sync, name)(*args)
        except redis.RedisError as exc:
            raise self._unavailable(exc) from None

    def offset(self) -> float:
        return float(self._call("get", self.keys[0]) or 0.0)

    def advance(self, seconds: float) -> None:
        self._call("incrbyfloat", self.keys[0], seconds)

    def expire(self, session_id: str) -> None:
        self._call("sadd", self.keys[3], session_id)

    def marked_expired(self, session_id: str) -> bool:
        return bool(self._call("sismember", self.keys[3], session_id))

    def next_mint(self) -> int:
        return int(self._call("incr", self.keys[7]))

    def _run_load(self, mode: str, fingerprint: str, scripts: Mapping[str, str]) -> None:
        args: list[str] = [mode, fingerprint, str(SCRIPT_CAPACITY), repr(time.time())]
        for session_id, stored in scripts.items():
            args += [session_id, stored]
        keys = [self.keys[2], self.keys[6], self._named_key]
        if mode == "reset":
            keys += [k for k in self.keys if k not in keys]
        try:
            self._load(keys=keys, args=args)
        except redis.RedisError as exc:
            raise self._unavailable(exc) from None

    def load_script(self, session_id: str, steps: tuple[Step, ...]) -> None:
        self._run_load("one", "", {session_id: _stored(steps)})

    def load_named(self, scripts: Mapping[str, tuple[Step, ...]]) -> None:
        stored = {sid: _stored(steps) for sid, steps in scripts.items()}
        self._run_load("named", _fingerprint(stored), stored)

    def reset(self, scripts: Mapping[str, tuple[Step, ...]]) -> None:
        stored = {sid: _stored(steps) for sid, steps in scripts.items()}
        self._run_load("reset", _fingerprint(stored), stored)

    def entries(self) -> list[Entry]:
        return [decode_entry(text) for text in self._call("lrange", self.keys[4], 0, -1)]

    def clear_journal(self) -> None:
        try:
            self.sync.delete(self.keys[4], self.keys[5])  # one command: atomic
        except redis.RedisError as exc:
            raise self._unavailable(exc) from None

    def journal_length(self) -> int:
        return int(self._call("llen", self.keys[4]))

    def close(self) -> None:
        self.sync.close()


def _fingerprint(stored: Mapping[str, str]) -> str:
    """Which named scripts were loaded: a process that finds them loaded leaves them be."""
    digest = hashlib.sha256()
    for session_id, text in sorted(stored.items()):
        digest.update(f"{len(session_id)}:{session_id}{len(text)}:{text}".encode())
    return digest.hexdigest()
