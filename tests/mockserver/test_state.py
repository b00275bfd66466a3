"""MockState: scenario reloads, resets and key checks."""

from __future__ import annotations

import pytest

from verdict_contract.core.rates import RateLimit
from verdict_contract.mockserver import Settings
from verdict_contract.mockserver.explain import handle
from verdict_contract.mockserver.model.scenario import Scenario, named_sessions
from verdict_contract.mockserver.model.sessions import parse_spec
from verdict_contract.mockserver.state import MockState, authorized


def test_reload_keeps_the_scripts_of_minted_sessions() -> None:
    state = MockState(Settings())
    minted = state.mint(parse_spec({"script": [429, 503]}))
    state.apply(state.scenario)  # what a scenario reload does
    assert state.memory.scripts.next_step(minted.id) is not None


def test_reset_forgets_minted_scripts_and_restores_named_ones() -> None:
    state = MockState(Settings())
    spec = parse_spec({"script": [503]})
    state.apply(Scenario(named_sessions({"flaky": spec}, 0.0)))
    minted = state.mint(parse_spec({"script": [429]}))
    assert state.memory.scripts.next_step("flaky") is not None
    state.reset()
    assert state.memory.scripts.next_step(minted.id) is None
    assert state.memory.scripts.next_step("flaky") is not None


def test_a_reload_without_a_script_drops_the_old_one() -> None:
    state = MockState(Settings())
    state.apply(Scenario(named_sessions({"flaky": parse_spec({"script": [503]})}, 0.0)))
    state.apply(Scenario(named_sessions({"flaky": parse_spec({})}, 0.0)))
    assert state.memory.scripts.next_step("flaky") is None


def test_key_check() -> None:
    state = MockState(Settings(api_keys=("first-key-0001", "second-key-0002")))
    assert authorized(state, "Bearer second-key-0002") == "second-key-0002"
    assert authorized(state, "bearer  second-key-0002 ") == "second-key-0002"
    for refused in ("Bearer second-key-000", "Bearer ", "Basic second-key-0002", None):
        assert authorized(state, refused) is None


def _status(state: MockState) -> int:
    key = f"Bearer {state.api_keys[0]}"
    return handle(state, "GET", b"n=demo-refused", key).status


def test_a_reload_keeps_the_rate_limit_counters_and_a_reset_clears_them() -> None:
    state = MockState(Settings(rate_limit=RateLimit(2, 3600.0)))
    assert [_status(state), _status(state)] == [200, 200]
    state.apply(state.scenario)  # what a scenario reload does
    assert _status(state) == 429  # still over budget
    state.apply(Scenario(rate_limit=RateLimit(4, 3600.0)))  # a new limit, same counters
    assert state.limit == RateLimit(4, 3600.0)
    assert _status(state) == 200  # the 4th call of the window
    assert _status(state) == 429
    state.reset()
    assert _status(state) == 200


@pytest.mark.parametrize(
    "script",
    [[503], [503] * 10, [{"status": 418, "headers": {"X-Reason": "teapot"}}] * 3],
    ids=["one step", "ten steps", "steps with headers"],
)
def test_the_script_bound_counts_what_a_script_costs_in_memory(script: list[object]) -> None:
    """The store's bound is in the bytes scripts really take: a flood of one-step scripts cost
    nine times what the bound counted when only steps were counted."""
    import gc
    import tracemalloc

    state = MockState(Settings())
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(500):  # each script's steps parsed here: they live as long as it does
            state.mint(parse_spec({"script": script, "verdict": "refused"}, "x"))
        gc.collect()
        taken = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    counted = state.memory.scripts.size
    assert 0.75 * counted < taken < 1.33 * counted, (taken, counted)
