"""mockserver.specschema: the scenario file's JSON Schema, its limits and its worded failures."""

from __future__ import annotations

import json

import pytest
import yaml
from jsonschema import Draft202012Validator

from tests.test_readme import PAGES
from verdict_contract.core.spec import VERDICTS
from verdict_contract.mockserver.model.scenario import DEMO_SESSIONS
from verdict_contract.mockserver.model.sessions import MAX_SESSION_ID_LENGTH
from verdict_contract.mockserver.model.specschema import first_problem_at, limits, scenario_schema


def first_problem(raw: object) -> str | None:
    found = first_problem_at(raw)
    return None if found is None else found[0]


def test_the_schema_is_valid_draft_2020_12() -> None:
    Draft202012Validator.check_schema(scenario_schema())


def test_the_verdicts_are_the_specs() -> None:
    enum = scenario_schema()["$defs"]["session"]["properties"]["verdict"]["enum"]
    assert [v for v in enum if v is not None] == list(VERDICTS)


def test_the_limits_come_from_the_schema() -> None:
    facts = limits()
    assert facts.max_id == MAX_SESSION_ID_LENGTH == 256
    assert facts.statuses == {401, 404, 429, 500, 503}
    assert facts.faults == {"reset", "truncated", "malformed"}
    assert (facts.max_delay_ms, facts.max_steps) == (60_000, 100)


def test_the_documented_scenario_and_the_demo_sessions_pass() -> None:
    example = PAGES["mock.md"].split("```yaml\n", 1)[1].split("```", 1)[0]
    assert first_problem(yaml.safe_load(example)) is None
    assert first_problem({"sessions": DEMO_SESSIONS}) is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"sessions": {"a": {"verdict": "nope"}}}, "sessions.a.verdict must be one of"),
        ({"sessions": {"a": {"script": [1, 2]}}}, "sessions.a.script[0] must be one of"),
        ({"sessions": {"a": {"script": [{"delay_ms": 1.0}]}}}, "script[0].delay_ms must be an"),
        ({"sessions": {"a": {"script": [True]}}}, "got true"),
        ({"api_keys": ["k", 3]}, "api_keys must be a non-empty list of strings"),
        ({"sessions": {"": {}}}, "session id '' must be a string of 1 to 256 characters"),
        ({"rate_limit": [1]}, "rate_limit: rate limit [1] is not of the form"),
        (
            {"x": 1, "y": 2},
            "unknown key(s) ['x', 'y']; known: ['api_keys', 'rate_limit', 'sessions']",
        ),
    ],
)
def test_failures_are_worded_by_the_schema(raw: object, message: str) -> None:
    problem = first_problem(raw)
    assert problem is not None
    assert message in problem


def test_a_delay_with_another_key_is_worded_as_a_step() -> None:
    problem = first_problem(json.loads('{"sessions": {"a": {"always": {"delay_ms": 5, "x": 1}}}}'))
    assert problem is not None
    assert problem.startswith("sessions.a.always must be one of the statuses")
    assert problem.endswith('got {"delay_ms": 5, "x": 1}')


class _Counted:
    """A value that counts how often it is written out as text (``default=str`` of JSON)."""

    written = 0

    def __str__(self) -> str:
        _Counted.written += 1
        return "counted"


@pytest.mark.parametrize(
    ("raw", "got"),
    [
        ({"sessions": {"a": {"always": [_Counted()] * 100_000}}}, "got ["),  # {got_json}
        ({"rate_limit": ["x" * 1000] * 1000}, "rate limit ["),  # {got}
        ({"sessions": {"a": {"script": "s" * 1_000_000}}}, "sessions.a.script"),  # validator's
    ],
)
def test_a_huge_value_is_cut_in_its_message(raw: object, got: str) -> None:
    _Counted.written = 0
    problem = first_problem(raw)
    assert problem is not None
    assert got in problem
    assert len(problem) < 1000, len(problem)
    assert _Counted.written < 100  # written out as far as the message shows, not whole
