"""The JSON Schema file and the code state the same facts."""

from __future__ import annotations

import re
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from verdict_contract import RULES
from verdict_contract.core.resources import bundled_openapi, verdict_schema
from verdict_contract.core.spec import (
    FAMILIES,
    KNOWN_PREFIXES,
    NEVER_CONCLUSIVE,
    SCHEMA_VERSION,
    SIGNAL_ID_PATTERN,
    TIERS,
    VERDICTS,
    family_of,
    is_api_call,
)


def _props() -> dict[str, Any]:
    properties: dict[str, Any] = verdict_schema()["properties"]
    return properties


def _tagged(name: str) -> list[dict[str, Any]]:
    return [entry for entry in verdict_schema()["allOf"] if entry["title"] == name]


def test_schema_file_is_a_valid_2020_12_schema() -> None:
    schema = verdict_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"].endswith(f"verdict-{SCHEMA_VERSION}.schema.json")


def test_enums_match_the_code() -> None:
    assert tuple(_props()["verdict"]["enum"]) == VERDICTS
    assert tuple(_props()["signals"]["items"]["properties"]["tier"]["enum"]) == TIERS
    assert tuple(_props()["contradicting_families"]["items"]["enum"]) == FAMILIES


def test_version_matches_the_code() -> None:
    (entry,) = _tagged("schema_version")
    assert entry["properties"]["schema"]["const"] == SCHEMA_VERSION


def test_never_conclusive_matches_the_code() -> None:
    (entry,) = _tagged("never_conclusive")
    assert set(entry["if"]["properties"]["verdict"]["enum"]) == NEVER_CONCLUSIVE


def test_known_prefixes_match_the_code() -> None:
    in_schema = {}
    for entry in _tagged("known_family_has_signal"):
        family = entry["if"]["properties"]["contradicting_families"]["contains"]["const"]
        pattern = entry["then"]["properties"]["signals"]["contains"]["properties"]["id"]["pattern"]
        match = re.fullmatch(r"\^(\w+)\\\.", pattern)
        assert match, pattern
        in_schema[match.group(1)] = family
    assert in_schema == KNOWN_PREFIXES


def test_family_counts_match_the_code() -> None:
    (entry,) = _tagged("family_counts_in_range")
    for count in entry["properties"]["families"]["properties"].values():
        assert count == {"type": "integer", "minimum": 0, "maximum": len(FAMILIES)}


def test_every_tag_names_a_registered_rule() -> None:
    assert {entry["title"] for entry in verdict_schema()["allOf"]} <= set(RULES)


def test_every_property_is_described() -> None:
    def walk(schema: dict[str, Any], path: str) -> list[str]:
        missing = [] if "description" in schema else [path]
        for name, sub in schema.get("properties", {}).items():
            missing += walk(sub, f"{path}.{name}")
        if isinstance(schema.get("items"), dict):
            missing += walk(schema["items"], f"{path}[]")
        return missing

    assert walk(verdict_schema(), "$") == []


def test_every_field_of_the_spec_is_required() -> None:
    schema = verdict_schema()
    assert set(schema["required"]) == set(_props())
    for name in ("provenance", "families"):
        assert set(_props()[name]["required"]) == set(_props()[name]["properties"])
    signal = _props()["signals"]["items"]
    assert set(signal["required"]) == {"id", "tier", "headline"}


def test_extra_properties_are_allowed_by_the_schema() -> None:
    assert "additionalProperties" not in verdict_schema()


def test_family_of() -> None:
    assert family_of("geo.rtt") == "network-geometry"
    assert family_of("stack.ttl.v2") == "transport-stack"
    assert family_of("tls.ja4") == "tls"


