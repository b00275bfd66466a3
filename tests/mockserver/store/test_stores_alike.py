"""The two stores, proven alike: one model-based test drives both with the same operations.

The rules of ``/e`` are decided once, in Python (``explain.py``); a store only offers the
primitives they use (``store/primitives.py``), in this process or in Redis (some as Lua). A
Hypothesis state machine sends every operation to two mocks, one per store (a real
``redis-server``), and compares every answer, as fakeredis checks itself against a real Redis:
mints with scripts and ages (a full script store included), ``/e`` with good and bad keys and
odd queries (one at a time, and several arriving together at the async server, whose round
trips a shared store answers in one call), clock moves that land exactly on a session's
lifetime or a window's edge, expiry by hand, resets, journal reads and clears (both journals
small enough to fill).

The host's wall clock is stopped where the mock reads it: time moves by the mock's clock alone,
so an edge is landed on exactly in both stores. The rules themselves (the same code for both)
are pinned by ``tests/mockserver/store/test_store_contract.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from collections.abc import Iterator
from functools import partial
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    rule,
    run_state_machine_as_test,
)

from tests.helpers import KEY, OTHER_KEY
from tests.mockserver.fakes import FakeServer, connect
from tests.redisserver import RedisServer, redis_server
from verdict_contract.core.rates import RateLimit
from verdict_contract.core.spec import SESSION_LIFETIME_SECONDS
from verdict_contract.mockserver import Settings, explain, state
from verdict_contract.mockserver.model import scripts, sessions
from verdict_contract.mockserver.model.answer import Result
from verdict_contract.mockserver.model.scenario import Scenario, named_sessions
from verdict_contract.mockserver.model.scripts import ScriptStoreFull
from verdict_contract.mockserver.model.sessions import parse_spec
from verdict_contract.mockserver.store import journal, redisstate
from verdict_contract.mockserver.store.backend import StateURL
from verdict_contract.mockserver.store.primitives import Ask
from verdict_contract.mockserver.store.redisstate import MOST_BATCHED, RedisStore

LIFETIME = float(SESSION_LIFETIME_SECONDS)
BUDGET, WINDOW = 3, 60.0
"""Both mocks' rate limit: small, so a window fills within a few steps."""
JOURNAL_SIZE, RING_SIZE = 4, 3
SCRIPTS_HELD = 3 * (scripts.STEP_BYTES + scripts.SCRIPT_BYTES)
"""The script store's bound: three one-step scripts, so a few mints fill it."""
BAD_KEY = "not-a-key-of-this-mock-0000"
DATE = re.compile(rb"Date: [^\r]*\r\n")
WALL = 1_800_000_000.0
"""Where the host's wall clock stands, stopped: a whole number, so every sum is exact."""

STEPS = st.sampled_from(
    [429, 500, 503, {"status": 502, "headers": {"Retry-After": "7"}}, {"delay_ms": 1}]
)
AGES = st.sampled_from([None, 0.0, 0.5, LIFETIME - 1, LIFETIME - 0.5])
MOVES = st.sampled_from([0.1, 0.5, 1.0, WINDOW - 0.5, WINDOW, WINDOW, LIFETIME - 1, LIFETIME])
ODD_QUERIES = st.sampled_from([b"", b"n=", b"n=a&n=b", b"n=never-minted", b"x=1", b"n=%FF"])
NAMED = {  # a scenario's sessions: restored scripts at each reset, a standing step, no age
    "named-scripted": parse_spec({"script": [503, 429]}),
    "named-standing": parse_spec({"script": [500], "always": {"status": 503}}),
    "named-forever": parse_spec({}),
}


def _answer(state_: state.MockState, query: bytes, key: str | None) -> tuple[object, ...]:
    authorization = None if key is None else f"Bearer {key}"
    answer = explain.handle(state_, "GET", query, authorization)
    return answer.status, answer.body, tuple(answer.headers), answer.delay


