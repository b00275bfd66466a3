"""The control API under ``/_mock/``: minting sessions, scripts, journal, reset, health."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from tests.helpers import KEY, bearer, error_of, running
from verdict_contract import validate_verdict
from verdict_contract.core.rates import RateLimit
from verdict_contract.core.resources import verdict_schema
from verdict_contract.core.spec import SCHEMA_VERSION, VERDICTS
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.model.scenario import DEMO_SESSIONS


@pytest.fixture
def app() -> Flask:
    return create_app(Settings(api_keys=(KEY,), rate_limit=RateLimit(100, 3600.0)))


def mint(client: FlaskClient, body: object = None) -> dict[str, Any]:
    response = (
        client.post("/_mock/sessions")
        if body is None
        else client.post("/_mock/sessions", json=body)
    )
    assert response.status_code == 201, response.get_data(as_text=True)
    data = response.get_json()
    assert isinstance(data, dict)
    return data


def fetch(client: FlaskClient, n: str) -> TestResponse:
    return client.get("/e", query_string={"n": n}, headers=bearer())


def refused(response: TestResponse, status: int = 422) -> str:
    assert response.status_code == status
    body = error_of(response.status_code, response.content_type, response.get_data())
    message: str = body["message"]
    return message


# --- POST /_mock/sessions ---------------------------------------------------------------------


def test_mint_answers_201_with_the_session(client: FlaskClient) -> None:
    data = mint(client, {"verdict": "contradicted", "conclusive": True})
    assert data["verdict"] == "contradicted"
    assert data["conclusive"] is True
    assert data["url"] == f"/e?n={data['n']}"
    assert data["script"] == []
    assert data["always"] is None
    assert data["collected_at"] < data["expires_at"]
    body = json.loads(fetch(client, data["n"]).get_data())
    assert (body["verdict"], body["conclusive"]) == ("contradicted", True)
    assert validate_verdict(body, strict=True) == []


def test_mint_refuses_an_extra_field_named_with_a_part_of_a_key(client: FlaskClient) -> None:
    """The journal lists the names of a verdict's extra fields: none may hold a key."""
    for name in (KEY, f"x-{KEY[3:11]}"):
        response = client.post("/_mock/sessions", json={"extra": {name: 1}})
        assert "a field's name holds a part of a key" in refused(response)
    assert mint(client, {"extra": {"x-trace": KEY[3:10]}})["n"]  # 7 in a row; a value is served


def test_mint_with_an_empty_body(client: FlaskClient) -> None:
    data = mint(client)
    assert data["verdict"] in VERDICTS
    assert isinstance(data["conclusive"], bool)
    body = json.loads(fetch(client, data["n"]).get_data())
    assert (body["verdict"], body["conclusive"]) == (data["verdict"], data["conclusive"])


def test_mint_with_an_empty_object(client: FlaskClient) -> None:
    data = mint(client, {})
    assert fetch(client, data["n"]).status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        {"verdict": "refused"},
        {"conclusive": False},
        {"age_seconds": 10},
        {"script": [404]},
        {"fields": {"summary": "Custom summary."}},
        {"allow_invalid": False},
        {"verdict": "refused", "conclusive": True},
        {"verdict": "insufficient", "conclusive": False},
    ],
)
def test_every_field_is_optional(client: FlaskClient, body: dict[str, Any]) -> None:
    data = mint(client, body)
    for name in ("verdict", "conclusive"):
        if name in body:
            assert data[name] == body[name]
    if "fields" in body:
        response = fetch(client, data["n"])
        assert json.loads(response.get_data())["summary"] == "Custom summary."


def test_mint_conclusive_true_alone_always_works(client: FlaskClient) -> None:
    for _ in range(15):
        data = mint(client, {"conclusive": True})
        assert data["conclusive"] is True
        assert data["verdict"] in ("contradicted", "refused")
        assert json.loads(fetch(client, data["n"]).get_data())["conclusive"] is True


def test_mint_ids_are_unique(client: FlaskClient) -> None:
    assert len({mint(client, {"verdict": "refused"})["n"] for _ in range(20)}) == 20


def test_age_901_expires_at_once_and_890_is_served_now(client: FlaskClient) -> None:
    expired = mint(client, {"verdict": "refused", "age_seconds": 901})
    response = fetch(client, expired["n"])
    assert response.status_code == 404
    assert error_of(404, response.content_type, response.get_data())["code"] == (
        "session_not_found"
    )
    fresh = mint(client, {"verdict": "refused", "age_seconds": 890})
    assert json.loads(fetch(client, fresh["n"]).get_data())["verdict"] == "refused"


