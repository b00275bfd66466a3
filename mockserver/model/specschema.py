"""The JSON Schema of session specs and scenario files, and its first failure as one message.

``schema/mock-scenario.schema.json`` is the one statement of what a scenario file and a session
spec may hold, limits included. A place of it may carry ``x-message`` (``x-messages`` per
keyword), the mock's wording of a failure there. Integers are strict: ``1.0`` and ``true`` are not.
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Final, cast

from verdict_contract.core.redact import masked_name
from verdict_contract.core.resources import schema_dir
from verdict_contract.core.spec import VERDICTS

if TYPE_CHECKING:
    from jsonschema import ValidationError
    from jsonschema.protocols import Validator


@cache
def scenario_schema() -> dict[str, Any]:
    """The JSON Schema of a scenario file, parsed once per process."""
    text = (schema_dir() / "mock-scenario.schema.json").read_text(encoding="utf-8")
    return cast(dict[str, Any], json.loads(text))


@dataclass(frozen=True)
class Limits:
    """The bounds of a session spec, as the schema states them."""

    max_id: int
    statuses: frozenset[int]
    faults: frozenset[str]
    max_delay_ms: int
    max_age_seconds: float
    max_steps: int


def limits() -> Limits:
    schema = scenario_schema()
    session = schema["$defs"]["session"]["properties"]
    step = schema["$defs"]["step"]
    statuses, faults = (choice["enum"] for choice in step["else"]["anyOf"])
    return Limits(
        max_id=schema["properties"]["sessions"]["propertyNames"]["maxLength"],
        statuses=frozenset(statuses),
        faults=frozenset(faults),
        max_delay_ms=step["then"]["else"]["properties"]["delay_ms"]["maximum"],
        max_age_seconds=float(session["age_seconds"]["maximum"]),
        max_steps=session["script"]["maxItems"],
    )


def _strict_integer(_: object, instance: object) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


@cache
def _validator(definition: str | None) -> Validator:
    """A validator of the whole file, or of one of its ``$defs`` (refs resolve in the file);
    jsonschema is imported on first use (an in-process test that mints nothing never needs it)."""
    from jsonschema import Draft202012Validator, validators

    strict: Any = validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator,
        type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _strict_integer),
    )
    root: Validator = strict(scenario_schema())
    if definition is None:
        return root
    return root.evolve(schema=scenario_schema()["$defs"][definition])


def _where(base: str, path: Iterable[str | int]) -> str:
    where = base
    for part in path:
        where += f"[{part}]" if isinstance(part, int) else f".{part}" if where else str(part)
    return where


_SHORT: Final = reprlib.Repr()  # a value only as far as a message shows it (it may be huge)
_SHORT.maxlevel, _SHORT.maxdict, _SHORT.maxlist = 3, 8, 8  # keyword arguments from Python 3.12
_SHORT.maxstring = _SHORT.maxother = 60

MAX_VALIDATOR_MESSAGE: Final = 300
"""A validator's own sentence holds the whole value: it is cut there."""


def _json_head(instance: object, length: int) -> str:
    """The first ``length`` characters of ``instance`` as JSON, encoding no more than that."""
    head = ""
    for chunk in json.JSONEncoder(default=str).iterencode(instance):
        head += chunk
        if len(head) >= length:
            break
    return head[:length]


def _message(error: ValidationError, base: str) -> str:
    node = error.schema if isinstance(error.schema, dict) else {}
    template = node.get("x-messages", {}).get(error.validator) or node.get("x-message")
    where = _where(base, error.absolute_path)
    if template is None:  # a place the schema words no message for: the validator's own
        return f"{where or 'the top level'}: {error.message[:MAX_VALIDATOR_MESSAGE]}"
    instance = error.instance
    known = sorted(node.get("properties", {}))
    extra = set(instance) - set(known) if isinstance(instance, dict) else set()
    facts = limits()
    return str(template).format(
        where=where,
        got=_SHORT.repr(instance)[:100],
        got_json=_json_head(instance, 60),
        unknown=sorted(masked_name(str(k)) for k in extra),  # a key a level too far out: masked
        known=known,
        verdicts=list(VERDICTS),
        max_id=facts.max_id,
        max_age=f"{facts.max_age_seconds:.0f}",
        max_steps=facts.max_steps,
        max_delay_ms=facts.max_delay_ms,
        statuses=sorted(facts.statuses),
        faults=sorted(facts.faults),
    )


def first_problem_at(
    raw: object, where: str = "", definition: str | None = None
) -> tuple[str, tuple[str | int, ...]] | None:
    """The first place where ``raw`` breaks the schema (or ``$defs/<definition>``), worded, and
    the path to the value at fault (to find its line in a file)."""
    error = next(iter(_validator(definition).iter_errors(cast(Any, raw))), None)
    if error is None:
        return None
    return _message(error, where), tuple(error.absolute_path)
