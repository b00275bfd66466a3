"""``GET /e`` on Redis in batches (store/redisbatch.py): one round trip at a time, the requests
that come meanwhile in the next, as one run of the script; a failed round trip fails those
waiting behind it, unsent.

A stand-in for the connection records what would be sent; no Redis is needed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from verdict_contract.mockserver.store.availability import Calls
from verdict_contract.mockserver.store.backend import (
    CallKind,
    Facts,
    SharedCall,
    SharedRules,
    StateUnavailable,
)
from verdict_contract.mockserver.store.journal import TailAround
from verdict_contract.mockserver.store.luascripts import (
    BatchArgs,
    DecideArgs,
    DecideKeys,
    KindArgs,
)
from verdict_contract.mockserver.store.redisbatch import (
    MAX_BATCH,
    Batches,
    decide_argv,
    kind_args,
    runs,
)
from verdict_contract.mockserver.store.redisline import Command

KEYS = DecideKeys(*(f"{{t}}:{field}" for field in DecideKeys._fields))
BOUNDS = ("1000", "1000000", "100", "60000")
RULES = SharedRules(10, 60.0, 3600.0, "limited]", TailAround("expired, ", "]"))


def call(session: str, rules: SharedRules = RULES) -> SharedCall:
    tail = TailAround("served, ", "]")
    return SharedCall(rules, 1.0, CallKind("k", session, None, False, False, "[", "", tail))


def batches(send: Any, timeout: float = 5.0) -> Batches:
    def unavailable(exc: BaseException) -> StateUnavailable:
        return StateUnavailable("test", repr(exc))

    return Batches(KEYS, BOUNDS, send, Calls("test"), unavailable, timeout)


def sessions(command: Command) -> list[str]:
    """The session of each request a command decides, in order."""
    args = [str(value) for value in command[3 + len(KEYS) :]]
    shared = BatchArgs(*args[: len(BatchArgs._fields)])
    width, count = len(KindArgs._fields), int(shared.kinds_count)
    start = len(BatchArgs._fields)
    kinds = [KindArgs(*args[start + i * width : start + (i + 1) * width]) for i in range(count)]
    rest = args[start + count * width :]
    step = len(DecideArgs._fields)
    requests = [DecideArgs(*rest[i : i + step]) for i in range(0, len(rest), step)]
    return [kinds[int(request.kind) - 1].session for request in requests]


def test_requests_that_come_during_a_round_trip_go_together_in_the_next() -> None:
    sent: list[list[Command]] = []
    release = asyncio.Event()

    async def send(commands: list[Command]) -> list[Any]:
        sent.append(commands)
        if len(sent) == 1:
            await release.wait()  # the first round trip is held: the next requests wait
        return [["", "", 0] * len(sessions(command)) for command in commands]

    async def run() -> list[Facts | StateUnavailable]:
        told: list[Facts | StateUnavailable] = []
        line = batches(send)
        line.submit(call("a"), told.append)
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # the first round trip is out
        for name in ("b", "c", "d"):
            line.submit(call(name), told.append)
        release.set()
        while len(told) < 4:
            await asyncio.sleep(0.01)
        return told

    told = asyncio.run(run())
    assert [[sessions(command) for command in commands] for commands in sent] == [
        [["a"]],
        [["b", "c", "d"]],  # one run of the script for the three
    ]
    assert told == [Facts(None, None, False)] * 4


def test_a_failed_round_trip_fails_the_requests_waiting_behind_it_unsent() -> None:
    """Sent after it, each would be counted, take a step and be journaled by a Redis that
    comes back, while its client got a 503."""
    sent: list[list[Command]] = []

    async def send(commands: list[Command]) -> list[Any]:
        sent.append(commands)
        await asyncio.sleep(30)  # a frozen Redis: the timeout ends it
        return []

    async def run() -> list[Facts | StateUnavailable]:
        told: list[Facts | StateUnavailable] = []
        line = batches(send, timeout=0.2)
        line.submit(call("a"), told.append)
        await asyncio.sleep(0.05)  # the first round trip is out
        line.submit(call("b"), told.append)
        while len(told) < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        return told

    told = asyncio.run(run())
    assert len(sent) == 1
    assert [sessions(command) for command in sent[0]] == [["a"]]
    assert all(isinstance(facts, StateUnavailable) for facts in told)


def test_a_run_shares_its_rules_and_is_bounded() -> None:
    other = SharedRules(5, 60.0, 3600.0, "limited]", TailAround("expired, ", "]"))
    calls = [call(str(i)) for i in range(MAX_BATCH + 2)] + [call("x", other), call("y")]
    made = runs(calls)
    assert [len(run) for run in made] == [MAX_BATCH, 2, 1, 1]
    assert [run[0].rules for run in made] == [RULES, RULES, other, RULES]


def test_each_field_of_a_kind_goes_to_its_argument() -> None:
    """kind_args fills KindArgs by position: each field of the kind, a value of its own, must
    land in the argument of its name."""
    made = CallKind(
        key="the-key",
        session="the-session",
        collected_at=2.5,
        local_answer_stands=True,
        untrusted=False,
        entry="the-entry",
        local_tail="the-local-tail",
        served_tail=TailAround("served-before", "served-after"),
    )
    assert kind_args(made)._asdict() == {
        "counted": "the-key",
        "session": "the-session",
        "collected_at": "2.5",
        "local_answer_stands": "1",
        "untrusted": "",
        "entry_past_time": "the-entry",
        "tail_local": "the-local-tail",
        "served_before_delay": "served-before",
        "served_after_delay": "served-after",
    }
    untrusted = kind_args(made._replace(untrusted=True, local_answer_stands=False))
    assert (untrusted.untrusted, untrusted.local_answer_stands) == ("1", "")


def test_requests_alike_send_their_kind_once() -> None:
    calls = [call("a"), call("b"), call("a"), call("a")._replace(now=2.0)]
    argv = decide_argv(BOUNDS, calls)
    start = len(BatchArgs._fields)
    assert BatchArgs(*argv[:start]).kinds_count == "2"
    kinds_end = start + 2 * len(KindArgs._fields)
    requests = argv[kinds_end:]
    assert [DecideArgs(*requests[i : i + 2]) for i in range(0, len(requests), 2)] == [
        DecideArgs("1.0", "1"),
        DecideArgs("1.0", "2"),
        DecideArgs("1.0", "1"),
        DecideArgs("2.0", "1"),
    ]
    assert sessions(("EVALSHA", "sha", len(KEYS), *KEYS, *argv)) == ["a", "b", "a", "a"]
