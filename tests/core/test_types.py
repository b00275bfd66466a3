"""core.types agrees with the schema: every key, required set and enum, in both directions."""

from __future__ import annotations

from typing import Any, get_args, get_type_hints, is_typeddict

import pytest

from verdict_contract.core.resources import verdict_schema
from verdict_contract.core.spec import FAMILIES, TIERS, VERDICTS
from verdict_contract.core.types import (
    Family,
    Tier,
    Verdict,
    VerdictKind,
)


def _typed_dict_matches(typed: Any, schema: dict[str, Any], where: str) -> list[str]:
    """Differences between a TypedDict and a schema object, recursively (empty: they agree)."""
    problems = []
    hints = get_type_hints(typed)
    properties = schema["properties"]
    if set(hints) != set(properties):
        problems.append(f"{where}: keys {sorted(hints)} != schema {sorted(properties)}")
    if set(typed.__required_keys__) != set(schema.get("required", [])):
        problems.append(f"{where}: required keys differ from the schema's")
    for name, hint in hints.items():
        field = properties.get(name, {})
        if is_typeddict(hint):
            problems += _typed_dict_matches(hint, field, f"{where}.{name}")
        elif field.get("type") == "array":
            (item,) = get_args(hint)
            items = field["items"]
            if is_typeddict(item):
                problems += _typed_dict_matches(item, items, f"{where}.{name}[]")
            elif "enum" in items and set(get_args(item)) != set(items["enum"]):
                problems.append(f"{where}.{name}[]: {get_args(item)} != enum {items['enum']}")
        elif "enum" in field and set(get_args(hint)) != set(field["enum"]):
            problems.append(f"{where}.{name}: {get_args(hint)} != enum {field['enum']}")
        python = {"integer": int, "string": str, "boolean": bool}.get(field.get("type", ""))
        if python is not None and "enum" not in field and hint is not python:
            problems.append(f"{where}.{name}: {hint} is not {python.__name__}")
    return problems


def test_the_verdict_typed_dict_agrees_with_the_schema() -> None:
    assert _typed_dict_matches(Verdict, verdict_schema(), "Verdict") == []


def test_the_check_would_see_a_drift() -> None:
    schema = verdict_schema()
    drifted = {**schema, "properties": {**schema["properties"], "new_field": {"type": "string"}}}
    assert _typed_dict_matches(Verdict, drifted, "Verdict") != []
    enum_drift = {
        **schema,
        "properties": {**schema["properties"], "verdict": {"type": "string", "enum": ["a"]}},
    }
    assert _typed_dict_matches(Verdict, enum_drift, "Verdict") != []


@pytest.mark.parametrize(
    ("literal", "facts"), [(VerdictKind, VERDICTS), (Tier, TIERS), (Family, FAMILIES)]
)
def test_literals_agree_with_the_spec_facts(literal: Any, facts: tuple[str, ...]) -> None:
    assert get_args(literal) == facts
