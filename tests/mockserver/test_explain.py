"""The mock's ``GET /e`` through Flask's test client: auth, lookup, errors, headers, journal."""

from __future__ import annotations

import base64
import json
import logging
import re
import time
from typing import Any, cast
from urllib.parse import quote

import httpx
import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from tests.helpers import KEY, OTHER_KEY, bearer, error_of, running, wait_until
from verdict_contract import validate_verdict
from verdict_contract.core.errors import StateUnavailable
from verdict_contract.core.rates import RateLimit
from verdict_contract.core.redact import KeyFinder, Secret
from verdict_contract.mockserver import DEFAULT_API_KEY, Settings, create_app
from verdict_contract.mockserver.explain import handle
from verdict_contract.mockserver.model.sessions import MAX_SESSION_ID_LENGTH
from verdict_contract.mockserver.store.primitives import Ask, Store
from verdict_contract.mockserver.web.answers import state_of


@pytest.fixture
def app() -> Flask:
    return create_app(Settings(api_keys=(KEY, OTHER_KEY)))


def get(client: FlaskClient, query: str, key: str | None = KEY) -> TestResponse:
    headers = bearer(key) if key is not None else {}
    return client.get(f"/e{query}", headers=headers)


def error(response: TestResponse) -> dict[str, Any]:
    assert response.headers.get("Cache-Control") == "no-store"
    return error_of(response.status_code, response.content_type, response.get_data())


def verdict(response: TestResponse) -> dict[str, Any]:
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.content_type == "application/json"
    body = json.loads(response.get_data())
    assert isinstance(body, dict)
    return body


# --- authentication ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": ""},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer "},
        {"Authorization": "Bearer    "},
        {"Authorization": f"Basic {KEY}"},
        {"Authorization": f"Token {KEY}"},
        {"Authorization": KEY},
        {"Authorization": f"Bearer{KEY}"},
        {"Authorization": "Bearer unknown-key-0000000000"},
        {"Authorization": f"Bearer {KEY}x"},
        {"Authorization": f"Bearer {KEY[:-1]}"},
        {"Authorization": f"Bearer {DEFAULT_API_KEY}"},  # not configured here
        {"X-Api-Key": KEY},
    ],
)
def test_missing_or_invalid_key_is_401(client: FlaskClient, headers: dict[str, str]) -> None:
    response = client.get("/e?n=demo-contradicted", headers=headers)
    assert response.status_code == 401
    assert error(response)["code"] == "unauthorized"
    assert response.headers["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize("header", [f"Bearer {KEY}", f"bearer {KEY}", f"  Bearer   {KEY}  "])
def test_valid_bearer_forms_are_accepted(client: FlaskClient, header: str) -> None:
    response = client.get("/e?n=demo-contradicted", headers={"Authorization": header})
    assert verdict(response)["verdict"] == "contradicted"


@pytest.mark.parametrize("param", ["api_key", "key", "access_token", "Authorization"])
@pytest.mark.parametrize("n", ["demo-contradicted", "never-heard-of-it"])
def test_key_as_query_parameter_is_401(client: FlaskClient, param: str, n: str) -> None:
    response = client.get("/e", query_string={"n": n, param: KEY})
    assert response.status_code == 401
    assert error(response)["code"] == "unauthorized"


@pytest.mark.parametrize(
    "query",
    ["?n=never-heard-of-it", "?n=demo-expired", "?n=%ff", "", "?n=a&n=b", "?n=demo-rate-limited"],
)
def test_auth_comes_before_lookup_and_validation(client: FlaskClient, query: str) -> None:
    assert get(client, query, key=None).status_code == 401
    assert get(client, query, key="wrong-key-000000000000").status_code == 401
    assert get(client, query, key=KEY).status_code != 401


def test_every_configured_key_is_accepted(client: FlaskClient) -> None:
    assert verdict(get(client, "?n=demo-refused", key=KEY))["verdict"] == "refused"
    assert verdict(get(client, "?n=demo-refused", key=OTHER_KEY))["verdict"] == "refused"


def test_default_key_works_with_default_settings() -> None:
    client = create_app().test_client()
    assert get(client, "?n=demo-contradicted", key=DEFAULT_API_KEY).status_code == 200
    assert get(client, "?n=demo-contradicted", key=KEY).status_code == 401


# --- demo sessions ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "expected", "conclusive"),
    [
        ("demo-contradicted", "contradicted", True),
        ("demo-contradicted-review", "contradicted", False),
        ("demo-refused", "refused", None),
        ("demo-disputed", "disputed", False),
        ("demo-uncontradicted", "uncontradicted", False),
        ("demo-insufficient", "insufficient", False),
    ],
)
def test_demo_sessions_serve_their_verdict(
    client: FlaskClient, n: str, expected: str, conclusive: bool | None
) -> None:
    body = verdict(get(client, f"?n={n}"))
    assert body["verdict"] == expected
    if conclusive is not None:
        assert body["conclusive"] is conclusive
    assert validate_verdict(body, strict=True) == []


