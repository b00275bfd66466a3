"""mockserver.coverage: one pure function from a journal entry to its behaviour ids.

Each id has an entry that is it and a near one that is not.
"""

from __future__ import annotations

from typing import Any

import pytest

from verdict_contract.mockserver.coverage import BEHAVIOURS, behaviours
from verdict_contract.mockserver.model.answer import Result, Served
from verdict_contract.mockserver.store.journal import JournalEntry

BASE = JournalEntry(
    time=0.0,
    method="GET",
    path="/e",
    n="session-0001",
    query={},
    authorization="Bearer …1234",
    result=Result(200, "verdict", None, served=Served("disputed", False, 7, ())),
)
NO_VERDICT: dict[str, Any] = {"verdict": None, "conclusive": None, "schema": None}

CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {  # id: (is it, is not)
    "verdict.contradicted.conclusive": (
        {"verdict": "contradicted", "conclusive": True},
        {"verdict": "contradicted", "conclusive": False},
    ),
    "verdict.contradicted.inconclusive": (
        {"verdict": "contradicted", "conclusive": False},
        {"verdict": "contradicted", "conclusive": True},
    ),
    "verdict.refused.conclusive": (
        {"verdict": "refused", "conclusive": True},
        {"verdict": "refused", "conclusive": False},
    ),
    "verdict.refused.inconclusive": (
        {"verdict": "refused", "conclusive": False},
        {"verdict": "refused", "conclusive": True},
    ),
    "verdict.disputed": ({}, {"verdict": "uncontradicted"}),
    "verdict.uncontradicted": ({"verdict": "uncontradicted"}, {}),
    "verdict.insufficient": ({"verdict": "insufficient"}, {"path": "/x", "status": 404}),
    "auth.missing": (
        {**NO_VERDICT, "status": 401, "authorization": None},
        {**NO_VERDICT, "status": 401},
    ),
    "auth.wrong": (
        {**NO_VERDICT, "status": 401},
        {**NO_VERDICT, "status": 401, "authorization": None},
    ),
    "notfound.unknown": (
        {**NO_VERDICT, "status": 404, "outcome": "unknown"},
        {**NO_VERDICT, "status": 404, "outcome": "expired"},
    ),
    "notfound.expired": (
        {**NO_VERDICT, "status": 404, "outcome": "expired"},
        {**NO_VERDICT, "status": 404, "outcome": "unknown"},
    ),
    "ratelimit.retry_after": (
        {**NO_VERDICT, "status": 429, "retry_after": "1"},
        {**NO_VERDICT, "status": 429},
    ),
    "ratelimit.no_retry_after": (
        {**NO_VERDICT, "status": 429},
        {**NO_VERDICT, "status": 429, "retry_after": "30"},
    ),
    "fault.reset": ({**NO_VERDICT, "status": None, "fault": "reset"}, {**NO_VERDICT}),
    "fault.truncated": ({**NO_VERDICT, "fault": "truncated"}, {**NO_VERDICT, "fault": "reset"}),
    "fault.malformed": ({**NO_VERDICT, "fault": "malformed"}, {**NO_VERDICT}),
    "fault.timeout": (
        {**NO_VERDICT, "status": None, "fault": "timeout"},
        {**NO_VERDICT, "status": None, "fault": "disconnected"},
    ),
    "slow": ({"delay_ms": 1500}, {"delay_ms": 1500, **NO_VERDICT, "fault": "timeout"}),
    "status.5xx": ({**NO_VERDICT, "status": 503}, {**NO_VERDICT, "status": 422}),
    "schema.unexpected": ({"schema": 8}, {"schema": 7}),
    "fields.extra": ({"extra_fields": ("debug",)}, {}),
}


def test_every_behaviour_has_its_cases() -> None:
    assert set(CASES) == set(BEHAVIOURS)


@pytest.mark.parametrize("behaviour", CASES)
def test_an_entry_that_is_it_and_one_that_is_not(behaviour: str) -> None:
    it, not_it = CASES[behaviour]
    assert behaviour in behaviours(BASE.replace(**it))
    assert behaviour not in behaviours(BASE.replace(**not_it))


def test_a_wrong_path_or_method_is_no_answer_of_the_api() -> None:
    assert behaviours(BASE.replace(path="/e/")) == ()
    assert behaviours(BASE.replace(method="POST")) == ()


def test_one_entry_may_be_several() -> None:
    entry = BASE.replace(verdict="contradicted", conclusive=True, schema=6, extra_fields=("x",))
    assert behaviours(entry) == (
        "verdict.contradicted.conclusive",
        "schema.unexpected",
        "fields.extra",
    )
