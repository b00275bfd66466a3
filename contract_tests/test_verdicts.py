"""A fresh session's answer: a JSON verdict object that keeps the schema-7 contract."""

from __future__ import annotations

from email.message import Message

import httpx
import pytest
from verdict_contract.contract_tests.report import BUILD, SCHEMA, UNDOCUMENTED
from verdict_contract.contract_tests.target import Target

from verdict_contract.core.spec import SCHEMA_VERSION
from verdict_contract.core.validator import unknown_properties, validate_verdict
from verdict_contract.core.violations import format_violations


def _media_type(response: httpx.Response) -> str:
    message = Message()
    message["content-type"] = response.headers.get("content-type", "")
    return message.get_content_type()


def _body(response: httpx.Response) -> object:
    try:
        return response.json()
    except ValueError:
        pytest.fail(
            f"the body is not JSON: received {response.text[:120]!r}; "
            "documented: the verdict object of §2.2"
        )


@pytest.mark.clause("§4 GET /e, §7")
def test_success_is_a_json_object(verdict_responses: dict[str, httpx.Response]) -> None:
    for n, response in verdict_responses.items():
        assert response.status_code == 200, (
            f"session {n!r}: received status {response.status_code}; documented: 200 with "
            "the verdict (is the id fresh, collected less than 15 minutes ago?)"
        )
        assert _media_type(response) == "application/json", (
            f"session {n!r}: received Content-Type {response.headers.get('content-type')!r}; "
            "documented: application/json"
        )
        assert isinstance(_body(response), dict), f"session {n!r}: the body is not an object"


@pytest.mark.clause("§2.2-§2.4")
def test_verdicts_keep_the_contract(
    request: pytest.FixtureRequest,
    contract_target: Target,
    verdict_responses: dict[str, httpx.Response],
) -> None:
    failures = []
    for n, response in verdict_responses.items():
        if response.status_code != 200:
            continue  # reported by test_success_is_a_json_object
        body = _body(response)
        if isinstance(body, dict):
            build = (
                body.get("provenance", {}).get("build")
                if isinstance(body.get("provenance"), dict)
                else None
            )
            request.node.user_properties.append((BUILD, build))
            request.node.user_properties.append((SCHEMA, body.get("schema")))
        violations = validate_verdict(body, strict=contract_target.strict)
        if violations:
            failures.append(format_violations(violations, subject=f"session {n!r}"))
        elif not contract_target.strict:
            # Added fields are allowed (spec §9.2): listed in the summary, never a failure.
            for added in unknown_properties(body):
                request.node.user_properties.append((UNDOCUMENTED, added.path))
    assert not failures, "\n".join(failures)


@pytest.mark.clause("§9.1, §9.3")
def test_schema_version(verdict_responses: dict[str, httpx.Response]) -> None:
    for response in verdict_responses.values():
        if response.status_code != 200:
            continue  # reported by test_success_is_a_json_object
        body = _body(response)
        version = body.get("schema") if isinstance(body, dict) else None
        assert version == SCHEMA_VERSION, (
            f"schema version mismatch: the service speaks schema {version!r}, this suite "
            f"checks schema {SCHEMA_VERSION}"
        )


@pytest.mark.clause("§3, §8")
def test_verdict_is_immutable(
    contract_target: Target, verdict_responses: dict[str, httpx.Response]
) -> None:
    for n, first in verdict_responses.items():
        if first.status_code != 200:
            continue
        again = contract_target.client.explain(n)
        assert again.status_code == 200, f"session {n!r}: second call got {again.status_code}"
        assert _body(again) == _body(first), (
            f"session {n!r}: the verdict changed between two calls; documented: a verdict "
            "is immutable once produced"
        )
