"""mockserver.sessions: session specs, script steps, signed session ids and expiry."""

from __future__ import annotations

import json
import random
import string
from typing import Any, get_args

import pytest

from verdict_contract.mockserver.model.sessions import (
    FAULTS,
    MAX_DELAY_MS,
    MAX_SESSION_ID_LENGTH,
    SCRIPT_STATUSES,
    DelayStep,
    FaultName,
    ScriptStatus,
    Session,
    SessionCodec,
    SessionSpec,
    SpecError,
    StatusStep,
    Step,
    parse_spec,
    parse_step,
)

NOW = 1_800_000_000.0
LIFETIME = 900.0


# --- parse_step -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (401, Step(status=401)),
        (404, Step(status=404)),
        (429, Step(status=429)),
        (500, Step(status=500)),
        (503, Step(status=503)),
        ("reset", Step(fault="reset")),
        ("truncated", Step(fault="truncated")),
        ("malformed", Step(fault="malformed")),
        ({"delay_ms": 0}, Step(delay_ms=0)),
        ({"delay_ms": MAX_DELAY_MS}, Step(delay_ms=MAX_DELAY_MS)),
        ({"delay_ms": 5, "status": 429}, Step(status=429, delay_ms=5)),  # a slow 429
        ({"status": 418, "delay_ms": 5, "headers": {}}, Step(status=418, delay_ms=5, headers=())),
    ],
)
def test_parse_step_accepts(raw: object, expected: Step) -> None:
    step = parse_step(raw, "script[0]")
    assert step == expected
    assert step.to_json() == raw  # the control API shows a step as it was sent


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (200, "script[3] must be one of the statuses"),
        (True, "script[3] must be one of the statuses"),
        (429.0, "got 429.0"),
        ("RESET", 'got "RESET"'),
        ("slow", "one of the faults"),
        ([429], "got [429]"),
        (None, "got null"),
        ({"delay_ms": -1}, "script[3].delay_ms must be an integer from 0 to 60000"),
        ({"delay_ms": MAX_DELAY_MS + 1}, "script[3].delay_ms must be an integer"),
        ({"delay_ms": True}, "script[3].delay_ms must be an integer"),
        ({"delay_ms": "50"}, "script[3].delay_ms must be an integer"),
        ({"delay_ms": 1.5}, "script[3].delay_ms must be an integer"),
        ({"delay_ms": -5, "status": 429}, "script[3].delay_ms must be an integer from 0"),
        ({}, '{"delay_ms": N}'),
    ],
)
def test_parse_step_refuses(raw: object, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_step(raw, "script[3]")
    assert message in str(caught.value)


def test_parse_step_error_cuts_a_long_value() -> None:
    with pytest.raises(SpecError) as caught:
        parse_step("x" * 500, "always")
    assert len(str(caught.value)) < 400
    assert "xxxxx" in str(caught.value)


# --- parse_spec -------------------------------------------------------------------------------


def test_parse_spec_empty_object_leaves_everything_to_the_generator() -> None:
    assert parse_spec({}) == SessionSpec()


def test_parse_spec_full() -> None:
    spec = parse_spec(
        {
            "verdict": "refused",
            "conclusive": True,
            "age_seconds": 12,
            "script": [429, "reset", {"delay_ms": 5}],
            "always": 503,
            "fields": {"summary": "Custom.", "schema": 7},
            "allow_invalid": True,
        }
    )
    assert spec.verdict == "refused"
    assert spec.conclusive is True
    assert spec.age_seconds == 12.0
    assert isinstance(spec.age_seconds, float)
    assert spec.script == (Step(status=429), Step(fault="reset"), Step(delay_ms=5))
    assert spec.always == Step(status=503)
    assert spec.fields == '{"schema":7,"summary":"Custom."}'  # canonical: sorted, compact
    assert spec.overrides == {"schema": 7, "summary": "Custom."}
    assert spec.allow_invalid is True
    hash(spec)  # the generator caches by spec, so it must stay hashable


def test_parse_spec_same_fields_in_any_order_give_equal_specs() -> None:
    first = parse_spec({"fields": {"summary": "s", "families": {"measured": 5, "reporting": 4}}})
    second = parse_spec({"fields": {"families": {"reporting": 4, "measured": 5}, "summary": "s"}})
    assert first == second
    assert hash(first) == hash(second)


@pytest.mark.parametrize("verdict", ["contradicted", "refused"])
def test_parse_spec_conclusive_verdicts_may_be_conclusive(verdict: str) -> None:
    assert parse_spec({"verdict": verdict, "conclusive": True}).conclusive is True


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "session must be a JSON object"),
        ("contradicted", "session must be a JSON object"),
        (None, "session must be a JSON object"),
        ({"verdikt": "refused"}, "unknown field(s) ['verdikt']"),
        ({"verdict": "blocked"}, "session.verdict must be one of"),
        ({"verdict": "Contradicted"}, "got 'Contradicted'"),
        ({"conclusive": "true"}, "session.conclusive must be true or false"),
        ({"conclusive": 1}, "session.conclusive must be true or false"),
        ({"verdict": "disputed", "conclusive": True}, "'disputed' verdict is never conclusive"),
        ({"verdict": "uncontradicted", "conclusive": True}, "never conclusive"),
        ({"verdict": "insufficient", "conclusive": True}, "never conclusive"),
        ({"age_seconds": -1}, "session.age_seconds must be a number of seconds from 0 to"),
        ({"age_seconds": 1e12}, "session.age_seconds must be a number of seconds from 0 to"),
        ({"script": [429] * 101}, "session.script must be a list of at most 100 steps"),
        ({"age_seconds": True}, "session.age_seconds must be a number"),
        ({"age_seconds": "901"}, "session.age_seconds must be a number"),
        ({"age_seconds": float("inf")}, "session.age_seconds must be a number"),
        ({"age_seconds": float("nan")}, "session.age_seconds must be a number"),
        ({"script": 429}, "session.script must be a list"),
        ({"script": [429, 200]}, "session.script[1] must be one of the statuses"),
        ({"always": "explode"}, "session.always must be one of the statuses"),
        ({"fields": ["schema"]}, "session.fields must be an object"),
        ({"allow_invalid": "yes"}, "session.allow_invalid must be true or false"),
    ],
)
def test_parse_spec_refuses(raw: object, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(raw)
    assert message in str(caught.value)


def test_parse_spec_names_where_the_problem_is() -> None:
    with pytest.raises(SpecError, match=r"^sessions\.blocked\.verdict must be one of"):
        parse_spec({"verdict": "nope"}, "sessions.blocked")


def test_parse_spec_disputed_without_conclusive_is_fine() -> None:
    assert parse_spec({"verdict": "disputed", "conclusive": False}).conclusive is False
    assert parse_spec({"verdict": "disputed"}).conclusive is None


def test_spec_error_is_a_value_error() -> None:
    assert issubclass(SpecError, ValueError)


# --- SessionCodec -----------------------------------------------------------------------------


def _incompressible(length: int) -> str:
    rng = random.Random(7)
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(length))


