"""Tests of the example client, written with the verdict-contract pytest plugin's fixtures."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from faker import Faker
from hypothesis import given, settings

from examples.verdict_client import (
    NotAuthorised,
    ServiceBusy,
    SessionNotFound,
    UnexpectedSchemaError,
    VerdictClient,
    VerdictError,
    decide,
)
from verdict_contract import VerdictKind
from verdict_contract.mockserver import VerdictProvider
from verdict_contract.mockserver.strategies import verdicts
from verdict_contract.testing import RespxVerdictMock, ScriptStep, VerdictMock, VerdictRow


@pytest.fixture
def make_client() -> Iterator[Callable[..., VerdictClient]]:
    """Builds clients that skip real waiting, and closes them after the test."""
    made: list[VerdictClient] = []

    def build(mock: VerdictMock, **options: Any) -> VerdictClient:
        options.setdefault("sleep", lambda _: None)
        options.setdefault("api_key", mock.api_key)
        made.append(VerdictClient(mock.base_url, **options))
        return made[-1]

    yield build
    for client in made:
        client.close()


def test_every_verdict_kind_over_http(
    make_client: Callable[..., VerdictClient], verdict_mock: VerdictMock, verdict_kind: VerdictRow
) -> None:
    n = verdict_mock.mint(verdict=verdict_kind)
    body = make_client(verdict_mock).verdict(n)
    assert (body["verdict"], body["conclusive"]) == verdict_kind


@pytest.mark.parametrize(
    ("kind", "conclusive", "action"),
    [
        ("contradicted", True, "block"),
        ("contradicted", False, "review"),
        ("refused", True, "block"),
        ("refused", False, "review"),
        ("disputed", False, "review"),
        ("uncontradicted", False, "allow"),
        ("insufficient", False, "allow"),
    ],
)
def test_conclusive_chooses_action_or_review(
    make_client: Callable[..., VerdictClient],
    verdict_mock: VerdictMock,
    kind: VerdictKind,
    conclusive: bool,
    action: str,
) -> None:
    n = verdict_mock.mint(verdict=kind, conclusive=conclusive)
    assert make_client(verdict_mock).decide(n) == action


def test_verdicts_are_cached_by_session(
    make_client: Callable[..., VerdictClient], verdict_mock: VerdictMock
) -> None:
    client = make_client(verdict_mock)
    n = verdict_mock.mint()
    assert client.verdict(n) == client.verdict(n)
    assert [r["n"] for r in verdict_mock.requests] == [n]


def test_expired_session_is_not_found(
    make_client: Callable[..., VerdictClient], verdict_mock: VerdictMock
) -> None:
    n = verdict_mock.mint(age_seconds=901)
    with pytest.raises(SessionNotFound, match="unknown or expired"):
        make_client(verdict_mock).verdict(n)


def test_429_is_retried_after_retry_after(
    make_client: Callable[..., VerdictClient], verdict_mock: VerdictMock
) -> None:
    waits: list[float] = []
    client = make_client(verdict_mock, sleep=waits.append)
    n = verdict_mock.mint(verdict="refused", script=[429, 429])
    assert client.verdict(n)["verdict"] == "refused"
    assert waits == [1.0, 1.0]
    assert [r["status"] for r in verdict_mock.requests] == [429, 429, 200]


def test_retries_are_bounded(
    make_client: Callable[..., VerdictClient], verdict_mock: VerdictMock
) -> None:
    n = verdict_mock.mint(script=[429] * 5)
    with pytest.raises(ServiceBusy, match="gave up after 3 attempts: status 429"):
        make_client(verdict_mock, retries=2).verdict(n)


@pytest.mark.parametrize("fault", ["reset", "truncated", 503])
def test_connection_faults_are_retried(
    make_client: Callable[..., VerdictClient], verdict_mock: VerdictMock, fault: ScriptStep
) -> None:
    n = verdict_mock.mint(verdict="disputed", script=[fault])
    assert make_client(verdict_mock).verdict(n)["verdict"] == "disputed"


def test_malformed_body_is_an_error(
    make_client: Callable[..., VerdictClient], verdict_mock: VerdictMock
) -> None:
    n = verdict_mock.mint(script=["malformed"])
    with pytest.raises(VerdictError, match="not JSON"):
        make_client(verdict_mock).verdict(n)


def test_unexpected_schema_is_explicit(
    make_client: Callable[..., VerdictClient], verdict_mock: VerdictMock
) -> None:
    n = verdict_mock.mint(verdict="contradicted", schema=8)  # a future body, on purpose
    with pytest.raises(UnexpectedSchemaError, match="speaks schema 8"):
        make_client(verdict_mock).verdict(n)


def test_undocumented_fields_are_survived(
    make_client: Callable[..., VerdictClient], verdict_mock: VerdictMock
) -> None:
    n = verdict_mock.mint(verdict="refused", extra={"risk_score": 0.93})  # an additive change
    assert make_client(verdict_mock).verdict(n)["verdict"] == "refused"


def test_wrong_key_never_shows_in_the_error(
    make_client: Callable[..., VerdictClient], verdict_mock: VerdictMock
) -> None:
    secret = "sk-live-this-must-not-leak-9f2c"
    client = make_client(verdict_mock, api_key=secret)
    with pytest.raises(NotAuthorised) as info:
        client.verdict("demo-refused")
    assert secret not in str(info.value) + repr(client)


def test_in_process_with_respx(
    make_client: Callable[..., VerdictClient], verdict_respx: RespxVerdictMock
) -> None:
    n = verdict_respx.mint(verdict="contradicted", conclusive=True, script=[429])
    client = make_client(verdict_respx)
    assert client.decide(n) == "block"
    assert verdict_respx.router.calls.call_count == 2


def test_respx_turns_a_reset_into_an_httpx_error(verdict_respx: RespxVerdictMock) -> None:
    n = verdict_respx.mint(script=["reset"])
    with pytest.raises(httpx.ReadError):
        httpx.get(
            verdict_respx.url(n), headers={"Authorization": f"Bearer {verdict_respx.api_key}"}
        )


def test_decide_with_make_verdict(make_verdict: Callable[..., dict[str, Any]]) -> None:
    assert decide(make_verdict("contradicted", conclusive=True)) == "block"
    assert decide(make_verdict("contradicted", conclusive=False)) == "review"


def test_faker_provider() -> None:
    fake = Faker()
    fake.add_provider(VerdictProvider)
    fake.seed_instance(7)
    assert decide(fake.verdict("uncontradicted")) == "allow"


@settings(max_examples=50, deadline=None)
@given(verdicts())
def test_decide_handles_every_valid_verdict(verdict: dict[str, Any]) -> None:
    action = decide(verdict)
    assert (action == "block") == (verdict["conclusive"] is True)
