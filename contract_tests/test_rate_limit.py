"""Rate limiting: past the budget the answer is 429, and the service recovers (spec §7, §8)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from verdict_contract.core.redact import Secret

from . import clock
from .client import ExplainClient
from .config import flag
from .retry import retry_after_seconds, unreadable_retry_after
from .target import MockProvider, Target

MAX_WAIT = 30.0
"""Longest announced wait the check sits through; longer ones skip the recovery half."""
GRACE = 2.0
"""Slack past the announced Retry-After for clocks and windows to line up."""


@pytest.fixture
def probe(
    contract_target: Target, verdict_bundled_mock: MockProvider
) -> Iterator[tuple[ExplainClient, int]]:
    """A client to exhaust and the most requests it may send."""
    if contract_target.bundled:
        # A second bundled mock with a small budget, so the rest of the run is not throttled. Its
        # window is an hour, so no machine is too slow to reach the 429 inside it; the check moves
        # the mock's clock past the Retry-After instead of sleeping through it.
        with verdict_bundled_mock.serve(rate_limit="20/3600") as base_url:
            client = ExplainClient(base_url, Secret(verdict_bundled_mock.default_api_key))
            yield client, 40
            client.close()
        return
    budget = contract_target.config.probe_rate_limit
    if budget is None:
        pytest.skip(
            f"opt-in: pass {flag('probe_rate_limit')} N to send up to N requests expecting a 429"
        )
    with contract_target.client.unpaced():  # a pace would keep the probe under the limit
        yield contract_target.client, budget


@pytest.mark.clause("§7, §8")
def test_rate_limit_answers_429_then_recovers(
    contract_target: Target, probe: tuple[ExplainClient, int]
) -> None:
    client, budget = probe
    n = client.mint() if contract_target.bundled else "verdict-contract-probe"
    refusal = None
    for sent in range(1, budget + 1):
        response = client.request(params=[("n", n)], honour_429=False)
        if response.status_code == 429:
            refusal = response
            break
        assert response.status_code in (200, 404), (
            f"request {sent} of the probe: received {response.status_code}; documented: the "
            "first refusal past the rate limit is 429"
        )
    assert refusal is not None, f"no 429 after {budget} requests; documented: rate limiting"
    # Past the 429 nothing is a breach: §7 promises the 429 and no header, no recovery time.
    # How the service recovers is for the advisories.
    headers = refusal.headers
    retry_after = headers.get("retry-after")
    unreadable = unreadable_retry_after(retry_after)
    assert unreadable is None, f"the probe's refusal: {unreadable}"
    wait = retry_after_seconds(retry_after, 0, date=headers.get("date")) if retry_after else 0.0
    if contract_target.bundled:
        client.advance_mock_clock(wait)  # the mock's clock: no sleeping, however loaded the machine
    elif wait > MAX_WAIT:
        pytest.skip(
            f"the service asks to wait {wait:.0f} s; recovery is not awaited past {MAX_WAIT} s"
        )
    else:
        clock.CLOCK.sleep(wait)
    started = clock.CLOCK.monotonic()
    pause = 0.25
    status = client.request(params=[("n", n)], honour_429=False).status_code
    while status == 429 and clock.CLOCK.monotonic() - started < MAX_WAIT - wait:
        clock.CLOCK.sleep(pause)
        pause = min(pause * 2, 2.0)
        status = client.request(params=[("n", n)], honour_429=False).status_code
    late = clock.CLOCK.monotonic() - started
    advisories = []
    if retry_after and status == 429:
        advisories.append(
            f"Retry-After lied: still 429 {late:.0f} s after the {retry_after!r} it announced"
        )
    elif retry_after and late > GRACE:
        advisories.append(
            f"Retry-After lied: announced {retry_after!r}, the service recovered {late:.1f} s later"
        )
    elif status == 429:
        advisories.append(f"the rate limit did not lift within {MAX_WAIT:.0f} s (no Retry-After)")
    for text in advisories:
        contract_target.client.advise(text)