@pytest.fixture
def codec() -> SessionCodec:
    return SessionCodec("test-secret")


def test_mint_then_read_gives_the_session_back(codec: SessionCodec) -> None:
    spec = parse_spec(
        {
            "verdict": "contradicted",
            "conclusive": False,
            "age_seconds": 30,
            "fields": {"summary": "Custom."},
            "allow_invalid": True,
        }
    )
    minted = codec.mint(spec, now=NOW)
    assert minted.collected_at == NOW - 30
    read = codec.read(minted.id)
    assert read is not None
    assert read.id == minted.id
    assert read.spec.verdict == "contradicted"
    assert read.spec.conclusive is False
    assert read.spec.fields == spec.fields
    assert read.spec.allow_invalid is True
    assert read.collected_at == pytest.approx(NOW - 30, abs=1e-3)


def test_read_of_a_plain_spec_leaves_everything_unset(codec: SessionCodec) -> None:
    minted = codec.mint(SessionSpec(), now=NOW)
    read = codec.read(minted.id)
    assert read is not None
    assert read.spec == SessionSpec()


def test_minted_ids_are_url_safe_and_within_the_length_limit(codec: SessionCodec) -> None:
    allowed = set(string.ascii_letters + string.digits + "-_.")
    session = codec.mint(parse_spec({"verdict": "refused", "conclusive": True}))
    assert set(session.id) <= allowed
    assert len(session.id) <= MAX_SESSION_ID_LENGTH


