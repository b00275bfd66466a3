"""An integrator's tests with the whole toolkit, type-checked with ``mypy --strict``.

A tiny ``requests`` client (as a service written with requests would have one) is tested on
the in-process ``verdict_responses`` mock, with per-test settings, journal checks, the mock's
clock, scripted answers and the typed body.
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import pytest
import requests

from verdict_contract import Verdict, VerdictKind, VerificationError
from verdict_contract.testing import VerdictMock, reply


def fetch(mock: VerdictMock, n: str, retries: int = 1) -> Verdict | None:
    """GET the verdict; None for an unknown or expired session; retry a reset once."""
    for attempt in range(retries + 1):
        try:
            answer = requests.get(mock.url(n), headers=mock.headers, timeout=2)
        except requests.exceptions.ConnectionError:
            if attempt == retries:
                raise
            continue
        if answer.status_code == 404:
            return None
        answer.raise_for_status()
        body: Verdict = answer.json()
        return body
    return None  # pragma: no cover - the loop returns or raises


def should_block(body: Verdict) -> bool:
    kind: VerdictKind = body["verdict"]
    return kind == "contradicted" and body["conclusive"]


def test_a_reset_is_retried_once(verdict_responses: VerdictMock) -> None:
    n = verdict_responses.mint(verdict="contradicted", script=["reset"])
    body = fetch(verdict_responses, n)
    assert body is not None
    assert should_block(body)
    verdict_responses.assert_called(n, times=2)
    assert [entry.fault for entry in verdict_responses.calls(n)] == ["reset", None]


def test_expired_sessions_are_none(verdict_responses: VerdictMock) -> None:
    n = verdict_responses.mint(verdict="refused")
    verdict_responses.expire(n)
    assert fetch(verdict_responses, n) is None
    assert verdict_responses.last_request(n).outcome == "expired"


@pytest.mark.verdict_mock(rate_limit="1/60")
def test_the_rate_limit_announces_its_wait(verdict_responses: VerdictMock) -> None:
    n = verdict_responses.mint(verdict="uncontradicted")
    assert fetch(verdict_responses, n) is not None
    with pytest.raises(requests.HTTPError) as refused:
        fetch(verdict_responses, n)
    assert refused.value.response is not None
    assert refused.value.response.status_code == 429
    verdict_responses.advance(60)  # the window passes without sleeping
    assert fetch(verdict_responses, n) is not None


def test_a_scripted_date_in_retry_after(verdict_responses: VerdictMock) -> None:
    until = datetime(2030, 6, 1, 12, 0, tzinfo=UTC)
    n = verdict_responses.mint(script=[reply(503, retry_after=until)])
    answer = requests.get(verdict_responses.url(n), headers=verdict_responses.headers, timeout=2)
    assert parsedate_to_datetime(answer.headers["Retry-After"]) == until


def test_a_failed_check_says_what_came(verdict_responses: VerdictMock) -> None:
    n = verdict_responses.mint()
    with pytest.raises(VerificationError, match="received no request at all"):
        verdict_responses.assert_called_once(n)
