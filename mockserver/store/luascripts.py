"""The Lua scripts the shared state runs in Redis, and the one encoder of their KEYS and ARGV.

A script's keys and arguments are named here once, as named tuples: Python builds ``KEYS`` and
``ARGV`` from them (:func:`flat`), and each script starts by reading them into locals of the same
names (:func:`preamble`: ``<name>_key`` for a key, ``<name>`` for an argument), so neither side
addresses a slot by its number and the two orders cannot drift apart. ``/e`` goes in batches:
one run of :data:`DECIDE` decides every request of a round trip, the batch's shared arguments
(:class:`BatchArgs`) first, then one group of :class:`DecideArgs` per request (:func:`group`).

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


class BatchArgs(NamedTuple):
    """What every request of one ``/e`` batch shares (its :class:`.backend.SharedRules`), the
    store's bounds, and how many kinds of request follow: a :class:`KindArgs` group per kind,
    then a :class:`DecideArgs` group per request."""

    budget: str
    window: str
    lifetime: str
    tail_limited: str
    expired_before_delay: str  # the expired answer's tail around its delay_ms (TailAround)
    expired_after_delay: str
    max_entries: str
    max_bytes: str
    ring_entries: str
    ttl_ms: str  # every key's time to live, renewed
    kinds_count: str  # the KindArgs groups that follow


class KindArgs(NamedTuple):
    """A kind of request to ``/e`` (a :class:`.backend.CallKind`: all of a request but its time,
    as text for Redis); the requests of a batch that are alike send it once."""

    counted: str  # the API key's digest; "" when nothing is counted
    session: str
    collected_at: str  # "" for a session with no collection time
    local_answer_stands: str  # "1" or ""
    untrusted: str  # "1": the entry goes to the ring (journal.JournalEntry.untrusted)
    entry_past_time: str  # the journal entry past its time, up to its answer (head_past_time)
    tail_local: str
    served_before_delay: str  # the served answer's tail around its delay_ms (TailAround)
    served_after_delay: str


class DecideArgs(NamedTuple):
    """One request to ``/e`` (a :class:`.backend.SharedCall`), as text for Redis."""

    now: str
    kind: str  # its KindArgs group, counted from 1


class AppendArgs(NamedTuple):
    """One entry journaled apart from a decision (a wrong path or method)."""

    untrusted: str
    now: str  # the entry's time
    fields: str  # the entry's fields past its time (journal.head_past_time, then its tail)
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


def group(args: type[tuple[str, ...]], base: str) -> str:
    """Lua reading one group of ARGV, the slots after ``base``, into locals named as the
    fields of ``args`` (a batch: one group per request)."""
    names: tuple[str, ...] = getattr(args, "_fields")  # noqa: B009 - a NamedTuple class
    slots = ", ".join(f"ARGV[{base} + {i}]" for i in range(1, len(names) + 1))
    return f"local {', '.join(names)} = {slots}\n"


def groups(args: type[tuple[str, ...]], start: str, stop: str, body: str) -> str:
    """Lua running ``body`` for each group of ARGV from slot ``start + 1`` to ``stop``, the
    group's slots read into locals named as the fields of ``args``."""
    width = len(getattr(args, "_fields"))  # noqa: B009 - a NamedTuple class
    return f"for base = {start}, {stop} - 1, {width} do\n{group(args, 'base')}{body}end\n"


def unpacked(args: type[tuple[str, ...]], table: str) -> str:
    """Lua reading the array ``table``, made of the locals of a group of ``args`` in their
    order, back into locals of the same names."""
    names: tuple[str, ...] = getattr(args, "_fields")  # noqa: B009 - a NamedTuple class
    return f"local {', '.join(names)} = unpack({table})\n"


# A batch's groups: the kinds of request (each read into an array of its fields, in
# KindArgs's order), then the requests.
_KINDS_FROM: Final = str(len(BatchArgs._fields))
_EACH_REQUEST: Final = (
    "local kinds = {}\n"
    + f"local requests_from = {_KINDS_FROM} + tonumber(kinds_count) * {len(KindArgs._fields)}\n"
    + groups(
        KindArgs,
        _KINDS_FROM,
        "requests_from",
        "kinds[#kinds + 1] = {" + ", ".join(KindArgs._fields) + "}\n",
    )
)


def for_each_request(body: str) -> str:
    """Lua running ``body`` for each request of a batch of :data:`DECIDE`, the fields of its
    group and of its kind read into locals named as theirs."""
    each = unpacked(KindArgs, "kinds[tonumber(kind)]") + body
    return _EACH_REQUEST + groups(DecideArgs, "requests_from", "#ARGV", each)


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

# A journal entry: its time (a float as Python's repr writes it, which JSON reads), then the
# rest of its fields, as JSON (journal.decode_entry reads it back).
_ENTRY_AT: Final = """
local function entry_at(now, fields, tail)
  return '[' .. now .. ', ' .. fields .. tail
end
"""

# Appends entries, in order, to the journal, or to the ring those any web page could have sent;
# the oldest go past either's count or its bytes (a counter kept beside each list, in UTF-8
# bytes). A batch's entries go in one RPUSH, and those past the count in one LTRIM.
_JOURNAL: Final = """
local function push(list, counter, entries, most)
  local length = redis.call('RPUSH', list, unpack(entries))
  local size = 0
  for _, entry in ipairs(entries) do size = size + #entry end
  local bytes = redis.call('INCRBY', counter, size)
  if length > most then
    local gone = 0
    for _, old in ipairs(redis.call('LRANGE', list, 0, length - most - 1)) do
      gone = gone + #old
    end
    redis.call('LTRIM', list, length - most, -1)
    bytes = redis.call('DECRBY', counter, gone)
  end
  while bytes > tonumber(max_bytes) do
    local old = redis.call('LPOP', list)
    if not old then break end
    bytes = redis.call('DECRBY', counter, #old)
  end
end
local function journal(kept, ringed)  -- the lists written to
  local written = {}
  if #kept > 0 then
    push(journal_key, journal_bytes_key, kept, tonumber(max_entries))
    written[#written + 1] = journal_key
  end
  if #ringed > 0 then
    push(ring_key, ring_bytes_key, ringed, tonumber(ring_entries))
    written[#written + 1] = ring_key
  end
  return written
end
"""