def _journal(state_: state.MockState, ids: dict[str, str]) -> list[dict[str, Any]]:
    """The journal as compared: every field shown but its time and latency; ids by label."""
    shown = []
    for entry in state_.store.entries():
        fields = entry.to_json()
        del fields["time"], fields["latency_ms"]
        fields["n"] = ids.get(fields["n"], fields["n"])
        shown.append(fields)
    return shown


def _scripts_left(state_: state.MockState, ids: dict[str, str]) -> dict[str, object]:
    """Every script's steps left, named and minted ones (by label)."""
    return {ids.get(n, n): steps for n, steps in state_.store.scripts_left().items()}


def _one_turn(state_: state.MockState, requests: list[tuple[str, str | None]]) -> list[bytes]:
    """``GET /e?<query>`` with a key (or none) per request, each on a connection of its own to
    the async server, all read in one turn of the event loop (a shared store answers their
    round trips together); each answer as written, its Date left out."""

    async def serve() -> list[bytes]:
        server = FakeServer(state=state_)
        transports = []
        for query, key in requests:
            connection, transport = connect(server)
            authorization = "" if key is None else f"Authorization: Bearer {key}\r\n"
            head = f"GET /e?{query} HTTP/1.1\r\nHost: mock\r\n{authorization}\r\n"
            connection.data_received(head.encode())
            transports.append(transport)
        for _ in range(1000):  # the store's round trips; a scripted delay on the fake loop's clock
            if all(transport.written for transport in transports):
                break
            server.loop.run_later(1.0)
            await asyncio.sleep(0.001)
        else:
            unanswered = sum(not transport.written for transport in transports)
            raise AssertionError(f"{unanswered} of {len(requests)} requests were never answered")
        if isinstance(state_.store, RedisStore):
            await state_.store.close_async()
        return [DATE.sub(b"", transport.take()) for transport in transports]

    return asyncio.run(serve())


