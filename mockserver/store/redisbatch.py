"""``GET /e`` on Redis in batches: the requests of one round trip decided by one run of a script.

On the event loop, requests to ``/e`` wait in one list while a round trip is out; the next
round trip takes them all, as one run of :data:`.luascripts.DECIDE` (one EVALSHA: Redis parses
the command, finds the script and enters Lua once for the batch, which reads the clock, renews
the keys and pushes the journal once; :data:`MAX_BATCH` requests at most a run, more go as
several in the same round trip). The requests of a run that are alike (a load test's) send what
they share once, each its time and the number of its kind. One round trip at a time, so the
batching is here alone: the connection under it (:mod:`.redisline`, or redis-py's pipeline)
only carries it.

A request waits at most :data:`.redisclients.TIMEOUT` from the moment its batch began to gather
(connecting included): a round trip that fails or times out fails its batch and every request
waiting behind it, none of which is sent (each would be counted, take a step and be journaled
while answered 503).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable
from functools import lru_cache
from typing import Any, Final

from redis.exceptions import NoScriptError

from .availability import Calls
from .backend import CallKind, Facts, SharedCall, SharedRules, StateUnavailable
from .luascripts import DECIDE, BatchArgs, DecideArgs, DecideKeys, KindArgs
from .redisline import Command

MAX_BATCH: Final = 256
"""Requests decided by one run of the script at most (its arguments, its RPUSH)."""
DECIDE_SHA: Final = hashlib.sha1(DECIDE.encode()).hexdigest()  # noqa: S324 - Redis names it so
_FACTS: Final = 3
"""Replies per request: seconds to wait (or ""), the step taken (or ""), expired (1 or 0)."""

log = logging.getLogger("mockserver.state")

Done = Callable[[Facts | StateUnavailable], None]
"""Told a request's decision, or why there is none (a 503)."""
Send = Callable[[list[Command]], Awaitable[list[Any]]]
"""One round trip: the commands' replies in order (an error reply as an exception, not raised)."""