def test_demo_expired_is_404(client: FlaskClient) -> None:
    response = get(client, "?n=demo-expired")
    assert response.status_code == 404
    assert error(response)["code"] == "session_not_found"


def test_demo_rate_limited_is_always_429(client: FlaskClient) -> None:
    for _ in range(3):
        response = get(client, "?n=demo-rate-limited")
        assert response.status_code == 429
        assert error(response)["code"] == "rate_limited"
        assert response.headers["Retry-After"] == "1"


def test_demo_malformed_is_always_a_200_that_is_not_json(client: FlaskClient) -> None:
    for _ in range(2):
        response = get(client, "?n=demo-malformed")
        assert response.status_code == 200
        with pytest.raises(json.JSONDecodeError):
            json.loads(response.get_data())


def test_demo_slow_waits_3_seconds_then_answers(
    client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    body = verdict(get(client, "?n=demo-slow"))
    assert slept == [3.0]
    assert body["verdict"] == "disputed"
    verdict(get(client, "?n=demo-slow"))
    assert slept == [3.0, 3.0]  # always, not only once


def test_demo_sessions_can_be_turned_off() -> None:
    client = create_app(Settings(api_keys=(KEY,), demo_sessions=False)).test_client()
    assert get(client, "?n=demo-contradicted").status_code == 404


# --- lookup and bad input ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "n", ["never-heard-of-it", "demo-contradicted-x", "DEMO-CONTRADICTED", "é"]
)
def test_unknown_session_is_404(client: FlaskClient, n: str) -> None:
    response = client.get("/e", query_string={"n": n}, headers=bearer())
    assert response.status_code == 404
    assert error(response)["code"] == "session_not_found"


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("", "is missing"),
        ("?m=demo-contradicted", "is missing"),
        ("?n=", "is empty"),
        ("?n", "is empty"),
        ("?n=demo-contradicted&n=demo-contradicted", "given 2 times"),
        ("?n=a&n=b&n=c", "given 3 times"),
        ("?n=%ff", "not valid UTF-8"),
        ("?n=demo%C3", "not valid UTF-8"),
        ("?n=demo-contradicted&x=%ff", "not valid UTF-8"),
        (f"?n={'x' * (MAX_SESSION_ID_LENGTH + 1)}", "longer than 256"),
    ],
)
def test_bad_session_id_is_400(client: FlaskClient, query: str, problem: str) -> None:
    response = get(client, query)
    assert response.status_code == 400
    body = error(response)
    assert body["code"] == "bad_request"
    assert problem in body["message"]


@pytest.mark.parametrize("escape", ["%00", "%09", "%0A", "%1f", "%7f"])
def test_control_characters_are_just_an_unknown_id(client: FlaskClient, escape: str) -> None:
    # The spec leaves the id's format open, and so does the OpenAPI document: a lookup, not a 400.
    response = get(client, f"?n=demo{escape}")
    assert response.status_code == 404
    assert error(response)["code"] == "session_not_found"


def test_session_id_length_limit_is_256(client: FlaskClient) -> None:
    assert get(client, f"?n={'x' * MAX_SESSION_ID_LENGTH}").status_code == 404
    assert get(client, f"?n={'x' * (MAX_SESSION_ID_LENGTH + 1)}").status_code == 400


def test_percent_encoded_utf8_and_other_parameters_are_fine(client: FlaskClient) -> None:
    assert get(client, "?n=caf%C3%A9").status_code == 404
    assert verdict(get(client, "?n=demo-refused&verbose=1"))["verdict"] == "refused"
    assert verdict(get(client, "?x=1&n=demo%2Drefused"))["verdict"] == "refused"


# --- methods and paths ------------------------------------------------------------------------


