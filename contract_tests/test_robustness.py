"""Malformed requests get a 4xx answer, never a 5xx (spec §4: ``n`` is a required string)."""

from __future__ import annotations

import pytest

from .target import Target

CASES: dict[str, list[tuple[str, str]]] = {
    "missing n": [],
    "empty n": [("n", "")],
    "4 KB n": [("n", "x" * 4096)],
    "non-ASCII n": [("n", "sessión-✓-験")],
    "repeated n": [("n", "verdict-contract-a"), ("n", "verdict-contract-b")],
}


@pytest.mark.clause("§4 GET /e")
@pytest.mark.parametrize("case", list(CASES))
def test_malformed_request_is_4xx(contract_target: Target, case: str) -> None:
    status = contract_target.client.request(params=CASES[case]).status_code
    assert 400 <= status < 500, f"{case}: received {status}; documented: a 4xx, never 5xx"
