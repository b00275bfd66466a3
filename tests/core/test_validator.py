"""The validator: schema constraints as violations, the combined list, and robustness."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from tests.bodies import contradicted
from verdict_contract import Violation, assert_valid_verdict, unknown_properties, validate_verdict
from verdict_contract.core.resources import verdict_schema
from verdict_contract.core.validator import _conforms

REQUIRED = [
    "schema",
    "provenance",
    "verdict",
    "conclusive",
    "summary",
    "contradicting_families",
    "families",
    "signals",
]


@pytest.mark.parametrize("field", REQUIRED)
def test_every_top_level_field_is_required(field: str) -> None:
    body = contradicted()
    del body[field]
    violations = validate_verdict(body)
    assert [(v.rule, v.path) for v in violations if v.rule.startswith("json_schema")] == [
        ("json_schema.required", "")
    ]
    assert field in violations[0].message


@pytest.mark.parametrize(
    ("parent", "field"),
    [
        ("provenance", "build"),
        ("families", "measured"),
        ("families", "reporting"),
    ],
)
def test_nested_fields_are_required(parent: str, field: str) -> None:
    body = contradicted()
    del body[parent][field]
    assert [(v.rule, v.path) for v in validate_verdict(body)] == [
        ("json_schema.required", f"/{parent}")
    ]


@pytest.mark.parametrize("field", ["id", "tier", "headline"])
def test_signal_fields_are_required(field: str) -> None:
    body = contradicted()
    del body["signals"][0][field]
    rules = {v.rule for v in validate_verdict(body)}
    assert "json_schema.required" in rules


@pytest.mark.parametrize("body", [[1, 2], None, "x", 42], ids=["list", "null", "text", "number"])
def test_a_body_that_is_no_object_is_one_violation(body: object) -> None:
    """Each subschema that reads the top finds it is no object: that is said once."""
    (violation,) = validate_verdict(body)
    assert violation.rule == "json_schema.type"
    assert violation.path == ""  # the top (its JSON Pointer)


def test_each_field_missing_at_the_top_is_its_own_violation() -> None:
    missing = validate_verdict({})
    assert len(missing) == len(verdict_schema()["required"]) > 1
    assert len({violation.message for violation in missing}) == len(missing)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("schema", "7"),
        ("schema", True),
        ("schema", 7.5),
        ("conclusive", "true"),
        ("conclusive", 1),
        ("summary", 3),
        ("verdict", None),
        ("signals", {}),
        ("families", []),
        ("contradicting_families", "network-geometry"),
        ("provenance", "b1"),
    ],
)
def test_types_are_exact(path: str, value: Any) -> None:
    body = contradicted()
    body[path] = value
    violations = validate_verdict(body)
    assert ("json_schema.type", f"/{path}") in {(v.rule, v.path) for v in violations}


def test_counts_are_integers_not_bools() -> None:
    body = contradicted()
    body["families"]["reporting"] = True
    assert ("json_schema.type", "/families/reporting") in {
        (v.rule, v.path) for v in validate_verdict(body)
    }


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda b: b.update(verdict="maybe"), "/verdict"),
        (lambda b: b["signals"][0].update(tier="strong"), "/signals/0/tier"),
        (
            lambda b: b.update(contradicting_families=["network-geometry", "dns"]),
            "/contradicting_families/1",
        ),
    ],
)
def test_enums(mutate: Any, path: str) -> None:
    body = contradicted()
    mutate(body)
    assert ("json_schema.enum", path) in {(v.rule, v.path) for v in validate_verdict(body)}


def test_version_mismatch_is_named_as_such() -> None:
    body = contradicted()
    body["schema"] = 8
    (violation,) = validate_verdict(body)
    assert violation.rule == "schema_version"
    assert "service speaks schema 8" in violation.message
    assert "checks schema 7" in violation.message


def test_version_mismatch_leads_the_list() -> None:
    body = contradicted()
    body.update(schema=6, verdict="nope")
    assert validate_verdict(body)[0].rule == "schema_version"


def test_violation_reads_received_and_documented() -> None:
    body = contradicted()
    body["verdict"] = "maybe"
    text = str(validate_verdict(body)[0])
    assert "/verdict" in text
    assert 'received:   "maybe"' in text
    assert "documented: enum:" in text


def test_assert_valid_verdict_lists_every_violation() -> None:
    body = contradicted()
    body.update(summary="", schema=9)
    with pytest.raises(AssertionError) as info:
        assert_valid_verdict(body)
    message = str(info.value)
    assert "2 violations" in message
    assert "schema_version" in message
    assert "summary_is_non_empty" in message


def test_assert_valid_verdict_passes_silently() -> None:
    assert_valid_verdict(contradicted(), strict=True)


def test_unknown_properties_reports_nested_additions() -> None:
    body = contradicted()
    body["provenance"]["region"] = "eu"
    body["signals"][1]["weight"] = 2
    assert [v.path for v in unknown_properties(body)] == ["/provenance/region", "/signals/1/weight"]
    assert unknown_properties(contradicted()) == []


def test_long_values_are_cut_in_messages() -> None:
    body = contradicted()
    body["verdict"] = "x" * 10_000
    violation = validate_verdict(body)[0]
    assert len(violation.received) <= 80
    assert len(violation.message) <= 120


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)

field_values = st.fixed_dictionaries(
    {},
    optional={
        "schema": st.sampled_from([7, 8, "7", True, 7.0, None]),
        "provenance": st.sampled_from([{"build": "b"}, {"build": ""}, {}, "b", None]),
        "verdict": st.sampled_from(
            ["contradicted", "refused", "disputed", "uncontradicted", "insufficient", "other", 3]
        ),
        "conclusive": st.sampled_from([True, False, 0, "false"]),
        "summary": st.sampled_from(["s", "", 1]),
        "contradicting_families": st.lists(
            st.sampled_from(["network-geometry", "transport-stack", "compute", "dns", 4]),
            max_size=3,
        ),
        "families": st.fixed_dictionaries(
            {},
            optional={
                "measured": st.integers(-2, 8) | st.booleans(),
                "reporting": st.integers(-2, 8),
            },
        ),
        "signals": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "id": st.sampled_from(["geo.a", "stack.b", "x", "geo.", "tls.c", 5]),
                    "tier": st.sampled_from(
                        ["absolute", "composite", "weak", "conditional", "top"]
                    ),
                    "headline": st.sampled_from(["h", 2]),
                },
            )
            | json_values,
            max_size=3,
        ),
    },
)


@settings(max_examples=300, deadline=None)
@given(json_values | field_values)
def test_validator_never_raises(body: object) -> None:
    violations = validate_verdict(body, strict=True)
    assert all(isinstance(v, Violation) for v in violations)
    json.dumps([str(v) for v in violations])


@settings(max_examples=300, deadline=None)
@given(field_values)
def test_fast_path_agrees_with_jsonschema(body: dict[str, Any]) -> None:
    # The compiled check may only short-cut bodies jsonschema also accepts.
    if _conforms(body):
        assert Draft202012Validator(verdict_schema()).is_valid(body)


@settings(max_examples=300, deadline=None)
@given(field_values)
def test_whatever_jsonschema_rejects_the_validator_reports(body: dict[str, Any]) -> None:
    if not Draft202012Validator(verdict_schema()).is_valid(body):
        assert validate_verdict(body) != []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("schema", 8.0),
        ("families", {"measured": 100.0, "reporting": 50.0}),
        ("families", {"measured": -1.0, "reporting": -1.0}),
    ],
)
def test_integral_floats_are_judged_like_integers(path: str, value: Any) -> None:
    body = contradicted()
    body[path] = value
    assert validate_verdict(body) != []


@pytest.mark.parametrize("sid", ["geo.a\tb", "geo.a\u2028b", "geo. a"])
def test_white_space_in_a_signal_id_is_reported(sid: str) -> None:
    body = contradicted()
    body["signals"][0]["id"] = sid
    assert [v.rule for v in validate_verdict(body)] == ["signal_id_dot_namespaced"]