def test_head_answers_without_a_body(client: FlaskClient) -> None:
    full = get(client, "?n=demo-contradicted")
    head = client.head("/e?n=demo-contradicted", headers=bearer())
    assert head.status_code == 200
    assert head.get_data() == b""
    assert head.headers["Content-Length"] == str(len(full.get_data()))
    assert head.headers["Cache-Control"] == full.headers["Cache-Control"]
    missing = client.head("/e?n=never-heard-of-it", headers=bearer())
    assert missing.status_code == 404
    assert missing.get_data() == b""
    assert client.head("/e?n=demo-contradicted").status_code == 401


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_other_methods_on_e_are_405(client: FlaskClient, method: str) -> None:
    response = client.open("/e?n=demo-contradicted", method=method, headers=bearer())
    assert response.status_code == 405
    body = error(response)
    assert body["code"] == "method_not_allowed"
    assert method in body["message"]
    assert {m.strip() for m in response.headers["Allow"].split(",")} == {"GET", "HEAD"}


@pytest.mark.parametrize("path", ["/", "/x", "/e/", "/e/demo-contradicted", "/E", "/v1/e"])
def test_unknown_path_is_json_404(client: FlaskClient, path: str) -> None:
    response = client.get(f"{path}?n=demo-contradicted", headers=bearer())
    assert response.status_code == 404
    body = error(response)
    assert body["code"] == "not_found"
    assert "GET /e?n=" in body["message"]


@pytest.mark.parametrize(
    ("method", "url", "headers"),
    [
        ("GET", "/e?n=demo-contradicted", {}),
        ("GET", "/e?n=%ff", bearer()),
        ("GET", "/e?n=never", bearer()),
        ("GET", "/e?n=demo-expired", bearer()),
        ("GET", "/e?n=demo-rate-limited", bearer()),
        ("POST", "/e", bearer()),
        ("GET", "/nowhere", {}),
        ("TRACE", "/e", {}),
    ],
)
def test_every_non_200_is_a_json_error_that_is_not_stored(
    client: FlaskClient, method: str, url: str, headers: dict[str, str]
) -> None:
    response = client.open(url, method=method, headers=headers)
    assert response.status_code >= 400
    error(response)


# --- headers ----------------------------------------------------------------------------------


def test_verdict_is_cacheable_privately_and_for_good(client: FlaskClient) -> None:
    response = get(client, "?n=demo-contradicted")
    directives = {d.strip() for d in response.headers["Cache-Control"].split(",")}
    assert "private" in directives
    assert "immutable" in directives
    (max_age,) = [d for d in directives if d.startswith("max-age=")]
    assert int(max_age.partition("=")[2]) > 0
    assert "no-store" not in directives
    assert "Authorization" in response.headers.get("Vary", "")


def test_no_cors_headers_on_e(client: FlaskClient) -> None:
    origin = {"Origin": "https://shop.example"}
    responses = [
        client.get("/e?n=demo-contradicted", headers={**bearer(), **origin}),
        client.get("/e?n=demo-contradicted", headers=origin),
        client.options(
            "/e?n=demo-contradicted",
            headers={**origin, "Access-Control-Request-Method": "GET"},
        ),
    ]
    assert [r.status_code for r in responses] == [200, 401, 405]
    for response in responses:
        assert [
            name
            for name, _ in response.headers.items()
            if name.lower().startswith("access-control-")
        ] == []


# --- immutability -----------------------------------------------------------------------------


def test_same_id_gives_identical_bytes_across_calls(client: FlaskClient) -> None:
    first = get(client, "?n=demo-contradicted").get_data()
    assert all(get(client, "?n=demo-contradicted").get_data() == first for _ in range(5))


def test_two_apps_with_the_same_seed_give_identical_bytes() -> None:
    one = create_app(Settings(api_keys=(KEY,), seed="shared")).test_client()
    two = create_app(Settings(api_keys=(KEY,), seed="shared")).test_client()
    other = create_app(Settings(api_keys=(KEY,), seed="different")).test_client()
    for n in ("demo-contradicted", "demo-refused", "demo-insufficient"):
        body = get(one, f"?n={n}").get_data()
        assert get(two, f"?n={n}").get_data() == body
        assert get(other, f"?n={n}").get_data() != body
    minted = one.post("/_mock/sessions", json={"verdict": "disputed"}).get_json()["n"]
    assert get(two, f"?n={minted}").get_data() == get(one, f"?n={minted}").get_data()
    assert get(other, f"?n={minted}").status_code == 404  # another seed signs with another secret


# --- rate limit -------------------------------------------------------------------------------


