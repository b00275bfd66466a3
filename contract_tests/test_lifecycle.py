"""Unknown and expired sessions answer 404 (spec §3, §4 rules 2-3, §8)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .config import flag
from .target import Target


def _rejected(status: int) -> str:
    """What a 401 to an authorised call means: the key itself is refused, not the id."""
    return f" (a 401: the API key is rejected; check {flag('api_key')})" if status == 401 else ""


@pytest.mark.clause("§4 rule 2, §7")
def test_unknown_session_is_404(contract_target: Target, unknown_session: str) -> None:
    status = contract_target.client.explain(unknown_session).status_code
    assert status == 404, f"unknown session: received {status}{_rejected(status)}; documented: 404"


@pytest.mark.clause("§3, §8")
def test_expired_session_is_404(contract_target: Target, expired_session: str) -> None:
    status = contract_target.client.explain(expired_session).status_code
    assert status == 404, f"expired session: received {status}{_rejected(status)}; documented: 404"


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


BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _other(char: str) -> str:
    """Another character, far enough that an id ending in base64 decodes differently too.

    The last character of base64 text may carry unused bits: one of its neighbours can decode
    to the same bytes. Half the alphabet away flips a bit that is always used.
    """
    if char in BASE64URL:
        return BASE64URL[(BASE64URL.index(char) + 32) % 64]
    return "1" if char == "0" else "0"


NEAR_MISS_IDS: dict[str, Callable[[str], str]] = {
    # What a careless lookup forgives: a case-insensitive collation, a prefix (LIKE 'n%')
    # match, trimming, comparing fewer characters.
    "case swapped": str.swapcase,
    "one character more": lambda n: n + "0",
    "truncated by one": lambda n: n[:-1],
    "first half only": lambda n: n[: len(n) // 2],
    "last character changed": lambda n: n[:-1] + _other(n[-1:]),
    "trailing space": lambda n: n + " ",
    "leading space": lambda n: " " + n,
}
"""Ids that differ from a fresh one in the small ways a careless lookup forgives."""


def _refused_as_unknown(status: int) -> bool:
    """404, or another 4xx a strict id check may give (400, 422), but not 401: the key is fine."""
    return 400 <= status < 500 and status != 401


@pytest.mark.clause("§4 rule 2")
@pytest.mark.parametrize("miss", list(NEAR_MISS_IDS))
def test_near_miss_session_id_is_not_found(
    contract_target: Target, fresh_sessions: list[str], miss: str
) -> None:
    """An id names one session exactly: a near miss of a fresh id is an unknown id."""
    fresh = fresh_sessions[0]
    near = NEAR_MISS_IDS[miss](fresh)
    if near == fresh or not near.strip():
        pytest.skip(f"the fresh id has no {miss!r} variant different from itself")
    status = contract_target.client.explain(near).status_code
    assert _refused_as_unknown(status), (
        f"a fresh session's id, {miss}: received {status}{_rejected(status)}; documented: 404 "
        "(an id names one "
        "session exactly: compare all of it, case and length, as collected)"
    )