def test_signal_id_pattern_matches_the_code() -> None:
    (entry,) = _tagged("signal_id_dot_namespaced")
    pattern = entry["properties"]["signals"]["items"]["properties"]["id"]["pattern"]
    assert pattern == SIGNAL_ID_PATTERN


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("GET", "/e", True),
        ("HEAD", "/e", True),
        ("POST", "/e", False),  # /e, but answered 405
        ("get", "/e", False),  # methods are case-sensitive (RFC 9110 §9.1)
        ("GET", "/e/", False),
        ("GET", "/E", False),
        ("GET", "/_mock/e", False),
    ],
)
def test_the_api_call_is_recognised_in_one_place(method: str, path: str, expected: bool) -> None:
    assert is_api_call(method, path) is expected


KEYWORDS_BY_TYPE = {
    "object": {"properties", "required", "additionalProperties", "patternProperties"},
    "array": {"items", "contains", "minItems", "maxItems", "uniqueItems", "prefixItems"},
    "string": {"pattern", "minLength", "maxLength", "format"},
    "integer": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
}
"""Keywords that apply to one JSON type: ajv's strict mode wants that ``type`` beside them."""
KNOWN_KEYWORDS = {
    *set().union(*KEYWORDS_BY_TYPE.values()),
    *("$schema", "$id", "$ref", "$comment", "title", "description", "examples", "type"),
    *("enum", "const", "allOf", "anyOf", "oneOf", "not", "if", "then", "else"),
}
"""JSON Schema 2020-12 keywords the contract's schemas use; anything else ajv refuses."""


def strict_mode_problems(schema: Any, path: str = "$") -> list[str]:
    """What ajv 8 in its default strict mode says of ``schema``: an unknown keyword (an error),
    a type-specific keyword without its ``type`` (a warning, under strictTypes)."""
    if not isinstance(schema, dict):
        return []
    problems = [f"{path}: unknown keyword {k!r}" for k in schema if k not in KNOWN_KEYWORDS]
    declared = schema.get("type")
    types = {declared} if isinstance(declared, str) else set(declared or ())
    if "number" in types:
        types.add("integer")
    for kind, keywords in KEYWORDS_BY_TYPE.items():
        used = sorted(keywords & set(schema))
        if used and kind not in types:
            problems.append(f"{path}: {used} without type {kind!r}")
    for key in ("items", "contains", "not", "if", "then", "else", "additionalProperties"):
        problems += strict_mode_problems(schema.get(key), f"{path}.{key}")
    for key in ("allOf", "anyOf", "oneOf", "prefixItems"):
        for index, part in enumerate(schema.get(key, ())):
            problems += strict_mode_problems(part, f"{path}.{key}[{index}]")
    for name, sub in schema.get("properties", {}).items():
        problems += strict_mode_problems(sub, f"{path}.{name}")
    return problems


def test_the_schema_passes_ajv_strict_mode() -> None:
    """ajv 8's default mode (``ajv compile --spec=draft2020``) takes the schema as it is."""
    assert strict_mode_problems(verdict_schema()) == []


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"x-rule": "a"}, "unknown keyword 'x-rule'"),
        ({"properties": {"a": {"type": "string"}}}, "['properties'] without type 'object'"),
        ({"type": "object", "properties": {"a": {"pattern": "x"}}}, "without type 'string'"),
        ({"type": "object", "allOf": [{"minItems": 1}]}, "without type 'array'"),
    ],
)
def test_what_ajv_strict_mode_refuses_is_found(schema: dict[str, Any], problem: str) -> None:
    assert any(problem in found for found in strict_mode_problems(schema))


def test_the_openapi_documents_schemas_pass_ajv_strict_mode() -> None:
    document = bundled_openapi()
    components = document["components"]
    schemas = {
        **{f"schemas.{name}": schema for name, schema in components["schemas"].items()},
        **{f"headers.{name}": header["schema"] for name, header in components["headers"].items()},
        **{f"parameters.{n}": param["schema"] for n, param in components["parameters"].items()},
    }
    assert len(schemas) >= 6
    for name, schema in schemas.items():
        assert strict_mode_problems(schema, name) == []