def test_age_shows_in_collected_and_expires_at(client: FlaskClient) -> None:
    data = mint(client, {"age_seconds": 600})
    assert data["collected_at"] is not None
    assert data["expires_at"] is not None


def test_script_is_consumed_in_order_then_the_normal_answer(
    client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    script: list[object] = [429, 401, 404, 500, 503, {"delay_ms": 50}, "malformed"]
    data = mint(client, {"verdict": "refused", "script": script})
    assert data["script"] == script
    n = data["n"]
    answers = [fetch(client, n) for _ in range(len(script) + 2)]
    statuses = [r.status_code for r in answers]
    assert statuses == [429, 401, 404, 500, 503, 200, 200, 200, 200]
    codes = [error_of(r.status_code, r.content_type, r.get_data())["code"] for r in answers[:5]]
    assert codes == [
        "rate_limited",
        "unauthorized",
        "session_not_found",
        "internal_error",
        "unavailable",
    ]
    assert answers[0].headers["Retry-After"] == "1"
    assert answers[1].headers["WWW-Authenticate"] == "Bearer"
    assert answers[4].headers["Retry-After"] == "1"
    assert slept == [0.05]
    full = answers[5].get_data()
    assert json.loads(full)["verdict"] == "refused"  # the delay step answers normally
    with pytest.raises(json.JSONDecodeError):
        json.loads(answers[6].get_data())
    assert full.startswith(answers[6].get_data())
    assert answers[7].get_data() == full
    assert answers[8].get_data() == full


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"verdict": "disputed", "conclusive": True}, "'disputed' verdict is never conclusive"),
        ({"verdict": "insufficient", "conclusive": True}, "never conclusive"),
        ({"verdict": "blocked"}, "request.verdict must be one of"),
        ({"script": [200]}, "request.script[0] must be one of the statuses"),
        ({"script": [429, "explode"]}, "request.script[1]"),
        ({"script": [{"delay_ms": 999999}]}, "request.script[0].delay_ms"),
        ({"script": "429"}, "request.script must be a list"),
        ({"always": 429}, "request.always is for named sessions"),
        ({"age_seconds": -5}, "request.age_seconds must be a number"),
        ({"colour": "red"}, "unknown field(s) ['colour']"),
        ({"fields": {"schema": 8}}, "the field overrides break the contract"),
        ([1, 2], "request must be a JSON object"),
        ("contradicted", "request must be a JSON object"),
        (42, "request must be a JSON object"),
    ],
)
def test_impossible_requests_are_422_naming_the_problem(
    client: FlaskClient, body: object, problem: str
) -> None:
    assert problem in refused(client.post("/_mock/sessions", json=body))


def test_allow_invalid_serves_a_broken_verdict_on_purpose(client: FlaskClient) -> None:
    data = mint(client, {"fields": {"schema": 8}, "allow_invalid": True})
    body = json.loads(fetch(client, data["n"]).get_data())
    assert body["schema"] == 8


def test_body_that_is_not_json_is_400(client: FlaskClient) -> None:
    response = client.post("/_mock/sessions", data="{not json", content_type="application/json")
    assert "must be a JSON object" in refused(response, 400)


def test_huge_age_is_422(client: FlaskClient) -> None:
    response = client.post(
        "/_mock/sessions",
        data='{"age_seconds": 1' + "0" * 400 + "}",
        content_type="application/json",
    )
    assert "age_seconds" in refused(response, 422)


# --- GET /_mock/sessions ----------------------------------------------------------------------


def test_named_sessions_are_listed(client: FlaskClient) -> None:
    listed = client.get("/_mock/sessions").get_json()
    assert [s["n"] for s in listed] == list(DEMO_SESSIONS)
    by_id = {s["n"]: s for s in listed}
    assert by_id["demo-rate-limited"]["always"] == 429
    assert by_id["demo-expired"]["expires_at"] is not None
    assert by_id["demo-contradicted"]["expires_at"] is None