def test_every_mint_gives_a_new_id(codec: SessionCodec) -> None:
    ids = {codec.mint(SessionSpec(), now=NOW).id for _ in range(50)}
    assert len(ids) == 50


def test_the_script_is_not_carried_in_the_id(codec: SessionCodec) -> None:
    minted = codec.mint(parse_spec({"script": [429]}), now=NOW)
    read = codec.read(minted.id)
    assert read is not None
    assert minted.spec.script == (Step(status=429),)
    assert read.spec.script == ()


def test_tampered_id_reads_as_none(codec: SessionCodec) -> None:
    session_id = codec.mint(parse_spec({"verdict": "refused"}), now=NOW).id
    assert codec.read(session_id) is not None
    payload, _, signature = session_id.rpartition(".")
    # the first character of the base64 signature always carries data bits (the last may not)
    flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
    assert codec.read(f"{payload}.{flipped}") is None
    other_payload = ("A" if payload[0] != "A" else "B") + payload[1:]
    assert codec.read(f"{other_payload}.{signature}") is None
    # a different payload under the original signature
    forged = json.dumps({"t": NOW, "r": "00000000", "v": "contradicted", "c": True})
    assert codec.read(f"{forged}.{signature}") is None


def test_id_of_another_secret_reads_as_none(codec: SessionCodec) -> None:
    session_id = SessionCodec("another-secret").mint(SessionSpec(), now=NOW).id
    assert SessionCodec("another-secret").read(session_id) is not None
    assert codec.read(session_id) is None


@pytest.mark.parametrize(
    "garbage", ["", "demo-contradicted", ".", "a.b", "x" * 300, "eyJ0Ijoi.\x00", "é.ü"]
)
def test_garbage_reads_as_none(codec: SessionCodec, garbage: str) -> None:
    assert codec.read(garbage) is None


def test_overrides_that_make_the_id_too_long_raise_spec_error(codec: SessionCodec) -> None:
    fits = parse_spec({"fields": {"summary": _incompressible(60)}})
    assert len(codec.mint(fits, now=NOW).id) <= MAX_SESSION_ID_LENGTH
    too_long = parse_spec({"fields": {"summary": _incompressible(300)}})
    with pytest.raises(SpecError, match=f"at most {MAX_SESSION_ID_LENGTH} characters"):
        codec.mint(too_long, now=NOW)


# --- expiry -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("age", "expired"),
    [(0, False), (890, False), (899.5, False), (900, True), (901, True), (10_000, True)],
)
def test_minted_session_expires_after_its_lifetime(
    codec: SessionCodec, age: float, expired: bool
) -> None:
    minted = codec.mint(SessionSpec(age_seconds=age), now=NOW)
    read = codec.read(minted.id)
    assert read is not None
    assert minted.expired(NOW, LIFETIME) is expired
    assert read.expired(NOW, LIFETIME) is expired


def test_a_session_ages_into_expiry(codec: SessionCodec) -> None:
    session = codec.mint(SessionSpec(age_seconds=890), now=NOW)
    assert not session.expired(NOW + 9, LIFETIME)
    assert session.expired(NOW + 11, LIFETIME)


def test_session_without_collection_time_never_expires() -> None:
    session = Session("named", SessionSpec(), None)
    assert not session.expired(NOW + 10**9, LIFETIME)


def test_overrides_property_is_a_fresh_dict() -> None:
    spec = parse_spec({"fields": {"summary": "S."}})
    overrides: dict[str, Any] = spec.overrides
    overrides["summary"] = "changed"
    assert spec.overrides == {"summary": "S."}
    assert SessionSpec().overrides == {}


def test_the_step_types_name_what_the_schema_allows() -> None:
    assert set(get_args(FaultName)) == FAULTS
    assert set(get_args(ScriptStatus)) == SCRIPT_STATUSES
    assert set(DelayStep.__required_keys__) == {"delay_ms"}
    assert set(StatusStep.__annotations__) == {"status", "headers", "delay_ms"}


@pytest.mark.parametrize(
    "step",
    [Step(status=429, delay_ms=5), Step(status=418, delay_ms=5, headers=()), Step(delay_ms=7)],
)
def test_a_delayed_step_reads_back_as_itself(step: Step) -> None:
    assert parse_step(step.to_json(), "stored step") == step
