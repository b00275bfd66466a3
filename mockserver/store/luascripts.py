"""The Lua scripts the shared state runs in Redis, and the one encoder of their KEYS and ARGV.

A script's keys and arguments are named here once, as named tuples: Python builds ``KEYS`` and
``ARGV`` from them (:func:`flat`), and each script starts by reading them into locals of the same
names (:func:`preamble`: ``<name>_key`` for a key, ``<name>`` for an argument), so neither side
addresses a slot by its number and the two orders cannot drift apart.

Every script gets every key of its mock (those it does not name follow the named ones in
``KEYS``) and ``ttl_ms``: before it returns it renews them all (:data:`_RENEW`), so a mock in use
keeps its state and an idle one's goes away by itself, in the round trip the request makes;
``/e`` does so when due (:data:`_RENEW_DUE`), at most every second.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from ..model.scripts import ADMITS_LUA


class JournalKeys(NamedTuple):
    """Where entries go: the journal and the ring of untrusted requests, each with its bytes."""

    journal: str
    journal_bytes: str
    ring: str
    ring_bytes: str


class DecideKeys(NamedTuple):
    """Every key of a mock (``/e`` renews them all)."""

    clock: str
    limits: str
    scripts: str
    script_bytes: str
    expired: str
    journal: str
    journal_bytes: str
    ring: str
    ring_bytes: str
    minted: str  # the count of minted sessions (control API only)
    named: str  # the fingerprint of the named scripts last loaded


class DecideArgs(NamedTuple):
    """One request to ``/e`` (a :class:`.backend.SharedCall`), as text for Redis."""

    now: str
    counted: str  # the API key's digest; "" when nothing is counted
    budget: str
    window: str
    session: str
    collected_at: str  # "" for a session with no collection time
    lifetime: str
    local_stands: str  # "1" or ""
    untrusted: str  # "1": the entry goes to the ring (journal.Entry.untrusted)
    entry_head: str
    tail_limited: str
    tail_local: str
    tail_expired: str
    tail_served: str
    max_entries: str
    max_bytes: str
    ring_entries: str
    ttl_ms: str  # every key's time to live, renewed


class AppendArgs(NamedTuple):
    """One entry journaled apart from a decision (a wrong path or method)."""

    untrusted: str
    entry: str
    max_entries: str
    max_bytes: str
    ring_entries: str
    ttl_ms: str


class LoadKeys(NamedTuple):
    scripts: str
    script_bytes: str
    named: str  # the fingerprint of the named scripts last loaded


class LoadArgs(NamedTuple):
    """How to load; ``(session, stored, bytes)`` triples follow (KEYS: the rest of the mock's,
    reset too)."""

    mode: str  # "one" (a mint: bounded), "named" (unless loaded already) or "reset"
    fingerprint: str
    capacity: str
    ttl_ms: str


def preamble(keys: type[tuple[str, ...]], args: type[tuple[str, ...]]) -> str:
    """Lua reading KEYS and ARGV into locals named as the fields of ``keys`` and ``args``."""
    key_names: tuple[str, ...] = getattr(keys, "_fields")  # noqa: B009 - a NamedTuple class
    arg_names: tuple[str, ...] = getattr(args, "_fields")  # noqa: B009
    lines = [f"local {name}_key = KEYS[{i}]" for i, name in enumerate(key_names, 1)]
    lines += [f"local {name} = ARGV[{i}]" for i, name in enumerate(arg_names, 1)]
    return "\n".join(lines) + "\n"


def flat(keys: tuple[str, ...], args: tuple[str, ...], *extra: str) -> tuple[list[str], list[str]]:
    """KEYS and ARGV of a named pair (``extra``: arguments past the named ones)."""
    return list(keys), [*args, *extra]


# Gives every key of the mock (all of KEYS) its time to live again; a key that is not there
# (nothing written yet, or emptied) is left so. Called last: SET clears a key's TTL.
_RENEW: Final = """
local function renew()
  for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ttl_ms) end