def test_rate_limit_is_per_key() -> None:
    app = create_app(Settings(api_keys=(KEY, OTHER_KEY), rate_limit=RateLimit(3, 60.0)))
    client = app.test_client()
    for _ in range(5):  # invalid keys never reach the limiter
        assert get(client, "?n=demo-refused", key="wrong-key-000000000000").status_code == 401
    assert [get(client, "?n=demo-refused").status_code for _ in range(3)] == [200, 200, 200]
    limited = get(client, "?n=demo-refused")
    assert limited.status_code == 429
    assert error(limited)["code"] == "rate_limited"
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    assert get(client, "?n=demo-refused", key=OTHER_KEY).status_code == 200
    assert get(client, "?n=never-heard-of-it").status_code == 429  # limited before lookup


# --- accept_any_session -----------------------------------------------------------------------


def test_accept_any_session_is_off_by_default(client: FlaskClient) -> None:
    assert get(client, "?n=refused-42").status_code == 404


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        ("refused-42", "refused"),
        ("contradicted-1", "contradicted"),
        ("insufficient-abc", "insufficient"),
        ("disputed", "disputed"),
    ],
)
def test_accept_any_session_serves_unknown_ids(n: str, expected: str) -> None:
    client = create_app(Settings(api_keys=(KEY,), accept_any_session=True)).test_client()
    body = verdict(get(client, f"?n={n}"))
    assert body["verdict"] == expected
    assert validate_verdict(body, strict=True) == []


def test_accept_any_session_still_needs_a_key_and_serves_any_word() -> None:
    client = create_app(Settings(api_keys=(KEY,), accept_any_session=True)).test_client()
    assert get(client, "?n=refused-42", key=None).status_code == 401
    assert verdict(get(client, "?n=whatever-7"))["verdict"] in {
        "contradicted",
        "refused",
        "disputed",
        "uncontradicted",
        "insufficient",
    }
    assert get(client, "?n=demo-expired").status_code == 404  # named sessions still win


# --- journal ----------------------------------------------------------------------------------


def test_journal_records_calls_with_the_key_masked(client: FlaskClient) -> None:
    get(client, "?n=demo-contradicted")
    client.get("/e", query_string={"n": "demo-refused", "api_key": KEY})
    client.get("/e", query_string={"n": "never", "key": KEY, "token": KEY}, headers=bearer())
    client.get("/e?n=demo-contradicted", headers={"Authorization": KEY})
    raw = client.get("/_mock/requests").get_data(as_text=True)
    assert KEY not in raw
    assert KEY[:-4] not in raw
    entries = json.loads(raw)
    assert [(e["n"], e["status"], e["outcome"]) for e in entries] == [
        ("demo-contradicted", 200, "verdict"),
        ("demo-refused", 401, "unauthorized"),
        ("never", 404, "unknown"),
        ("demo-contradicted", 401, "unauthorized"),
    ]
    assert entries[0]["authorization"] == f"Bearer …{KEY[-4:]}"
    assert entries[1]["query"] == {"api_key": [f"…{KEY[-4:]}"]}
    assert entries[2]["query"] == {"key": [f"…{KEY[-4:]}"], "token": [f"…{KEY[-4:]}"]}
    assert entries[3]["authorization"] == f"…{KEY[-4:]}"


def test_journal_masks_a_key_sent_as_a_bare_query_parameter(client: FlaskClient) -> None:
    client.get(f"/e?n=demo-contradicted&{KEY}")
    assert KEY not in client.get("/_mock/requests").get_data(as_text=True)


def test_journal_records_wrong_paths_and_methods_but_not_control_calls(
    client: FlaskClient,
) -> None:
    client.get("/nowhere?n=demo-refused")
    client.post("/e?n=demo-refused")
    client.get("/_mock/health")
    client.get("/_mock/nowhere")
    get(client, "?n=demo-refused")
    entries = client.get("/_mock/requests").get_json()
    got = [(e["method"], e["path"], e["n"], e["status"], e["outcome"]) for e in entries]
    assert got == [
        ("GET", "/nowhere", "demo-refused", 404, "not_found"),
        ("POST", "/e", "demo-refused", 405, "method_not_allowed"),
        ("GET", "/e", "demo-refused", 200, "verdict"),
    ]


def test_a_key_sent_as_a_plain_name_or_as_n_is_masked_in_the_journal() -> None:
    secret = "team_shared_secret"
    app = create_app(Settings(api_keys=(secret,)))
    client = app.test_client()
    client.get(f"/e?n=x&{secret}")
    client.get(f"/e?n={secret}")
    journal = json.dumps(client.get("/_mock/requests").get_json(), ensure_ascii=False)
    assert secret not in journal
    assert "…cret" in journal


