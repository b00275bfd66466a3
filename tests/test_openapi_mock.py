"""The bundled OpenAPI document describes what the mock really answers (so fuzzers find nothing).

Each documented error status is provoked on the running mock, over real HTTP, and its body and
headers are checked against the document.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from verdict_contract.core.resources import bundled_openapi
from verdict_contract.mockserver.testing.mocks import VerdictMock

DOCUMENT = bundled_openapi()
OPERATION = DOCUMENT["paths"]["/e"]["get"]
N_SCHEMA = OPERATION["parameters"][0]["schema"]


def _schema_of(status: int) -> Draft202012Validator:
    media = OPERATION["responses"][str(status)]["content"]["application/json"]
    schema: dict[str, Any] = {**media["schema"], "components": DOCUMENT["components"]}
    return Draft202012Validator(schema)


@pytest.mark.parametrize(
    ("status", "params", "auth"),
    [
        (400, [("n", "")], True),
        (400, [("n", "x" * (N_SCHEMA["maxLength"] + 1))], True),
        (400, [("n", "a"), ("n", "b")], True),
        (401, [("n", "demo-disputed")], False),
        (404, [("n", "no-such-session")], True),
        (429, [("n", "demo-rate-limited")], True),
        (404, [("n", "x" * N_SCHEMA["maxLength"])], True),  # the longest documented n is read
    ],
)
def test_each_documented_answer_is_what_the_mock_sends(
    verdict_mock: VerdictMock, status: int, params: list[tuple[str, str]], auth: bool
) -> None:
    headers = {"Authorization": f"Bearer {verdict_mock.api_key}"} if auth else {}
    response = httpx.get(f"{verdict_mock.base_url}/e", params=tuple(params), headers=headers)
    assert response.status_code == status
    assert _schema_of(status).is_valid(response.json()), response.text
    for name, header in OPERATION["responses"][str(status)].get("headers", {}).items():
        value = response.headers.get(name)
        assert value is not None, name
        typed: object = int(value) if header["schema"].get("type") == "integer" else value
        assert Draft202012Validator(header["schema"]).is_valid(typed), (name, value)


def test_other_methods_get_405_with_the_documented_error_body(verdict_mock: VerdictMock) -> None:
    response = httpx.post(f"{verdict_mock.base_url}/e?n=demo-disputed")
    assert response.status_code == 405
    assert "GET" in response.headers["Allow"]
    assert _schema_of(400).is_valid(response.json())  # the one Error shape
    assert (
        "405" in OPERATION["responses"]["400"]["description"]
        or "405" in DOCUMENT["paths"]["/e"]["description"]
    )
