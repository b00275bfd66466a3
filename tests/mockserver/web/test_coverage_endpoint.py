"""``GET /_mock/coverage``: the spec's answer space as a running mock's journal met it, and the
client habits it shows, over real HTTP against the real server, behind the control API's guard."""

from __future__ import annotations

import httpx

from verdict_contract.mockserver import Settings
from verdict_contract.mockserver.coverage import BEHAVIOURS
from verdict_contract.testing.mocks import live_mock

KEY = "coverage-endpoint-key-0001"


def test_a_fresh_mock_has_met_nothing() -> None:
    with live_mock(Settings(port=0, api_keys=(KEY,))) as mock:
        coverage = httpx.get(f"{mock.base_url}/_mock/coverage", timeout=10).json()
    assert (coverage["requests"], coverage["met"], coverage["habits"]) == (0, 0, [])
    assert coverage["never"] == list(BEHAVIOURS)
    assert list(coverage["behaviours"]) == list(BEHAVIOURS)  # every id, the report's order
    assert coverage["behaviours"]["slow"]["meaning"] == BEHAVIOURS["slow"]


def test_what_a_client_met_by_hand_is_counted_and_its_habits_named() -> None:
    with live_mock(Settings(port=0, api_keys=(KEY,))) as mock:
        n = mock.mint(verdict="refused", conclusive=True, script=[503], schema=8)
        with httpx.Client(base_url=mock.base_url, timeout=10) as client:
            for _ in range(3):  # 503, then the verdict, then the same verdict again
                client.get("/e", params={"n": n}, headers=mock.headers)
            client.get("/e", params={"n": n})  # no key
            client.post("/e")  # not an answer of the API: counted as a request, met nothing
            coverage = client.get("/_mock/coverage").json()
    met = {b: m["exercised"] for b, m in coverage["behaviours"].items() if m["exercised"]}
    assert met == {
        "verdict.refused.conclusive": 2,
        "auth.missing": 1,
        "status.5xx": 1,
        "schema.unexpected": 2,
    }
    assert (coverage["requests"], coverage["met"]) == (5, 4)
    assert "verdict.disputed" in coverage["never"]
    assert "status.5xx" not in coverage["never"]
    (habit,) = coverage["habits"]
    assert habit["id"] == "refetch"
    assert habit["session"].startswith("…")
    assert n not in habit["session"]


def test_the_guard_keeps_other_hosts_and_origins_out() -> None:
    with live_mock(Settings(port=0, api_keys=(KEY,))) as mock:
        url = f"{mock.base_url}/_mock/coverage"
        rebound = httpx.get(url, headers={"Host": "evil.example"}, timeout=10)
        foreign = httpx.get(url, headers={"Origin": "https://evil.example"}, timeout=10)
    assert rebound.status_code == 421
    assert foreign.status_code == 403


def test_a_key_sent_in_the_query_is_named_as_a_habit_and_never_shown() -> None:
    with live_mock(Settings(port=0, api_keys=(KEY,))) as mock:
        n = mock.mint()
        with httpx.Client(base_url=mock.base_url, timeout=10) as client:
            client.get("/e", params={"n": n, "api_key": KEY}, headers=mock.headers)
            answer = client.get("/_mock/coverage")
    assert "key_outside_header" in {habit["id"] for habit in answer.json()["habits"]}
    assert KEY not in answer.text  # named as a habit, the key itself nowhere