def _number(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def kind_args(kind: CallKind) -> KindArgs:
    """A kind of request to ``/e`` as :data:`.luascripts.DECIDE` reads it."""
    served = kind.served_tail
    return KindArgs(  # by position: 0.8 µs, 1.3 by keyword (test_redisbatch.py)
        kind.key,  # counted
        kind.session,  # session
        _number(kind.collected_at),  # collected_at
        "1" if kind.local_answer_stands else "",  # local_answer_stands
        "1" if kind.untrusted else "",  # untrusted
        kind.entry,  # entry_past_time
        kind.local_tail,  # tail_local
        served.before_delay,  # served_before_delay
        served.after_delay,  # served_after_delay
    )


@lru_cache(maxsize=256)  # a process's rules are one object (explain.py), its bounds fixed
def batch_args(
    rules: SharedRules, bounds: tuple[str, str, str, str], kinds_count: int
) -> BatchArgs:
    """What a batch of requests sharing ``rules`` shares, ``bounds`` (the journal's entries
    and bytes, the ring's entries, the keys' TTL in ms), and how many kinds of request it has."""
    max_entries, max_bytes, ring_entries, ttl_ms = bounds
    return BatchArgs(
        budget=str(rules.budget),
        window=repr(rules.window),
        lifetime=repr(rules.lifetime),
        tail_limited=rules.limited_tail,
        expired_before_delay=rules.expired_tail.before_delay,
        expired_after_delay=rules.expired_tail.after_delay,
        max_entries=max_entries,
        max_bytes=max_bytes,
        ring_entries=ring_entries,
        ttl_ms=ttl_ms,
        kinds_count=str(kinds_count),
    )


def runs(calls: list[SharedCall]) -> list[list[SharedCall]]:
    """``calls`` in runs of the script: in order, each sharing its rules, MAX_BATCH at most."""
    made: list[list[SharedCall]] = []
    for call in calls:
        if made and call.rules is made[-1][0].rules and len(made[-1]) < MAX_BATCH:
            made[-1].append(call)
        else:
            made.append([call])
    return made


def decide_argv(bounds: tuple[str, str, str, str], run: list[SharedCall]) -> list[str]:
    """The script's ARGV for ``run``: what it shares, a group per kind of request (requests
    alike send theirs once: a load test's batch sends one), then a group per request."""
    numbers: dict[CallKind, str] = {}
    kinds: list[str] = []
    requests: list[str] = []
    for call in run:
        number = numbers.get(call.kind)
        if number is None:
            number = numbers[call.kind] = str(len(numbers) + 1)
            kinds += kind_args(call.kind)
        requests += DecideArgs(repr(call.now), number)
    return [*batch_args(run[0].rules, bounds, len(numbers)), *kinds, *requests]


def decide_command(
    keys: DecideKeys, bounds: tuple[str, str, str, str], run: list[SharedCall]
) -> Command:
    """One run of the script (by its SHA1) for ``run``."""
    return ("EVALSHA", DECIDE_SHA, len(keys), *keys, *decide_argv(bounds, run))


def read_facts(reply: Any, count: int) -> list[Facts]:
    """A run's reply, ``count`` requests' facts (ValueError if it has another shape)."""
    if not isinstance(reply, list) or len(reply) != count * _FACTS:
        raise ValueError(f"a reply of {_FACTS} x {count} values expected, not {reply!r:.80}")
    it = iter(reply)
    return [
        Facts(float(wait) if wait else None, step or None, bool(expired))
        for wait, step, expired in zip(it, it, it, strict=True)
    ]


class Batches:
    """One event loop's requests to ``/e`` (see the module's docstring)."""

    def __init__(
        self,
        keys: DecideKeys,
        bounds: tuple[str, str, str, str],
        send: Send,
        calls: Calls,
        unavailable: Callable[[BaseException], StateUnavailable],
        timeout: float,
    ) -> None:
        self._keys, self._bounds, self._send = keys, bounds, send
        self._calls, self._unavailable, self._timeout = calls, unavailable, timeout
        self._waiting: list[tuple[SharedCall, Done]] = []
        self._since = 0.0  # loop time when the first of those waiting came
        self._flushing: asyncio.Task[None] | None = None

    def submit(self, call: SharedCall, done: Done) -> None:
        """Decide ``call`` in the next round trip; ``done`` is told (on the loop) what came."""
        if not self._waiting:
            self._since = asyncio.get_running_loop().time()
        self._waiting.append((call, done))
        if self._flushing is None:
            self._flushing = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        """Round trips, one at a time, until no request waits."""
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                deadline = self._since + self._timeout
                failed = await self._trip(batch, deadline)
                if failed is not None:  # the line failed: so do those waiting behind it
                    batch, self._waiting = self._waiting, []
                    _tell(batch, failed)
                # One turn of the loop first: the requests whose bytes are in already join the
                # next round trip (bench_serve's load, paired runs: 28.1 -> 25.5 µs a request,
                # the mock's and Redis's CPU; the same latency).
                await asyncio.sleep(0)
        finally:
            self._flushing = None

    async def _trip(
        self, batch: list[tuple[SharedCall, Done]], deadline: float
    ) -> StateUnavailable | None:
        """One round trip for ``batch``; why it failed, if it did (an error reply is no
        failure of the round trip: its requests alone are told)."""
        if asyncio.get_running_loop().time() >= deadline:  # waited too long: not sent
            _tell(batch, self._failed(TimeoutError()))
            return None
        groups = runs([call for call, _ in batch])
        commands = [decide_command(self._keys, self._bounds, run) for run in groups]
        self._calls.trips += 1
        try:
            async with asyncio.timeout_at(deadline):
                replies = await self._send(commands)
                lost = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
                if lost:  # Redis restarted and forgot the script: those runs did not happen
                    self._calls.trips += 1
                    again = await self._send([("EVAL", DECIDE, *commands[i][2:]) for i in lost])
                    for index, reply in zip(lost, again, strict=True):
                        replies[index] = reply
        except Exception as exc:  # whatever a broken store causes: a 503
            _tell(batch, failed := self._failed(exc))
            return failed
        except BaseException:  # cancelled: the mock is stopping
            _tell(batch, self._stopping())
            raise
        start = 0
        for run, reply in zip(groups, replies, strict=True):
            told = batch[start : start + len(run)]
            start += len(run)
            try:
                if isinstance(reply, Exception):
                    raise reply
                facts = read_facts(reply, len(run))
            except Exception as exc:  # a reply of the wrong shape, or refused (full): a 503
                _tell(told, self._failed(exc))
                continue
            self._calls.answered()
            for (_, done), fact in zip(told, facts, strict=True):
                _told(done, fact)
        return None

    def _failed(self, exc: BaseException) -> StateUnavailable:
        self._calls.errors += 1
        failed = self._unavailable(exc)
        self._calls.failed(failed)
        return failed

    async def aclose(self) -> None:
        """Stop: a round trip under way is abandoned, its requests and those waiting told."""
        flushing, self._flushing = self._flushing, None
        if flushing is not None and not flushing.done():
            flushing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flushing
        waiting, self._waiting = self._waiting, []
        _tell(waiting, self._stopping())

    def _stopping(self) -> StateUnavailable:
        return self._unavailable(ConnectionError("the mock is stopping"))


def _tell(batch: list[tuple[SharedCall, Done]], failed: StateUnavailable) -> None:
    for _, done in batch:
        _told(done, failed)


def _told(done: Done, facts: Facts | StateUnavailable) -> None:
    """Tell one request; a caller that fails does not keep the others untold."""
    try:
        done(facts)
    except Exception:
        log.exception("a request to /e failed on its shared state's answer")
