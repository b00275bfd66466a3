"""Authentication: every request needs ``Authorization: Bearer <key>``, exactly (spec §5).

The real key travels only in the ``Authorization`` header. Checks that need a wrong key use
decoys that never equal it; near-miss decoys are built from the real key, the way a careless
comparison (a prefix match, a case-insensitive or trimming compare) would let them through,
and are sent in the same header only. The checks that put a key elsewhere (a query parameter,
another header, where access logs keep it) never use the configured key unless the user opts in
with ``--verdict-check-key-in-url`` (and a throwaway key). Against a mock they run with the
mock's own public local key (its health names it), or a decoy when it accepts none: a mock
behind a proxy is configured with the exported key, which must not land in the proxy's log.
"""

from __future__ import annotations

import hmac

import pytest

from verdict_contract.core.validator import check_refusal

from .body import Answer
from .client import KEY, Derived
from .config import flag
from .leaks import reflection
from .target import Target

WRONG_KEY = "verdict-contract-not-a-key-0000"

CASES = {
    "no header": None,
    "invalid key": "Bearer {decoy}",
    "Basic scheme": "Basic {key}",
    "key without Bearer": "{key}",
    # HTTP strips trailing white space from header values, so "Bearer " arrives as this:
    "empty token": "Bearer",
    # Near misses of the scheme, which the service compares too (a prefix check lets them in):
    "no space after Bearer": "Bearer{key}",
    "scheme cut short": "Bear {key}",
    "another scheme": "Token {key}",
}


def decoy(key: str, wanted: str = WRONG_KEY) -> str:
    """A wrong key that is certainly not ``key``."""
    return wanted if not hmac.compare_digest(wanted, key) else wanted + "-x"


def _other(char: str) -> str:
    return "1" if char == "0" else "0"