def test_a_key_holding_a_slash_or_a_control_token_is_masked_wherever_it_was_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A key that holds a "/" spans path segments; a control token is a secret too."""
    key, token = "ab/cdefghij/klmnopq/rstu", "control-token-0123456789"
    settings = Settings(api_keys=(key,), control_token=Secret(token), access_log=True)
    with (
        caplog.at_level(logging.INFO, logger="mockserver.access"),
        running(create_app(settings)) as server,
        httpx.Client(base_url=server.base_url, timeout=10) as http,
    ):
        http.get(f"/e/{key}")
        http.get(f"/e/{quote(key, safe='')}.json")
        http.get("/e", params={"n": token}, headers={"Authorization": f"Bearer {key}"})
        http.get(f"/x/{token}")
        journal = http.get("/_mock/requests", headers={"X-Mock-Token": token}).json()
        assert wait_until(lambda: len(caplog.records) >= 5)
    shown = json.dumps(journal, ensure_ascii=False) + caplog.text
    for secret in (key, quote(key, safe=""), token, "cdefghij", "0123456789"):
        assert secret not in shown
    assert [entry["n"] for entry in journal if entry["path"] == "/e"] == ["…6789"]


def test_a_part_or_an_encoding_of_a_key_is_masked_wherever_it_was_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Any 8 characters of a key in a row, or its base64 or hex, are masked as the key is (in
    ``n``, a name, a path; the journal and the log); an id holding 7 of them is shown as sent."""
    key = "team-key-0123456789abcdef"
    parts = [
        key[:-4],
        f"x{key[5:13]}y",
        base64.b64encode(key.encode()).decode(),
        key.encode().hex(),
        "".join(f"%{byte:02X}" for byte in key[3:12].encode()),  # sent encoded twice
        "".join(f"\\u{ord(char):04x}" for char in key[2:12]),  # JSON-escaped
    ]
    plain = f"{key[:7]}-demo-id"
    settings = Settings(api_keys=(key,), access_log=True)
    with (
        caplog.at_level(logging.INFO, logger="mockserver.access"),
        running(create_app(settings)) as server,
        httpx.Client(base_url=server.base_url, timeout=10) as http,
    ):
        for part in parts:
            http.get("/e", params={"n": part}, headers=bearer(key))
            http.get(f"/nowhere/{part}", params={part.replace("-", "_"): "1"})
        http.get("/e", params={"n": plain}, headers=bearer(key))
        journal = http.get("/_mock/requests").json()
        assert wait_until(lambda: len(caplog.records) >= 2 * len(parts) + 2)
    shown = json.dumps(journal, ensure_ascii=False) + caplog.text
    for part in parts:
        assert part not in shown
        assert part.replace("-", "_") not in shown
    assert [entry["n"] for entry in journal if entry["path"] == "/e"][-1] == plain
    assert plain in caplog.text
    escaped = re.compile(r"(?:\\\\|\\x5c|\\)u([0-9a-f]{4})")  # as JSON, the log, or sent
    read = escaped.sub(lambda found: chr(int(found[1], 16)), shown)
    assert not KeyFinder.of([key.encode()], encoded=False).finds(read)


def test_an_id_that_reads_as_a_lone_surrogate_escaped_is_answered_and_journaled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``\\ud800`` sent as text reads, once its JSON escape is undone, as a lone surrogate: a
    value journals and logs look at, not an error reading the request."""
    settings = Settings(api_keys=("team-key-0123456789abcdef",), access_log=True)
    with (
        caplog.at_level(logging.INFO),
        running(create_app(settings)) as server,
        httpx.Client(base_url=server.base_url, timeout=10) as http,
    ):
        answer = http.get("/e", params={"n": "x\\ud800"}, headers=bearer(settings.api_keys[0]))
        journal = http.get("/_mock/requests").json()
    assert answer.status_code == 404
    assert [entry["n"] for entry in journal] == ["x\\ud800"]
    assert "unexpected error" not in caplog.text


class _Down:
    """A store whose every round trip fails, as a Redis that is down."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def run(self, ask: Ask) -> Ask:
        raise StateUnavailable("redis://down", "did not answer")

    def append(self, entry: object) -> bool:
        raise StateUnavailable("redis://down", "did not answer")


@pytest.mark.parametrize(
    ("query", "status"),
    [(b"", 400), (b"n=", 400), (b"n=a&n=b", 400), (b"n=%ff", 400), (b"n=demo-contradicted", 503)],
)
def test_a_malformed_request_is_a_400_while_the_store_is_down(query: bytes, status: int) -> None:
    state = state_of(create_app(Settings(api_keys=(KEY,))))
    state.store = cast(Store, _Down(state.store))
    assert handle(state, "GET", query, f"Bearer {KEY}").status == status