def test_named_session_url_is_percent_encoded(tmp_path: Path) -> None:
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"sessions": {"team a&b": {"verdict": "refused"}}}))
    client = create_app(Settings(scenario=scenario, demo_sessions=False)).test_client()
    (entry,) = client.get("/_mock/sessions").get_json()
    assert parse_qs(urlsplit(entry["url"]).query)["n"] == ["team a&b"]


# --- journal, reset, health, openapi ----------------------------------------------------------


def test_get_and_delete_requests(client: FlaskClient) -> None:
    assert client.get("/_mock/requests").get_json() == []
    fetch(client, "demo-refused")
    fetch(client, "unknown")
    entries = client.get("/_mock/requests").get_json()
    assert [(e["n"], e["status"]) for e in entries] == [("demo-refused", 200), ("unknown", 404)]
    deleted = client.delete("/_mock/requests")
    assert deleted.status_code == 204
    assert deleted.get_data() == b""
    assert client.get("/_mock/requests").get_json() == []


def test_reset_clears_journal_counters_and_scripts() -> None:
    client = create_app(Settings(api_keys=(KEY,), rate_limit=RateLimit(5, 3600.0))).test_client()
    scripted = mint(client, {"verdict": "refused", "script": [503, 503]})["n"]
    assert fetch(client, scripted).status_code == 503
    assert [fetch(client, "demo-refused").status_code for _ in range(4)] == [200, 200, 200, 200]
    assert fetch(client, "demo-refused").status_code == 429  # budget of 5 used up
    assert len(client.get("/_mock/requests").get_json()) == 6

    response = client.post("/_mock/reset")
    assert response.status_code == 204

    assert client.get("/_mock/requests").get_json() == []
    assert fetch(client, scripted).status_code == 200  # the remaining 503 is gone
    assert fetch(client, "demo-refused").status_code == 200  # counters start again


def test_reset_gives_named_sessions_their_scripts_back(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("sessions:\n  flaky: {verdict: refused, script: [503]}\n")
    client = create_app(Settings(api_keys=(KEY,), scenario=scenario)).test_client()
    assert [fetch(client, "flaky").status_code for _ in range(2)] == [503, 200]
    assert client.post("/_mock/reset").status_code == 204
    assert [fetch(client, "flaky").status_code for _ in range(2)] == [503, 200]


def test_health(client: FlaskClient) -> None:
    fetch(client, "demo-refused")
    response = client.get("/_mock/health")
    assert response.status_code == 200
    assert response.get_json() == {
        "status": "ok",
        "schema": SCHEMA_VERSION,
        "rate_limit": "100/3600",
        "session_lifetime": 900.0,
        "journal_entries": 1,
        "script_bytes": 0,
        "default_key": None,  # the mock's key is its own (KEY), not the public default
        "scenario_problem": None,
        "state": "memory",
    }


def test_openapi_json_is_the_bundled_document(client: FlaskClient) -> None:
    response = client.get("/_mock/openapi.json")
    assert response.status_code == 200
    assert response.content_type == "application/json"
    document = response.get_json()
    assert document["openapi"].startswith("3.1")
    assert "get" in document["paths"]["/e"]
    assert document["components"]["schemas"]["Verdict"] == verdict_schema()


def test_control_endpoints_need_no_api_key(client: FlaskClient) -> None:
    assert client.get("/_mock/health").status_code == 200
    assert client.post("/_mock/sessions").status_code == 201


@pytest.mark.parametrize(
    ("method", "path"),
    [("PUT", "/_mock/sessions"), ("POST", "/_mock/health"), ("GET", "/_mock/reset")],
)
def test_wrong_method_on_control_is_json_405(client: FlaskClient, method: str, path: str) -> None:
    response = client.open(path, method=method)
    assert response.status_code == 405
    error_of(405, response.content_type, response.get_data())
    assert response.headers["Allow"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/_mock/health"),
        ("POST", "/_mock/sessions"),
        ("GET", "/_mock/sessions"),
        ("GET", "/_mock/requests"),
        ("DELETE", "/_mock/requests"),
        ("POST", "/_mock/reset"),
        ("GET", "/_mock/openapi.json"),
    ],
)
def test_control_off_means_404(method: str, path: str) -> None:
    on = create_app(Settings(api_keys=(KEY,))).test_client()
    off = create_app(Settings(api_keys=(KEY,), control=False)).test_client()
    assert on.open(path, method=method).status_code in (200, 201, 204)
    response = off.open(path, method=method)
    assert response.status_code == 404
    assert error_of(404, response.content_type, response.get_data())["code"] == "not_found"
    assert fetch(off, "demo-refused").status_code == 200  # /e itself still works