NEAR_MISSES: dict[str, Derived] = {
    # What a careless comparison forgives: a prefix match, a case-insensitive compare, a
    # comparison of the shorter length only, a split on white space or commas.
    "one character more": Derived(lambda k: k + "0", "${VERDICT_API_KEY}0"),
    "truncated by one": Derived(lambda k: k[:-1], "${VERDICT_API_KEY%?}"),
    "first half only": Derived(
        lambda k: k[: len(k) // 2], "${VERDICT_API_KEY:0:$((${#VERDICT_API_KEY}/2))}"
    ),
    "last character changed": Derived(
        lambda k: k[:-1] + _other(k[-1:]),
        '${VERDICT_API_KEY%?}$([ "${VERDICT_API_KEY: -1}" = 0 ] && echo 1 || echo 0)',
    ),
    "case swapped": Derived(str.swapcase, '$(printf %s "$VERDICT_API_KEY" | tr a-zA-Z A-Za-z)'),
    "key twice": Derived(lambda k: k + k, "${VERDICT_API_KEY}${VERDICT_API_KEY}"),
    "a space inside": Derived(
        lambda k: f"{k[: len(k) // 2]} {k[len(k) // 2 :]}",
        "${VERDICT_API_KEY:0:$((${#VERDICT_API_KEY}/2))} "
        "${VERDICT_API_KEY:$((${#VERDICT_API_KEY}/2))}",
    ),
    "comma list": Derived(lambda k: k + ",other", "${VERDICT_API_KEY},other"),
}
"""Keys that differ from the real one in the small ways a careless comparison forgives."""


def near_miss(key: str, name: str) -> str | None:
    """The near miss ``name`` of ``key``, or None if it would be empty or equal to the key."""
    value = NEAR_MISSES[name].make(key)
    same = hmac.compare_digest(value.encode(), key.encode())
    return None if same or not value.strip() else value


@pytest.mark.clause("§5.1, §5.3")
@pytest.mark.parametrize("case", list(CASES))
def test_missing_or_invalid_key_is_401(
    contract_target: Target, any_session: str, case: str
) -> None:
    template = CASES[case]
    key = contract_target.client.api_key.reveal()
    if isinstance(template, str):
        template = template.replace("{decoy}", decoy(key))
    response = contract_target.client.request(params=[("n", any_session)], authorization=template)
    assert response.status_code == 401, f"{case}: received {response.status_code}; documented: 401"


@pytest.mark.clause("§5.3")
@pytest.mark.parametrize("miss", list(NEAR_MISSES))
def test_near_miss_key_is_401(contract_target: Target, any_session: str, miss: str) -> None:
    if near_miss(contract_target.client.api_key.reveal(), miss) is None:
        pytest.skip(f"the configured key has no {miss!r} variant different from itself")
    response = contract_target.client.request(
        params=[("n", any_session)], authorization=NEAR_MISSES[miss]
    )
    assert response.status_code == 401, (
        f"a key differing from the real one ({miss}): received {response.status_code}; "
        "documented: 401 (only the exact key authorises; compare all of it, case and length)"
    )


FIELD_NAMES = {
    "lowercase, as HTTP/2 sends it": "authorization",
    "uppercase": "AUTHORIZATION",
}
"""``Authorization`` spelled as HTTP allows: field names are case-insensitive (RFC 9110 §5.1),
and HTTP/2 and HTTP/3 send them lowercase (RFC 9113 §8.2.1), so a proxy in front passes them on
lowercase."""
BEARER = Derived(lambda k: f"Bearer {k}", "Bearer $VERDICT_API_KEY")


@pytest.mark.clause("§5.1")
@pytest.mark.parametrize("spelling", list(FIELD_NAMES))
def test_the_header_name_is_read_in_any_case(
    contract_target: Target, unknown_session: str, spelling: str
) -> None:
    """An unknown id: the key read gives 404, the key missed 401; no fresh session is spent."""
    client = contract_target.client
    expected = client.request(params=[("n", unknown_session)]).status_code
    name = FIELD_NAMES[spelling]
    received = client.request(
        params=[("n", unknown_session)], authorization=None, headers={name: BEARER}
    ).status_code
    assert received == expected, (
        f"the key in {name!r} ({spelling}): received {received}, where 'Authorization' got "
        f"{expected}; documented: the key in the Authorization header, whose name HTTP reads in "
        "any case (RFC 9110 §5.1)"
    )


@pytest.mark.clause("§5.3")
def test_auth_comes_before_lookup(contract_target: Target, unknown_session: str) -> None:
    wrong = decoy(contract_target.client.api_key.reveal())
    response = contract_target.client.request(
        params=[("n", unknown_session)], authorization=f"Bearer {wrong}"
    )
    assert response.status_code == 401, (
        f"invalid key with an unknown id: received {response.status_code}; documented: 401 "
        "(a caller without a key must not learn which sessions exist)"
    )


def _key_outside_the_header(contract_target: Target) -> str | object:
    """The key a check sends outside the ``Authorization`` header: never the configured one
    unless the user opted in; the mock's public key, or a decoy, against a mock."""
    if contract_target.config.check_key_in_url:
        return KEY  # the user's choice, made with a throwaway key
    if not contract_target.mock:
        pytest.skip(
            f"opt-in: pass {flag('check_key_in_url')} to send the real key outside the "
            "Authorization header (it lands in access logs: use a throwaway key)"
        )
    public = contract_target.client.mock_health().get("default_key")
    if isinstance(public, str) and public:
        return public  # published by the mock itself: no secret
    return decoy(contract_target.client.api_key.reveal())


@pytest.mark.clause("§5.1")
@pytest.mark.parametrize("where", ["api_key", "key", "token", "access_token"])
def test_key_in_the_query_does_not_authorise(
    contract_target: Target, any_session: str, where: str
) -> None:
    key = _key_outside_the_header(contract_target)
    response = contract_target.client.request(
        params=[("n", any_session), (where, key)], authorization=None
    )
    assert response.status_code == 401, (
        f"key sent as query parameter {where!r}: received {response.status_code}; "
        "documented: only the Authorization header authorises (401)"
    )


@pytest.mark.clause("§5.1")
def test_key_in_another_header_does_not_authorise(
    contract_target: Target, any_session: str
) -> None:
    key = _key_outside_the_header(contract_target)
    response = contract_target.client.request(
        params=[("n", any_session)], authorization=None, headers={"X-API-Key": key}
    )
    assert response.status_code == 401, (
        f"key sent as X-API-Key: received {response.status_code}; documented: 401"
    )


@pytest.mark.clause("§5.4")
def test_credential_is_never_reflected(
    contract_target: Target, any_session: str, unknown_session: str
) -> None:
    """No answer carries the credential it was sent, whole or in part, in a body or header.

    The key is a server-side secret (§5.4): an answer that echoes it ends up in logs, error
    pages and browsers. A mask of the last 4 characters is no leak; 8 in a row are.
    """
    client = contract_target.client
    key = client.api_key.reveal()
    wrong = decoy(key)
    calls: list[tuple[str, list[tuple[str, str]], object, str]] = [
        ("an authorised call", [("n", any_session)], KEY, key),
        ("an unknown session", [("n", unknown_session)], KEY, key),
        ("a wrong key", [("n", any_session)], f"Bearer {wrong}", wrong),
        ("a near-miss key", [("n", any_session)], NEAR_MISSES["truncated by one"], key),
        ("the key under another scheme", [("n", any_session)], "Basic {key}", key),
        ("no session id", [], KEY, key),
    ]
    found = []
    for what, params, authorization, sent in calls:
        baseline = client.request(params=params, authorization=None)
        response = client.request(params=params, authorization=authorization)
        where = reflection(response, key, sent if sent != key else None, baseline)
        if where:
            found.append(
                f"{what}: the {response.status_code} answer reflects the caller's credential "
                f"({where}); documented: the key is a server-side secret (§5)\n"
                f"    replay: {client.sent[-1].curl()}"
            )
    if found:
        pytest.fail("\n".join(found), pytrace=False)


@pytest.mark.clause("§4 rule 1, §5.3")
@pytest.mark.run_last
def test_no_verdict_without_a_valid_key(
    contract_target: Target, session_answers: list[Answer]
) -> None:
    """Whatever its status, an answer to a call without a valid key holds nothing of the verdict.

    Each fresh session is asked with no key and with a wrong one; the answer may not hold a
    member only a verdict has, nor quote the session's own texts (the registry's
    ``no_verdict_without_a_key``). A session without a verdict to compare is still read for the
    members. It runs among the last, so the run's answers are fetched when the checks of
    verdicts first need them, not earlier for this one.
    """
    client = contract_target.client
    wrong = f"Bearer {decoy(client.api_key.reveal())}"
    found = []
    for answer in session_answers:
        if answer.throttled:
            continue
        for what, authorization in (("no key", None), ("a wrong key", wrong)):
            response = client.request(params=[("n", answer.session)], authorization=authorization)
            for violation in check_refusal(response.text, answer.verdict()):
                found.append(
                    f"{answer.where()}, {what}: the {response.status_code} answer "
                    f"{violation.message}; documented: {violation.documented} "
                    f"[{violation.rule}, spec {violation.clause}]\n"
                    f"    replay: {client.sent[-1].curl()}"
                )
    if found:
        pytest.fail("\n".join(found), pytrace=False)