class StoresAlike(RuleBasedStateMachine):
    """Every operation on both stores; every answer compared."""

    redis_url = ""
    examples = 0
    sessions = Bundle("sessions")

    @initialize()
    def start(self) -> None:
        given = Settings(
            api_keys=(KEY, OTHER_KEY),
            rate_limit=RateLimit(BUDGET, WINDOW),
            journal_size=JOURNAL_SIZE,
            secret="stores-alike",
            seed="7",
        )
        self.memory = state.MockState(given)
        StoresAlike.examples += 1  # each example its own keys: nothing left from the one before
        shared = StateURL.parse(self.redis_url)
        named = f"alike-{StoresAlike.examples}"
        self.shared = state.MockState(dataclasses.replace(given, state=shared, state_name=named))
        self.ids: list[dict[str, str]] = [{}, {}]  # per store: a minted id -> its label
        self.minted = 0
        scenario = Scenario(sessions=named_sessions(NAMED, WALL))
        for each in self.both:
            each.apply(scenario)
            each.reset()

    @property
    def both(self) -> tuple[state.MockState, state.MockState]:
        return self.memory, self.shared

    def alike(self, memory: object, shared: object) -> None:
        assert memory == shared

    @rule(target=sessions, script=st.lists(STEPS, max_size=3), age=AGES)
    def mint(self, script: list[object], age: float | None) -> object:
        spec = parse_spec({"script": script, "age_seconds": age})
        label = f"minted-{self.minted}"
        self.minted += 1
        made, refusals = [], []
        for index, each in enumerate(self.both):
            try:
                session_id = each.mint(spec).id
            except ScriptStoreFull as full:
                session_id, refusal = "", str(full)
            else:
                self.ids[index][session_id], refusal = label, ""
            made.append(session_id)
            refusals.append(refusal)
        self.alike(*refusals)  # both mint it, or both refuse it in the same words
        return tuple(made)

    @rule(minted=sessions, key=st.sampled_from([KEY, OTHER_KEY, BAD_KEY, None]))
    def get_minted(self, minted: tuple[str, str], key: str | None) -> None:
        answers = [
            _answer(each, b"n=" + session_id.encode(), key)
            for each, session_id in zip(self.both, minted, strict=True)
        ]
        self.alike(*answers)

    @rule(name=st.sampled_from([*NAMED, "demo-refused"]), key=st.sampled_from([KEY, OTHER_KEY]))
    def get_named(self, name: str, key: str) -> None:
        self.alike(*[_answer(each, f"n={name}".encode(), key) for each in self.both])

    @rule(
        minted=sessions,
        requests=st.lists(
            st.tuples(st.sampled_from(["minted", *NAMED]), st.sampled_from([KEY, BAD_KEY, None])),
            min_size=2,
            max_size=6,
        ),
    )
    def get_in_one_turn(
        self, minted: tuple[str, str], requests: list[tuple[str, str | None]]
    ) -> None:
        """Requests that arrive together, through the async server: each answered as if one by
        one, in the order they arrived; their entries compared as a set (which of them is
        journaled first is the order they were decided in, which the stores may differ in), or,
        if more than a journal holds, their count."""
        answers, journals = [], []
        for each, session_id, ids in zip(self.both, minted, self.ids, strict=True):
            each.store.clear_journal()
            turn = [
                (f"n={session_id if name == 'minted' else name}", key) for name, key in requests
            ]
            answers.append(_one_turn(each, turn))
            entries = [{**entry, "seq": None} for entry in _journal(each, ids)]  # numbered as kept
            if len(requests) > min(JOURNAL_SIZE, RING_SIZE):  # which fell off is the order's
                entries = [{"kept": len(entries)}]
            journals.append(sorted(map(repr, entries)))
            each.store.clear_journal()
        self.alike(*answers)
        self.alike(*journals)

    @rule(query=ODD_QUERIES, key=st.sampled_from([KEY, BAD_KEY]))
    def get_odd(self, query: bytes, key: str) -> None:
        self.alike(*[_answer(each, query, key) for each in self.both])

    @rule(key=st.sampled_from([KEY, OTHER_KEY]))
    def count(self, key: str) -> None:
        """The window's count on its own, as a request's round trip asks it: its start and
        hits compared, so a window's edge is checked whenever a count lands on it, full or not."""
        counted = []
        for each in self.both:
            offset = each.store.offset()
            reply = each.store.run(Ask(True, key, WALL + offset, WINDOW, offset))
            counted.append((reply.started, reply.hits))
        self.alike(*counted)

    @rule(seconds=MOVES)
    def advance(self, seconds: float) -> None:
        for each in self.both:
            each.advance(seconds)
        self.alike(self.memory.skew, self.shared.skew)

    @rule(minted=sessions)
    def expire(self, minted: tuple[str, str]) -> None:
        for each, session_id in zip(self.both, minted, strict=True):
            each.store.expire(session_id)

    @rule(minted=sessions)
    def read_mark(self, minted: tuple[str, str]) -> None:
        """Whether a session was expired by hand, as a request's round trip asks it (its answer
        may be a scripted step's, or a 429, that does not show it)."""
        pairs = zip(self.both, minted, strict=True)
        self.alike(*[each.store.run(Ask(marked=session_id)).expired for each, session_id in pairs])

    @rule(minted=consumes(sessions))
    def reset(self, minted: tuple[str, str]) -> None:
        for each in self.both:
            each.reset()
        self.minted = 0  # mint numbers start again: the bodies drawn from them too

    @rule(name=st.sampled_from([*NAMED]))
    def clear_while_in_flight(self, name: str) -> None:
        """A request decided before a clear and journaled after it is not journaled."""
        for each in self.both:
            decision = explain.run(
                each, explain.decide(each, "GET", f"n={name}".encode(), f"Bearer {KEY}")
            )
            each.store.clear_journal()
            each.store.append(explain.record(each, decision)[0])

    @rule()
    def clear_journal(self) -> None:
        for each in self.both:
            each.store.clear_journal()

    @rule()
    def read(self) -> None:
        self.alike(*[_journal(each, ids) for each, ids in zip(self.both, self.ids, strict=True)])
        self.alike(self.memory.store.script_bytes(), self.shared.store.script_bytes())
        self.alike(
            *[_scripts_left(each, ids) for each, ids in zip(self.both, self.ids, strict=True)]
        )
        self.alike(self.memory.store.journal_length(), self.shared.store.journal_length())

    def teardown(self) -> None:
        for each in getattr(self, "memory", None), getattr(self, "shared", None):
            if each is not None:
                each.store.close()


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