def test_control_answers_are_never_cached() -> None:
    client = create_app(Settings()).test_client()
    minted = client.post("/_mock/sessions", json={})
    assert minted.status_code == 201
    assert minted.headers["Cache-Control"] == "no-store"
    for path in ("/_mock/health", "/_mock/livez", "/_mock/readyz", "/_mock/metrics"):
        assert client.get(path).headers["Cache-Control"] == "no-store", path
    emptied = client.post("/_mock/reset")
    assert emptied.status_code == 204
    assert "Content-Type" not in emptied.headers


def test_absurdly_deep_json_is_a_clear_4xx() -> None:
    client = create_app(Settings()).test_client()
    response = client.post(
        "/_mock/sessions", data="[" * 100_000 + "]" * 100_000, content_type="application/json"
    )
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "bad_request"


def test_the_clock_ages_sessions_over_http_without_waiting() -> None:
    settings = Settings(api_keys=(KEY,), session_lifetime=900)
    with running(create_app(settings)) as server, httpx.Client(base_url=server.base_url) as http:
        n = http.post("/_mock/sessions", json={"age_seconds": 897}).json()["n"]
        assert http.get("/e", params={"n": n}, headers=bearer()).status_code == 200
        moved = http.post("/_mock/clock", json={"advance": 3.1})
        assert (moved.status_code, moved.json()) == (200, {"skew": 3.1})
        assert http.get("/e", params={"n": n}, headers=bearer()).status_code == 404
        assert http.post("/_mock/reset").status_code == 204  # reset sets the clock back
        assert http.post("/_mock/clock", json={"advance": 0}).json() == {"skew": 0.0}


@pytest.mark.parametrize(
    "body", [None, {}, {"advance": "3"}, {"advance": True}, {"advance": -1}, {"advance": 1e9}]
)
def test_a_wrong_clock_move_is_422_saying_what_to_send(client: FlaskClient, body: object) -> None:
    response = client.post("/_mock/clock", json=body)
    assert response.status_code == 422
    assert "advance" in error_of(422, response.content_type, response.data)["message"]
    assert client.post("/_mock/clock", json={"advance": 1}).json == {"skew": 1.0}


def test_a_page_elsewhere_cannot_move_the_clock() -> None:
    with running(create_app(Settings(api_keys=(KEY,)))) as server:
        response = httpx.post(
            f"{server.base_url}/_mock/clock",
            json={"advance": 900},
            headers={"Origin": "https://evil.example"},
        )
    assert response.status_code == 403


@pytest.mark.parametrize(
    ("path", "meant"),
    [
        ("/_mock/journal", "/_mock/requests"),  # the docs' word for it: the view's name
        ("/_mock/sesions", "/_mock/sessions"),
        ("/_mock/helth", "/_mock/health"),
        ("/_mock/mint", "/_mock/sessions"),
    ],
)
def test_a_misspelt_control_path_is_told_the_one_meant_and_the_whole_control_api(
    path: str, meant: str
) -> None:
    with running(create_app(Settings())) as server:
        response = httpx.get(server.base_url + path)
    assert response.status_code == 404
    message = error_of(404, response.headers["content-type"], response.content)["message"]
    assert f"did you mean {meant}?" in message
    for route in ("GET /_mock/health", "DELETE|GET /_mock/requests", "GET|POST /_mock/sessions"):
        assert route in message


def test_a_control_path_like_none_lists_the_control_api_without_a_guess() -> None:
    with running(create_app(Settings())) as server:
        response = httpx.get(server.base_url + "/_mock/zzzz")
    message = error_of(404, response.headers["content-type"], response.content)["message"]
    assert "did you mean" not in message
    assert "POST /_mock/reset" in message


def test_outside_the_control_api_a_404_names_the_api_and_with_control_off_says_so() -> None:
    with running(create_app(Settings())) as server:
        elsewhere = httpx.get(server.base_url + "/explain")
    assert "the API is GET /e?n=<session id>" in elsewhere.json()["error"]["message"]
    assert "control" not in elsewhere.json()["error"]["message"]
    with running(create_app(Settings(control=False))) as server:
        off = httpx.get(server.base_url + "/_mock/requests")
    assert off.status_code == 404
    assert "is off (--no-control)" in off.json()["error"]["message"]