# /e renews every key when a list it journaled to was renewed over a tenth of the TTL (at
# most 1 s) ago, or is new: one PTTL a batch instead of a PEXPIRE per key. A key it may create
# in between (a new API key's count) gets its TTL as it is made.
_RENEW_DUE: Final = """
local function renew_due(list)
  local ttl = tonumber(ttl_ms)
  return redis.call('PTTL', list) < ttl - math.min(1000, ttl / 10)
end
"""

# One request of a batch, its group read into locals: its key counted in its fixed window, its
# session's next step taken, its expiry checked against the shared clock, its entry kept for
# the journal and its facts for the reply.
_DECIDE_ONE: Final = """
local at = tonumber(now) + offset
local wait = ''
if counted ~= '' then
  local held = counts[counted]
  if not held then
    held = {at, 0, false}
    local stored = redis.call('HGET', limits_key, counted)
    if stored then
      local s, c = string.match(stored, '^(%S+) (%d+)$')
      held = {tonumber(s), tonumber(c), false}
    end
    counts[counted] = held
    counted_keys[#counted_keys + 1] = counted
  end
  if at - held[1] >= span then held[1], held[2] = at, 0 end
  if held[2] >= most then
    wait = string.format('%.17g', held[1] + span - at)
  else
    held[2], held[3] = held[2] + 1, true
  end
end
local tail, step, expired, delay = tail_local, '', 0, 0
if wait ~= '' then
  tail = tail_limited
elseif session ~= '' then
  local own = ''
  local steps = scripts[session]
  if steps == nil then
    local stored = redis.call('HGET', scripts_key, session)
    steps = stored and cjson.decode(stored) or false
    scripts[session] = steps
  end
  if steps and #steps > 0 then
    local first = table.remove(steps, 1)
    own, step, delay = first[1], first[2], tonumber(first[4]) or 0
    freed = freed + first[3]
    if not taken[session] then  -- written back once, at the end
      taken[session] = true
      taken_from[#taken_from + 1] = session
    end
  end
  if own ~= '' then
    tail = own
  elseif step ~= '' or local_answer_stands ~= '1' then
    local marked = marks[session]
    if marked == nil then
      marked = redis.call('SISMEMBER', expired_key, session) == 1
      marks[session] = marked
    end
    local before, after = served_before_delay, served_after_delay
    if marked or (collected_at ~= '' and at - tonumber(collected_at) >= life) then
      expired, before, after = 1, expired_before_delay, expired_after_delay
    end
    -- a delay step: the answer's tail with its delay_ms
    tail = before .. (delay > 0 and string.format('%d', delay) or 'null') .. after
  end
end
local entry = entry_at(now, entry_past_time, tail)
if untrusted == '1' then ringed[#ringed + 1] = entry else kept[#kept + 1] = entry end
replies[#replies + 1] = wait
replies[#replies + 1] = step
replies[#replies + 1] = expired
"""

# A batch of requests to /e, decided in their order as one request at a time would be: what the
# batch reads (the clock, an API key's count, a session's steps and expiry mark) is read once and
# kept in a table, what it changes is written once at the end, its entries pushed at once; the
# reply: wait, step, expired, per request.
DECIDE: Final = (
    preamble(DecideKeys, BatchArgs)
    + _RENEW
    + _ENTRY_AT
    + _JOURNAL
    + _RENEW_DUE
    + f"""
local offset = tonumber(redis.call('GET', clock_key) or '0')
local most, span, life = tonumber(budget), tonumber(window), tonumber(lifetime)
local counts, counted_keys = {{}}, {{}}  -- per API key: {{start, count, changed}}
local scripts, taken, taken_from = {{}}, {{}}, {{}}  -- per session: its steps left (false: none)
local marks = {{}}  -- per session: expired by hand
local freed = 0
local kept, ringed, replies = {{}}, {{}}, {{}}
{for_each_request(_DECIDE_ONE)}local counted_now = {{}}
for _, key in ipairs(counted_keys) do
  local held = counts[key]
  if held[3] then
    counted_now[#counted_now + 1] = key
    counted_now[#counted_now + 1] = string.format('%.17g %d', held[1], held[2])
  end
end
if #counted_now > 0 and redis.call('HSET', limits_key, unpack(counted_now)) > 0 then
  redis.call('PEXPIRE', limits_key, ttl_ms)  -- a count made: its TTL now
end
for _, session in ipairs(taken_from) do
  local steps = scripts[session]
  if #steps == 0 then
    redis.call('HDEL', scripts_key, session)
  else
    redis.call('HSET', scripts_key, session, cjson.encode(steps))
  end
end
if freed ~= 0 then redis.call('DECRBY', script_bytes_key, freed) end
for _, list in ipairs(journal(kept, ringed)) do
  if renew_due(list) then
    renew()
    break
  end
end
return replies
"""
)

APPEND: Final = (
    preamble(JournalKeys, AppendArgs)
    + _RENEW
    + _ENTRY_AT
    + _JOURNAL
    + """
local entry = entry_at(now, fields, '')
if untrusted == '1' then journal({}, {entry}) else journal({entry}, {}) end
renew()
return 1
"""
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
