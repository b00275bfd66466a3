"""Validate a verdict body against the JSON Schema and every rule of the registry."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, cast

import fastjsonschema

from .resources import verdict_schema
from .rules import RULES, refusal, repeat
from .violations import Violation, describe, format_violations, pointer

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

_CLAUSE_BY_FIELD = {"schema": "§9.1", "signals": "§2.3"}


@cache
def _schema_validator() -> Draft202012Validator:
    """Compile the verdict schema once per process (validators are thread-safe).

    jsonschema is imported here, when a body first breaks the schema: only then is its
    explanation needed, and a suite run that meets only conforming verdicts never imports it
    (a tenth of its start). The mock imports it anyway, to check session specs.
    """
    from jsonschema import Draft202012Validator

    schema = verdict_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@cache
def _fast_check() -> Any:
    """Compile the schema to Python code once: a fast yes/no for the common, valid case."""
    return fastjsonschema.compile(verdict_schema())


def _conforms(body: object) -> bool:
    try:
        _fast_check()(body)
    except Exception:  # any doubt (invalid, or input it cannot handle): ask jsonschema
        return False
    return True


def _rule_tag(error: ValidationError) -> str | None:
    """The registry rule a schema constraint restates: the ``title`` of its ``allOf`` entry."""
    path = list(error.absolute_schema_path)
    if len(path) < 2 or path[0] != "allOf" or not isinstance(path[1], int):
        return None
    return str(verdict_schema()["allOf"][path[1]]["title"])


def _schema_violations(body: object, reported: set[str]) -> list[Violation]:
    # jsonschema explains errors well but is slow; a valid body never needs the explanation
    # (bench_validator: validate_verdict 5.6x jsonschema alone, with the rules; below 1x without)
    if _conforms(body):
        return []
    violations = []
    errors = list(_schema_validator().iter_errors(cast(Any, body)))
    # A field of the wrong type (a null, say) is reported once, by its type error: the
    # cross-field constraints that read it would only restate the same mistake elsewhere.
    mistyped = any(e.validator in ("type", "required", "enum") for e in errors)
    seen: set[object] = set()
    for error in sorted(errors, key=lambda e: e.validator != "type"):
        # A tagged constraint restates a registry rule, which reports it in its own words;
        # where the rule could not read the field (a float count, say), the schema speaks.
        tag = _rule_tag(error)
        if tag in reported or (tag is not None and mistyped and _conditional(error)):
            continue
        # one error per field (type before enum or const); at the top, one per message (each
        # field missing is one, and a body that is no object is said once, not once a subschema)
        seen_as = tuple(error.absolute_path) or error.message
        if seen_as in seen:
            continue
        seen.add(seen_as)
        path = list(error.absolute_path)
        field = str(path[0]) if path else ""
        documented = describe(error.validator_value) if error.validator != "required" else ""
        violations.append(
            Violation(
                rule=f"json_schema.{error.validator}",
                path=pointer(path),
                message=_short(error),
                clause=_CLAUSE_BY_FIELD.get(field, "§2.2"),
                received=describe(error.instance),
                documented=f"{error.validator}: {documented}" if documented else "",
            )
        )
    return violations


def _conditional(error: ValidationError) -> bool:
    """Whether the constraint applies only under an ``if`` (it reads a field besides its own)."""
    return "then" in error.absolute_schema_path or "else" in error.absolute_schema_path


def _short(error: ValidationError) -> str:
    # jsonschema's messages embed the whole instance; keep the first line and cap its length.
    message = error.message.splitlines()[0]
    return message if len(message) <= 120 else message[:119] + "…"


def validate_verdict(body: object, *, strict: bool = False) -> list[Violation]:
    """Return every way ``body`` (a decoded JSON value) breaks the schema-7 verdict contract.

    Schema errors and rule violations come back in one list, empty when the body conforms.
    ``strict`` also reports properties the schema does not document. Never raises on bad input.
    """
    violations: list[Violation] = []
    if isinstance(body, Mapping):
        for contract_rule in RULES.values():
            if contract_rule.reads == "verdict" and (strict or not contract_rule.strict_only):
                violations.extend(contract_rule.run(body))
    violations[:0] = _schema_violations(body, {v.rule for v in violations})
    # A version mismatch explains most other failures, so it leads the list.
    violations.sort(key=lambda v: v.rule != "schema_version")
    return violations


def check_refusal(text: str, verdict: Mapping[str, Any] | None) -> list[Violation]:
    """Every way the answer ``text`` to a call without a valid key gives away the session's
    ``verdict`` (the rules that read a refusal); empty when it gives away nothing."""
    exchange = refusal(text, verdict)
    return [v for r in RULES.values() if r.reads == "refusal" for v in r.run(exchange)]


def check_repeat(first: Mapping[str, Any], later: Mapping[str, Any]) -> list[Violation]:
    """Every documented field in which a session's ``later`` verdict differs from its ``first``
    (the rules that read a repeat); empty when it is the same verdict."""
    exchange = repeat(first, later)
    return [v for r in RULES.values() if r.reads == "repeat" for v in r.run(exchange)]


def unknown_properties(body: object) -> list[Violation]:
    """Return the properties of ``body`` the schema does not document (the strict-only rule)."""
    if not isinstance(body, Mapping):
        return []
    return RULES["no_unknown_properties"].run(body)


def assert_valid_verdict(body: object, *, strict: bool = False) -> None:
    """Raise ``AssertionError`` listing every violation if ``body`` breaks the contract."""
    violations = validate_verdict(body, strict=strict)
    if violations:
        raise AssertionError(format_violations(violations))
