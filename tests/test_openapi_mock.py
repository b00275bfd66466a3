"""The bundled OpenAPI document describes what the mock really answers, as independent tools
read it: openapi-core validates each answer, Schemathesis fuzzes the document's operations.

Every answer is provoked on the running mock, over real HTTP: each documented status, every
demo session the document names as an example of ``n``, and each status a script can send.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from openapi_core import OpenAPI
from openapi_core.testing import MockRequest, MockResponse
from openapi_core.validation.response.exceptions import HeaderValidationError

from verdict_contract.core.resources import bundled_openapi
from verdict_contract.core.spec import VERDICTS
from verdict_contract.mockserver.model.sessions import ScriptStep
from verdict_contract.testing.mocks import VerdictMock

DOCUMENT = bundled_openapi()
SESSION_ID = DOCUMENT["components"]["parameters"]["SessionId"]
DEMO_SESSIONS = [example["value"] for example in SESSION_ID["examples"].values()]
OPENAPI = OpenAPI.from_dict(DOCUMENT)


def _exchange(
    mock: VerdictMock,
    method: str,
    params: list[tuple[str, str]],
    *,
    auth: bool = True,
) -> tuple[MockRequest, MockResponse, httpx.Response]:
    """One call of ``/e`` on the mock, and the request and answer as openapi-core reads them."""
    headers = {"Authorization": f"Bearer {mock.api_key}"} if auth else {}
    response = httpx.request(method, f"{mock.base_url}/e", params=tuple(params), headers=headers)
    request = MockRequest(mock.base_url, method.lower(), "/e", args=dict(params), headers=headers)
    answer = MockResponse(
        response.content,
        status_code=response.status_code,
        headers=dict(response.headers),
        content_type=response.headers.get("content-type", ""),
    )
    return request, answer, response


def _assert_documented(mock: VerdictMock, method: str, params: list[tuple[str, str]]) -> int:
    request, answer, response = _exchange(mock, method, params)
    OPENAPI.validate_response(request, answer)  # raises, saying what broke the document
    return response.status_code


@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize(
    ("status", "params", "auth"),
    [
        (400, [("n", "")], True),
        (400, [("n", "x" * (SESSION_ID["schema"]["maxLength"] + 1))], True),
        (400, [("n", "a"), ("n", "b")], True),
        (401, [("n", "demo-disputed")], False),
        (404, [("n", "no-such-session")], True),
        (429, [("n", "demo-rate-limited")], True),
        (404, [("n", "x" * SESSION_ID["schema"]["maxLength"])], True),  # the longest n is read
    ],
)
def test_each_documented_answer_is_what_the_mock_sends(
    verdict_mock: VerdictMock, method: str, status: int, params: list[tuple[str, str]], auth: bool
) -> None:
    request, answer, response = _exchange(verdict_mock, method, params, auth=auth)
    assert response.status_code == status
    OPENAPI.validate_response(request, answer)  # the answer, whatever the request held


def test_every_demo_session_in_the_document_answers_as_documented(
    verdict_mock: VerdictMock,
) -> None:
    """The examples of ``n`` lead a tool to 200 (every verdict kind), 404 and 429."""
    statuses = Counter(
        _assert_documented(verdict_mock, method, [("n", n)])
        for n in DEMO_SESSIONS
        for method in ("GET", "HEAD")
    )
    assert set(statuses) == {200, 404, 429}, statuses
    kinds = {entry.verdict for entry in verdict_mock.journal if entry.status == 200}
    assert kinds == set(VERDICTS)


@pytest.mark.parametrize(
    "step",
    [
        401,
        404,
        429,
        503,
        {"status": 429, "headers": {"Retry-After": "0"}},
        {"status": 429, "headers": {"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"}},
        {"status": 401, "headers": {"WWW-Authenticate": 'Bearer realm="x", error="invalid_token"'}},
    ],
    ids=str,
)
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_each_scripted_status_answers_as_documented(
    verdict_mock: VerdictMock, step: ScriptStep, method: str
) -> None:
    n = verdict_mock.mint(script=[step])
    assert _assert_documented(verdict_mock, method, [("n", n)]) != 200


@pytest.mark.parametrize(
    ("status", "headers"),
    [
        (429, {"Retry-After": "in a minute"}),
        (429, {"Retry-After": "-1"}),
        (401, {"WWW-Authenticate": 'Basic realm="x"'}),
    ],
    ids=str,
)
def test_the_document_refuses_what_no_client_can_read(
    verdict_mock: VerdictMock, status: int, headers: dict[str, str]
) -> None:
    """The checks above can fail: a header the RFCs do not allow breaks the document."""
    n = verdict_mock.mint(script=[{"status": status, "headers": headers}])
    request, answer, response = _exchange(verdict_mock, "GET", [("n", n)])
    assert response.status_code == status
    with pytest.raises(HeaderValidationError):
        OPENAPI.validate_response(request, answer)


def test_other_methods_get_405_with_the_documented_error_body(verdict_mock: VerdictMock) -> None:
    response = httpx.post(f"{verdict_mock.base_url}/e?n=demo-disputed")
    assert response.status_code == 405
    assert "GET" in response.headers["Allow"]
    error: dict[str, Any] = DOCUMENT["components"]["schemas"]["Error"]
    assert set(response.json()) == set(error["required"])
    assert "405" in DOCUMENT["paths"]["/e"]["description"]


def test_schemathesis_finds_nothing_and_reaches_every_status(
    verdict_mock: VerdictMock, tmp_path: Path
) -> None:
    """Schemathesis (its CLI, as a user runs it) on the served document: every check, no
    failure, and the demo sessions bring its cases to 200, 404 and 429 (a bounded run)."""
    run = subprocess.run(
        [
            *(sys.executable, "-m", "schemathesis.cli", "run"),
            f"{verdict_mock.base_url}/_mock/openapi.json",
            *("--url", verdict_mock.base_url),
            *("-H", f"Authorization: Bearer {verdict_mock.api_key}"),
            *("--checks", "all", "--max-examples", "15", "--seed", "1"),
            *("--generation-database", "none", "--no-color"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "No issues found" in run.stdout, run.stdout[-4000:]
    reached = Counter((entry.method, entry.status) for entry in verdict_mock.journal)
    for wanted in [(m, s) for m in ("GET", "HEAD") for s in (200, 400, 401, 404, 429)]:
        assert reached[wanted], (wanted, reached)