@pytest.fixture
def stopped_wall_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The wall clock stopped where the mock reads it (the mock's clock still moves)."""
    frozen = SimpleNamespace(time=lambda: WALL, perf_counter=time.perf_counter, sleep=time.sleep)
    for module in (explain, state, journal, sessions):
        monkeypatch.setattr(module, "time", frozen)
    monkeypatch.setattr(scripts, "MAX_SCRIPT_BYTES", SCRIPTS_HELD)
    monkeypatch.setattr(journal, "UNTRUSTED_KEPT", RING_SIZE)
    monkeypatch.setattr(redisstate, "UNTRUSTED_KEPT", RING_SIZE)


@pytest.mark.usefixtures("stopped_wall_clock")
def test_the_memory_and_redis_stores_answer_every_sequence_alike(redis: RedisServer) -> None:
    StoresAlike.redis_url = redis.url
    run_state_machine_as_test(
        StoresAlike,
        settings=settings(
            max_examples=100,
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


@pytest.fixture(params=["memory", "redis"])
def one_store(request: pytest.FixtureRequest, redis: RedisServer) -> Iterator[state.MockState]:
    url = redis.url if request.param == "redis" else "memory"
    given = Settings(api_keys=(KEY,), rate_limit=RateLimit(2, WINDOW), state=StateURL.parse(url))
    made = state.MockState(given)
    made.reset()
    yield made
    made.store.close()


def test_clock_moves_add_up_as_floats_do(one_store: state.MockState) -> None:
    """Moves that are no binary fraction sum alike in both stores: as Python sums them."""
    for _ in range(3):
        one_store.advance(0.1)
    assert one_store.skew == 0.1 + 0.1 + 0.1 == 0.30000000000000004


@pytest.mark.usefixtures("stopped_wall_clock")
def test_a_session_expires_at_its_lifetime_exactly(one_store: state.MockState) -> None:
    """Landed on exactly (the wall clock stopped): 0.5 s before its lifetime a session answers,
    at its lifetime it is expired."""
    n = one_store.mint(parse_spec({"age_seconds": LIFETIME - 1})).id
    one_store.advance(0.5)
    assert _answer(one_store, f"n={n}".encode(), KEY)[0] == 200
    one_store.advance(0.5)
    assert _answer(one_store, f"n={n}".encode(), KEY)[0] == 404


@pytest.mark.usefixtures("stopped_wall_clock")
def test_a_window_passes_at_its_end_exactly(one_store: state.MockState) -> None:
    """The budget is used, the next call waits the window's rest (Retry-After), and a call at
    the window's end starts a new window."""
    statuses = [_answer(one_store, b"n=demo-refused", KEY)[0] for _ in range(3)]
    assert statuses == [200, 200, 429]
    one_store.advance(WINDOW - 0.5)
    status, _, headers, _ = _answer(one_store, b"n=demo-refused", KEY)
    assert (status, dict(headers)["Retry-After"]) == (429, "1")  # type: ignore[call-overload]
    one_store.advance(0.5)
    assert _answer(one_store, b"n=demo-refused", KEY)[0] == 200


def _entry(n: str, untrusted: bool = False, generation: int | None = None) -> journal.JournalEntry:
    """An entry of ``/e?n=...``; ``untrusted``: of a wrong path (kept in the ring); its request
    arrived at ``generation`` (None: kept in the journal of now)."""
    path = "/elsewhere" if untrusted else "/e"
    outcome = Result(404 if untrusted else 200, "unknown" if untrusted else "verdict", None)
    return journal.make_entry(
        method="GET", path=path, authorization=None, result=outcome, args=[("n", n)],
        generation=generation,
    )  # fmt: skip


def test_the_entries_of_one_turn_of_the_loop_are_each_told_and_kept_in_order(
    one_store: state.MockState,
) -> None:
    """On the event loop, the entries appended in one turn are journaled in the order given,
    and each request is told whether its own was kept (one decided before a clear is not); on
    Redis they go in one call per MOST_BATCHED entries."""
    store = one_store.store
    before = store.run(Ask(clock=True)).generation
    store.clear_journal()
    now = store.run(Ask(clock=True)).generation
    count = MOST_BATCHED + 2  # with the stale one: two calls on Redis
    fresh = [_entry(f"s{i}", i % 5 == 0, now if i % 2 else None) for i in range(count)]
    stale = _entry("decided-before-the-clear", generation=before)
    told: dict[str, object] = {}  # per entry's n: what its request was told

    async def append_in_one_turn() -> None:
        finished = asyncio.get_running_loop().create_future()

        def done(n: str | None, kept: object) -> None:
            told[str(n)] = kept
            if len(told) == count + 1:
                finished.set_result(None)

        for entry in [fresh[0], stale, *fresh[1:]]:
            store.submit(entry, partial(done, entry.n))
        await asyncio.wait_for(finished, 10)
        if isinstance(store, RedisStore):
            trips.append(store.calls()[0])
            await store.close_async()

    trips = [store.calls()[0]] if isinstance(store, RedisStore) else []
    asyncio.run(append_in_one_turn())
    assert told == {"decided-before-the-clear": False, **{f"s{i}": True for i in range(count)}}
    assert [entry.n for entry in store.entries()] == [f"s{i}" for i in range(count)]
    assert [entry.untrusted for entry in store.entries()] == [i % 5 == 0 for i in range(count)]
    if isinstance(store, RedisStore):
        assert trips[1] - trips[0] == 2


def test_the_asks_of_one_turn_of_the_loop_are_each_answered_in_order(
    one_store: state.MockState,
) -> None:
    """On the event loop, the asks of one turn are answered as if one by one, in the order
    given: a key's hits counted 1, 2, 3..., a script's steps taken in order, each ask told its
    own answers; on Redis they go in one call per MOST_BATCHED asks."""
    store = one_store.store
    n = one_store.mint(parse_spec({"script": [503, 500]})).id
    store.expire(n)
    counts = [
        Ask(True, "a-key", 1000 + i / 100, WINDOW, store.offset()) for i in range(MOST_BATCHED)
    ]
    takes = [Ask(take=n) for _ in range(3)]
    marked = Ask(marked=n)
    asks = [*counts[:3], *takes, marked, *counts[3:]]
    told: list[tuple[int, object]] = []
    trips: list[int] = []

    async def ask_in_one_turn() -> None:
        finished = asyncio.get_running_loop().create_future()

        def done(index: int, answered: object) -> None:
            told.append((index, answered))
            if len(told) == len(asks):
                finished.set_result(None)

        for index, ask in enumerate(asks):
            store.submit(ask, partial(done, index))
        await asyncio.wait_for(finished, 10)
        if isinstance(store, RedisStore):
            trips.append(store.calls()[0])
            await store.close_async()

    if isinstance(store, RedisStore):
        trips.append(store.calls()[0])
    asyncio.run(ask_in_one_turn())
    assert sorted(told, key=lambda each: each[0]) == list(enumerate(asks))  # each its own Ask
    assert [(ask.started, ask.hits) for ask in counts] == [
        (1000.0, i + 1) for i in range(MOST_BATCHED)
    ]
    assert [step and step.status for ask in takes for step in [ask.step]] == [503, 500, None]
    assert marked.expired
    if isinstance(store, RedisStore):
        assert trips[1] - trips[0] == 2  # MOST_BATCHED + 4 asks