end
"""

# Appends an entry to the journal, or to the ring when any web page could have sent it; the
# oldest go past either's count or its bytes (a counter kept beside each list, in UTF-8 bytes).
_JOURNAL: Final = """
local function push(list, counter, entry, most)
  local excess = redis.call('RPUSH', list, entry) - most  -- RPUSH answers the length
  local bytes = redis.call('INCRBY', counter, #entry)
  while excess > 0 or bytes > tonumber(max_bytes) do
    local old = redis.call('LPOP', list)
    if not old then break end
    bytes = redis.call('DECRBY', counter, #old)
    excess = excess - 1
  end
end
local function journal(entry)
  if untrusted == '1' then
    push(ring_key, ring_bytes_key, entry, tonumber(ring_entries))
    return ring_key
  end
  push(journal_key, journal_bytes_key, entry, tonumber(max_entries))
  return journal_key
end
"""

# /e renews every key when the list it journaled to was renewed over a tenth of the TTL (at
# most 1 s) ago, or is new: one PTTL a request instead of a PEXPIRE per key, a third of what
# Redis spent on a request. A key it may create in between (a new API key's count) gets its
# TTL as it is made.
_RENEW_DUE: Final = """
local function renew_due(list)
  local ttl = tonumber(ttl_ms)
  return redis.call('PTTL', list) < ttl - math.min(1000, ttl / 10)
end
"""

DECIDE: Final = (
    preamble(DecideKeys, DecideArgs)
    + _RENEW
    + _JOURNAL
    + _RENEW_DUE
    + """
local at = tonumber(now) + tonumber(redis.call('GET', clock_key) or '0')
local wait = ''
if counted ~= '' then
  local most, span = tonumber(budget), tonumber(window)
  local start, count = at, 0
  local held = redis.call('HGET', limits_key, counted)
  if held then
    local s, c = string.match(held, '^(%S+) (%d+)$')
    start, count = tonumber(s), tonumber(c)
    if at - start >= span then start, count = at, 0 end
  end
  if count >= most then
    wait = string.format('%.17g', start + span - at)
  else
    local counts = string.format('%.17g %d', start, count + 1)
    if redis.call('HSET', limits_key, counted, counts) == 1 then  -- made: its TTL now
      redis.call('PEXPIRE', limits_key, ttl_ms)
    end
  end
end
local tail, step, expired, delay = tail_local, '', 0, 0
if wait ~= '' then
  tail = tail_limited
elseif session ~= '' then
  local own = ''
  local held = redis.call('HGET', scripts_key, session)
  if held then
    local steps = cjson.decode(held)
    local first = table.remove(steps, 1)
    own, step, delay = first[1], first[2], tonumber(first[4]) or 0
    redis.call('DECRBY', script_bytes_key, first[3])
    if #steps == 0 then
      redis.call('HDEL', scripts_key, session)
    else
      redis.call('HSET', scripts_key, session, cjson.encode(steps))
    end
  end
  if own ~= '' then
    tail = own
  elseif step ~= '' or local_stands ~= '1' then
    local marked = redis.call('SISMEMBER', expired_key, session) == 1
    if marked or (collected_at ~= '' and at - tonumber(collected_at) >= tonumber(lifetime)) then
      expired, tail = 1, tail_expired
    else
      tail = tail_served
    end
    if delay > 0 then  -- a delay step: the answer's tail with its delay_ms (entry_tail's order)
      tail = string.gsub(tail, 'null, (%a+)%]$', string.format('%d, %%1]', delay))
    end
  end
end
if renew_due(journal(entry_head .. tail)) then renew() end
return {wait, step, expired}
"""
)

APPEND: Final = (
    preamble(JournalKeys, AppendArgs) + _RENEW + _JOURNAL + "journal(entry)\nrenew()\nreturn 1\n"
)

LOAD: Final = (
    preamble(LoadKeys, LoadArgs)
    + _RENEW
    + f"""
if mode == 'named' and redis.call('GET', named_key) == fingerprint then
  renew()
  return {{1, 0}}
end
if mode == 'reset' then
  for i = 1, #KEYS do redis.call('DEL', KEYS[i]) end
end
if mode ~= 'one' then redis.call('SET', named_key, fingerprint) end
capacity = tonumber(capacity)
local held = tonumber(redis.call('GET', script_bytes_key) or '0')
for i = {len(LoadArgs._fields) + 1}, #ARGV, 3 do
  local session, stored, needed = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local freed = 0
  local old = redis.call('HGET', scripts_key, session)
  if old then
    for _, kept in ipairs(cjson.decode(old)) do freed = freed + kept[3] end
  end
  -- the bound's one rule (scripts.admits): a mint that does not fit is refused, nothing dropped
  if mode == 'one' and not ({ADMITS_LUA}) then
    renew()
    return {{0, held}}
  end
  held = held - freed + needed
  if stored == '' then
    redis.call('HDEL', scripts_key, session)
  else
    redis.call('HSET', scripts_key, session, stored)
  end
end
redis.call('SET', script_bytes_key, held)
renew()
return {{1, held}}
"""
)
