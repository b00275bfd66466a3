"""Unknown and expired sessions answer 404 (spec §3, §4 rules 2-3, §8)."""

from __future__ import annotations

import pytest

from verdict_contract.contract_tests.target import Target


@pytest.mark.clause("§4 rule 2, §7")
def test_unknown_session_is_404(contract_target: Target, unknown_session: str) -> None:
    status = contract_target.client.explain(unknown_session).status_code
    assert status == 404, f"unknown session: received {status}; documented: 404"


@pytest.mark.clause("§3, §8")
def test_expired_session_is_404(contract_target: Target, expired_session: str) -> None:
    status = contract_target.client.explain(expired_session).status_code
    assert status == 404, f"expired session: received {status}; documented: 404"


@pytest.mark.clause("§3, §8")
def test_session_expires_during_the_run(contract_target: Target) -> None:
    if not contract_target.mock:
        pytest.skip("needs a mock target that can mint a session about to expire")
    n = contract_target.client.mint(age_seconds=contract_target.lifetime() - 3)
    before = contract_target.client.explain(n).status_code
    assert before == 200, f"a session 3 s from expiry: received {before}; documented: 200"
    contract_target.client.advance_mock_clock(3.1)  # the mock ages it: no sleeping
    after = contract_target.client.explain(n).status_code
    assert after == 404, f"a session just past 15 minutes: received {after}; documented: 404"
