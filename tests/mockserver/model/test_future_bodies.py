"""Future bodies on purpose: ``schema`` of any integer and ``extra`` fields, without
``allow_invalid``, through ``mint``, the control API and scenario files; a misspelt keyword
answered with the closest one; ``verdict_kind``'s seven rows of §2.4."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from tests.helpers import running
from verdict_contract.core.errors import SpecError
from verdict_contract.core.spec import SCHEMA_VERSION, VERDICT_OUTCOMES, VerdictRow
from verdict_contract.mockserver import Settings, create_app, make_verdict
from verdict_contract.mockserver.coverage import behaviours
from verdict_contract.testing.mocks import live_mock, respx_mock

KEY = "future-bodies-key-0001"


def _served(mock_url: str, headers: dict[str, str]) -> dict[str, object]:
    answer = httpx.get(mock_url, headers=headers, timeout=10)
    assert answer.status_code == 200, answer.text
    body: dict[str, object] = answer.json()
    return body


def test_mint_serves_a_future_schema_and_extra_fields_without_allow_invalid() -> None:
    with respx_mock(settings=Settings(api_keys=(KEY,))) as mock:
        future = mock.mint(verdict="refused", schema=8, extra={"risk_score": 0.93})
        today = mock.mint(verdict="refused")
        body = _served(mock.url(future), mock.headers)
        assert body["schema"] == 8
        assert body["risk_score"] == 0.93
        assert body["verdict"] == "refused"
        plain = _served(mock.url(today), mock.headers)
        assert plain["schema"] == SCHEMA_VERSION
        assert "risk_score" not in plain
        met = [behaviours(entry) for entry in mock.journal]
    assert met == [
        ("verdict.refused.inconclusive", "schema.unexpected", "fields.extra"),
        ("verdict.refused.inconclusive",),
    ]


@pytest.mark.parametrize("schema", [-1, 0, 6, 8, 2**40])
def test_any_integer_is_a_schema(schema: int) -> None:
    with respx_mock() as mock:
        body = _served(mock.url(mock.mint(schema=schema)), mock.headers)
    assert body["schema"] == schema


def test_the_control_api_and_its_description_take_schema_and_extra() -> None:
    with live_mock(Settings(port=0, api_keys=(KEY,))) as mock:
        made = httpx.post(
            f"{mock.base_url}/_mock/sessions",
            json={"verdict": "disputed", "schema": 9, "extra": {"region": "eu-west"}},
            timeout=10,
        )
        assert made.status_code == 201, made.text
        assert made.json()["schema"] == 9
        body = _served(mock.url(made.json()["n"]), mock.headers)
    assert (body["schema"], body["region"], body["verdict"]) == (9, "eu-west", "disputed")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"schema": "8"}, "request.schema must be an integer"),
        ({"schema": 8.0}, "request.schema must be an integer"),
        ({"extra": ["a"]}, "request.extra must be an object of at most 32 undocumented fields"),
        ({"extra": {"summary": "x"}}, "'summary' is a field of the verdict; set it with fields"),
        ({"fields": {"sumary": "x"}}, "'sumary' is not a field of the verdict; did you mean"),
        ({"fields": {"risk": 1}}, "to serve an undocumented field on purpose, put it in extra"),
    ],
)
def test_the_control_api_refuses_a_bad_future_body_in_one_line(
    spec: dict[str, object], message: str
) -> None:
    with live_mock(Settings(port=0, api_keys=(KEY,))) as mock:
        answer = httpx.post(f"{mock.base_url}/_mock/sessions", json=spec, timeout=10)
    assert 400 <= answer.status_code < 500
    error = answer.json()["error"]["message"]
    assert message in error
    assert "\n" not in error


@pytest.mark.parametrize(
    "body",
    [b'{"extra": {"a": 1e400}}', b'{"extra": {"a": NaN}}', b'{"extra": {"a": [-Infinity]}}'],
)
def test_a_number_json_cannot_say_is_refused_not_served(body: bytes) -> None:
    """Python's JSON reader takes 1e400 (as inf), NaN and Infinity; a verdict holding one would
    be served as a body no JSON parser reads. 1e300 is a number JSON says."""
    with live_mock(Settings(port=0, api_keys=(KEY,))) as mock:
        url, sent = f"{mock.base_url}/_mock/sessions", {"Content-Type": "application/json"}
        answer = httpx.post(url, content=body, headers=sent, timeout=10)
        good = httpx.post(url, content=b'{"extra": {"a": 1e300}}', headers=sent, timeout=10)
        assert good.status_code == 201, good.text
        assert _served(mock.url(good.json()["n"]), mock.headers)["a"] == 1e300
    assert answer.status_code == 422, answer.text
    assert "request.extra must hold JSON values only (no NaN or Infinity)" in answer.text


def test_a_scenario_file_serves_future_bodies(tmp_path: Path) -> None:
    scenario = tmp_path / "future.yaml"
    scenario.write_text(
        "sessions:\n"
        "  next-schema:\n"
        "    verdict: insufficient\n"
        "    schema: 8\n"
        "  more-fields:\n"
        "    verdict: uncontradicted\n"
        "    extra:\n"
        "      model_version: m-2027\n",
        encoding="utf-8",
    )
    app = create_app(Settings(api_keys=(KEY,), scenario=scenario))
    headers = {"Authorization": f"Bearer {KEY}"}
    with running(app) as server:
        first = _served(f"{server.base_url}/e?n=next-schema", headers)
        second = _served(f"{server.base_url}/e?n=more-fields", headers)
    assert (first["schema"], "model_version" in first) == (8, False)
    assert (second["schema"], second["model_version"]) == (SCHEMA_VERSION, "m-2027")


@pytest.mark.parametrize(
    ("keyword", "meant"),
    [("verdcit", "verdict"), ("scehma", "schema"), ("extras", "extra"), ("sumary", "summary")],
)
def test_a_misspelt_mint_keyword_says_did_you_mean(keyword: str, meant: str) -> None:
    with respx_mock() as mock, pytest.raises(SpecError) as caught:
        mock.mint(**cast(dict[str, Any], {keyword: "x"}))
    assert f"did you mean {meant!r}?" in str(caught.value)
    assert "allow_invalid" not in str(caught.value)


def test_a_documented_field_is_still_overridden_and_checked() -> None:
    with respx_mock() as mock:
        body = _served(
            mock.url(mock.mint(verdict="disputed", summary="Hand-written.")),
            {"Authorization": f"Bearer {mock.api_key}"},
        )
        assert body["summary"] == "Hand-written."
        with pytest.raises(SpecError, match="allow_invalid"):  # a broken value: on purpose only
            mock.mint(summary=3)  # type: ignore[call-overload]
        assert mock.mint(allow_invalid=True, debug="on")  # a broken body stays possible


def test_verdict_kind_rows_are_the_seven_of_section_2_4() -> None:
    assert [row.id for row in VERDICT_OUTCOMES] == [
        "contradicted.conclusive",
        "contradicted.inconclusive",
        "refused.conclusive",
        "refused.inconclusive",
        "disputed",
        "uncontradicted",
        "insufficient",
    ]
    with respx_mock() as mock:
        for row in VERDICT_OUTCOMES:
            body = _served(mock.url(mock.mint(verdict=row)), mock.headers)
            assert VerdictRow(body["verdict"], body["conclusive"]) == row  # type: ignore[arg-type]
            (met, *_) = behaviours(mock.journal[-1])
            assert met == f"verdict.{row.id}"
            made = make_verdict(row)
            assert (made["verdict"], made["conclusive"]) == row


def test_a_row_and_a_conclusive_that_contradicts_it_are_refused_not_overridden() -> None:
    from verdict_contract.core.errors import InvalidVerdictError

    row = VerdictRow("contradicted", True)
    with respx_mock(settings=Settings(api_keys=("future-key-000001",))) as mock:
        with pytest.raises(SpecError, match="contradicts it"):
            mock.mint(verdict=row, conclusive=False)
        agreeing = mock.mint(verdict=row, conclusive=True)  # said twice, the same: taken
        assert httpx.get(mock.url(agreeing), headers=mock.headers).json()["conclusive"] is True
    with pytest.raises(InvalidVerdictError, match="contradicts it"):
        make_verdict(row, conclusive=False)
    assert make_verdict(VerdictRow("refused", False))["conclusive"] is False
