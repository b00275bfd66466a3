"""Authentication: every request needs ``Authorization: Bearer <key>`` (spec §5)."""

from __future__ import annotations

import pytest
from verdict_contract.contract_tests.client import KEY
from verdict_contract.contract_tests.target import Target

WRONG_KEY = "verdict-contract-not-a-key-0000"

CASES = {
    "no header": None,
    "invalid key": f"Bearer {WRONG_KEY}",
    "Basic scheme": "Basic {key}",
    "key without Bearer": "{key}",
    # HTTP strips trailing white space from header values, so "Bearer " arrives as this:
    "empty token": "Bearer",
}


@pytest.mark.clause("§5.1, §5.3")
@pytest.mark.parametrize("case", list(CASES))
def test_missing_or_invalid_key_is_401(
    contract_target: Target, any_session: str, case: str
) -> None:
    response = contract_target.client.request(
        params=[("n", any_session)], authorization=CASES[case]
    )
    assert response.status_code == 401, f"{case}: received {response.status_code}; documented: 401"


@pytest.mark.clause("§5.3")
def test_auth_comes_before_lookup(contract_target: Target, unknown_session: str) -> None:
    response = contract_target.client.request(
        params=[("n", unknown_session)], authorization=f"Bearer {WRONG_KEY}"
    )
    assert response.status_code == 401, (
        f"invalid key with an unknown id: received {response.status_code}; documented: 401 "
        "(a caller without a key must not learn which sessions exist)"
    )


@pytest.mark.clause("§5.1")
@pytest.mark.parametrize("where", ["api_key", "key", "token", "access_token"])
def test_key_in_the_query_does_not_authorise(
    contract_target: Target, any_session: str, where: str
) -> None:
    response = contract_target.client.request(
        params=[("n", any_session), (where, KEY)], authorization=None
    )
    assert response.status_code == 401, (
        f"key sent as query parameter {where!r}: received {response.status_code}; "
        "documented: only the Authorization header authorises (401)"
    )


@pytest.mark.clause("§5.1")
def test_key_in_another_header_does_not_authorise(
    contract_target: Target, any_session: str
) -> None:
    key = contract_target.client.api_key.reveal()
    response = contract_target.client.request(
        params=[("n", any_session)], authorization=None, headers={"X-API-Key": key}
    )
    assert response.status_code == 401, (
        f"key sent as X-API-Key: received {response.status_code}; documented: 401"
    )
