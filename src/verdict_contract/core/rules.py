"""The semantic rules of the verdict that JSON Schema alone cannot express, in one registry.

Each rule is a plain generator function registered with :func:`rule` under its own (unique)
name and the spec clause it enforces. Rules receive the decoded body (any JSON value inside a
mapping) and must never raise on a malformed one: a field of the wrong type is the schema's to
report, so a rule simply skips what it cannot read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from .resources import verdict_schema
from .spec import (
    FAMILIES,
    KNOWN_PREFIXES,
    NEVER_CONCLUSIVE,
    PREFIX_OF_FAMILY,
    SCHEMA_VERSION,
    SIGNAL_ID_PATTERN,
    family_of,
)
from .violations import Violation, describe, pointer

Body = Mapping[str, Any]
T = TypeVar("T")


@dataclass(frozen=True)
class Finding:
    """What a rule function yields; the registry adds the rule's name and clause."""

    path: str
    message: str
    received: str = ""
    documented: str = ""


CheckFn = Callable[[Body], Iterator[Finding]]


@dataclass(frozen=True)
class Rule:
    """A named contract rule citing the spec clause it comes from."""

    name: str
    clause: str
    check: CheckFn
    strict_only: bool = False

    @property
    def summary(self) -> str:
        return (self.check.__doc__ or self.name).strip().splitlines()[0].replace("``", "")

    def run(self, body: Body) -> list[Violation]:
        return [
            Violation(self.name, f.path, f.message, self.clause, f.received, f.documented)
            for f in self.check(body)
        ]


RULES: dict[str, Rule] = {}
"""Every rule, by name, in registration order."""


def rule(clause: str, *, strict_only: bool = False) -> Callable[[CheckFn], CheckFn]:
    """Register a rule function under its own name; a second rule of that name is an error."""

    def register(check: CheckFn) -> CheckFn:
        name = check.__name__
        if name in RULES:
            raise ValueError(f"a contract rule named {name!r} is already registered")
        RULES[name] = Rule(name, clause, check, strict_only)
        return check

    return register


def _get(body: Body, key: str, kind: type[T]) -> T | None:
    """Return ``body[key]`` if it has the JSON type ``kind`` (bools are not integers)."""
    value = body.get(key)
    if kind is int and isinstance(value, bool):
        return None
    return value if isinstance(value, kind) else None


def _mapping(body: Body, key: str) -> Body | None:
    """Return ``body[key]`` if it is a JSON object."""
    value = body.get(key)
    return value if isinstance(value, Mapping) else None


def _family_count(body: Body, key: str) -> int | None:
    """``families.measured`` or ``families.reporting``, if it is an integer."""
    families = _mapping(body, "families")
    return _get(families, key, int) if families is not None else None


def _signals(body: Body) -> list[tuple[int, str, str | None]]:
    """Return ``(index, id, tier)`` of every signal whose id is a string."""
    found = []
    for index, signal in enumerate(_get(body, "signals", list) or []):
        if isinstance(signal, Mapping) and isinstance(signal.get("id"), str):
            tier = signal.get("tier")
            found.append((index, signal["id"], tier if isinstance(tier, str) else None))
    return found


_SIGNAL_ID = re.compile(SIGNAL_ID_PATTERN)


@rule("§9.1, §9.3")
def schema_version(body: Body) -> Iterator[Finding]:
    """``schema`` is the version this contract describes; another version is a mismatch."""
    version = _get(body, "schema", int)
    if version is not None and version != SCHEMA_VERSION:
        yield Finding(
            "/schema",
            f"schema version mismatch: the service speaks schema {version}, "
            f"this contract checks schema {SCHEMA_VERSION}",
            describe(version),
            str(SCHEMA_VERSION),
        )


def _blank(value: str | None, path: str, name: str, documented: str) -> Iterator[Finding]:
    """A finding if a string field is present but blank (a missing one is the schema's)."""
    if value is not None and not value.strip():
        yield Finding(path, f"{name} is blank", describe(value), documented)


@rule("§2.2, §9.4")
def build_is_non_empty(body: Body) -> Iterator[Finding]:
    """``provenance.build`` names a build: a non-blank string."""
    provenance = _mapping(body, "provenance")
    build = _get(provenance, "build", str) if provenance is not None else None
    yield from _blank(
        build, "/provenance/build", "provenance.build", "a non-empty build identifier"
    )


@rule("§2.2")
def summary_is_non_empty(body: Body) -> Iterator[Finding]:
    """``summary`` explains the ruling: a non-blank string."""
    summary = _get(body, "summary", str)
    yield from _blank(summary, "/summary", "summary", "one or two sentences in plain language")


@rule("§2.2")
def contradicting_families_only_when_contradicted(body: Body) -> Iterator[Finding]:
    """``contradicting_families`` is empty whenever ``verdict`` is not ``contradicted``."""
    verdict = _get(body, "verdict", str)
    families = _get(body, "contradicting_families", list)
    if verdict is not None and verdict != "contradicted" and families:
        yield Finding(
            "/contradicting_families",
            f"verdict {verdict!r} lists contradicting families",
            describe(families),
            "[] unless verdict is 'contradicted'",
        )


@rule("§2.2")
def contradicting_families_unique(body: Body) -> Iterator[Finding]:
    """A family appears at most once in ``contradicting_families``."""
    seen: set[str] = set()
    for index, family in enumerate(_get(body, "contradicting_families", list) or []):
        if isinstance(family, str):
            if family in seen:
                yield Finding(
                    f"/contradicting_families/{index}",
                    f"family {family!r} is listed twice",
                    describe(family),
                    "each family at most once",
                )
            seen.add(family)


@rule("§2.2, §2.4")
def contradicted_has_evidence(body: Body) -> Iterator[Finding]:
    """A ``contradicted`` verdict names at least one family and carries at least one signal."""
    if _get(body, "verdict", str) != "contradicted":
        return
    families = _get(body, "contradicting_families", list)
    if families is not None and not families:
        yield Finding(
            "/contradicting_families",
            "contradicted verdict names no family",
            "[]",
            "at least one contradicting family",
        )
    signals = _get(body, "signals", list)
    if signals is not None and not signals:
        yield Finding(
            "/signals", "contradicted verdict carries no signal", "[]", "at least one fired signal"
        )


@rule("§2.4")
def never_conclusive(body: Body) -> Iterator[Finding]:
    """``conclusive`` is false for ``disputed``, ``uncontradicted`` and ``insufficient``."""
    verdict = _get(body, "verdict", str)
    if verdict in NEVER_CONCLUSIVE and body.get("conclusive") is True:
        yield Finding(
            "/conclusive",
            f"verdict {verdict!r} is marked conclusive",
            "true",
            f"false for {', '.join(sorted(NEVER_CONCLUSIVE))}",
        )


@rule("§2.2, §2.4")
def conclusive_matches_signals(body: Body) -> Iterator[Finding]:
    """For ``contradicted``, ``conclusive`` is true exactly when the signals justify it.

    That is one ``absolute`` signal, or ``composite`` signals from two different families (a
    signal's family is given by its id's prefix).
    """
    conclusive = _get(body, "conclusive", bool)
    if _get(body, "verdict", str) != "contradicted" or conclusive is None:
        return
    if _get(body, "signals", list) is None:
        return  # unreadable signals are the schema's to report, not a conclusiveness question
    signals = _signals(body)
    absolute = [sid for _, sid, tier in signals if tier == "absolute"]
    composite_families = sorted({family_of(sid) for _, sid, tier in signals if tier == "composite"})
    justified = bool(absolute) or len(composite_families) >= 2
    if conclusive == justified:
        return
    if absolute:
        evidence = f"absolute signal {absolute[0]!r}"
    elif composite_families:
        evidence = f"composite signals from one family only: {composite_families}"
    else:
        evidence = "no absolute or composite signal"
    yield Finding(
        "/conclusive",
        f"contradicted verdict is {'conclusive' if conclusive else 'not conclusive'} "
        f"with {evidence}",
        describe(conclusive),
        "true exactly when there is an absolute signal or composite signals "
        "from two different families",
    )


@rule("§2.3")
def known_family_has_signal(body: Body) -> Iterator[Finding]:
    """A contradicting family with a documented prefix has a fired signal with that prefix."""
    if _get(body, "signals", list) is None:
        return
    fired = {sid.partition(".")[0] for _, sid, _ in _signals(body)}
    for index, family in enumerate(_get(body, "contradicting_families", list) or []):
        prefix = PREFIX_OF_FAMILY.get(family) if isinstance(family, str) else None
        if prefix is not None and prefix not in fired:
            yield Finding(
                f"/contradicting_families/{index}",
                f"family {family!r} contradicts but no '{prefix}.' signal fired",
                describe(sorted(fired)),
                f"a signal whose id starts with '{prefix}.'",
            )


@rule("§2.3")
def signal_id_dot_namespaced(body: Body) -> Iterator[Finding]:
    """Every signal id is dot-namespaced: a prefix, a dot, a name (no blank segment)."""
    for index, sid, _ in _signals(body):
        if not _SIGNAL_ID.match(sid):
            yield Finding(
                f"/signals/{index}/id",
                "signal id is not dot-namespaced",
                describe(sid),
                "'<family prefix>.<name>', e.g. 'geo.rtt-floor'",
            )


@rule("§2.2, §2.3")
def family_counts_in_range(body: Body) -> Iterator[Finding]:
    """``families.measured`` and ``families.reporting`` lie between 0 and the number of families."""
    for key in ("measured", "reporting"):
        count = _family_count(body, key)
        if count is not None and not 0 <= count <= len(FAMILIES):
            yield Finding(
                f"/families/{key}",
                f"families.{key} is out of range",
                describe(count),
                f"an integer from 0 to {len(FAMILIES)}",
            )


@rule("§2.2")
def reporting_within_measured(body: Body) -> Iterator[Finding]:
    """No more families report than attempted a measurement."""
    measured, reporting = _family_count(body, "measured"), _family_count(body, "reporting")
    if measured is not None and reporting is not None and reporting > measured:
        yield Finding(
            "/families/reporting",
            "more families report than were measured",
            f"reporting {reporting}, measured {measured}",
            "reporting <= measured",
        )


def _strong(body: Body) -> str | None:
    """The signals that would make a verdict conclusive (§2.2), described; else None."""
    signals = _signals(body)
    absolute = [sid for _, sid, tier in signals if tier == "absolute"]
    if absolute:
        return f"absolute signal {absolute[0]!r}"
    composite = sorted({family_of(sid) for _, sid, tier in signals if tier == "composite"})
    if len(composite) >= 2:
        return f"composite signals from two families {composite}"
    return None


@rule("§2.2, §2.4")
def strong_signals_only_when_contradicted(body: Body) -> Iterator[Finding]:
    """Signals strong enough to be conclusive never come with a never-conclusive verdict.

    One ``absolute`` signal, or ``composite`` ones from two families, make a verdict conclusive
    (§2.2); ``disputed``, ``uncontradicted`` and ``insufficient`` never are (§2.4).
    """
    verdict = _get(body, "verdict", str)
    strong = _strong(body) if verdict in NEVER_CONCLUSIVE else None
    if strong is not None:
        yield Finding(
            "/signals",
            f"verdict {verdict!r} carries {strong}, which would make it conclusive",
            describe(verdict),
            "contradicted (or refused) when such signals fired",
        )


def _beyond_reporting(body: Body, named: list[str], which: str) -> Iterator[Finding]:
    """Only a family that reported can be ``named``: a finding if more are than reported."""
    reporting = _family_count(body, "reporting")
    if reporting is not None and len(named) > reporting:
        yield Finding(
            "/families/reporting",
            f"{len(named)} {which} but only {reporting} reported",
            f"reporting {reporting}, {which} {named}",
            f"reporting >= the number of {which}",
        )


@rule("§2.2")
def contradicting_families_reported(body: Body) -> Iterator[Finding]:
    """Only a family that reported can contradict: no more contradicting families than reporting."""
    listed = _get(body, "contradicting_families", list)
    distinct = sorted({f for f in listed or [] if isinstance(f, str)})
    yield from _beyond_reporting(body, distinct, "contradicting families")


@rule("§2.2, §2.3")
def signal_families_reported(body: Body) -> Iterator[Finding]:
    """Signals fire from families that reported: no more signal families than reporting."""
    fired = sorted({family_of(sid) for _, sid, _ in _signals(body)})
    yield from _beyond_reporting(body, fired, "signal families")


@rule("§2.2, §2.3")
def strong_signal_family_contradicts(body: Body) -> Iterator[Finding]:
    """In a ``contradicted`` verdict, a documented family with a strong signal is listed.

    An ``absolute`` or ``composite`` signal is what contradicts; its family (known prefix) is one
    of ``contradicting_families``.
    """
    listed = _get(body, "contradicting_families", list)
    if _get(body, "verdict", str) != "contradicted" or not listed:
        return  # an empty list is contradicted_has_evidence's to report
    for index, sid, tier in _signals(body):
        family = KNOWN_PREFIXES.get(sid.partition(".")[0])
        if tier in ("absolute", "composite") and family is not None and family not in listed:
            yield Finding(
                f"/signals/{index}",
                f"{tier} signal {sid!r} fired but its family {family!r} is not contradicting",
                describe(listed),
                f"contradicting_families includes {family!r}",
            )


def _unknown(value: object, schema: Mapping[str, Any], path: list[str | int]) -> Iterator[Finding]:
    if not isinstance(value, Mapping) or "properties" not in schema:
        return
    known = schema["properties"]
    for key in value:
        if key not in known:
            yield Finding(
                pointer([*path, key]),
                f"unknown property {key!r}",
                describe(value[key]),
                f"one of {sorted(known)}",
            )
        else:
            yield from _unknown(value[key], known[key], [*path, key])


@rule("§9.2", strict_only=True)
def no_unknown_properties(body: Body) -> Iterator[Finding]:
    """Strict mode: every property is one the schema documents.

    The spec allows additions without a version bump, so this only holds the bundled mock (and
    anyone who asks for strict mode) to the documented fields.
    """
    schema = verdict_schema()
    yield from _unknown(body, schema, [])
    signal_schema = schema["properties"]["signals"]["items"]
    for index, signal in enumerate(_get(body, "signals", list) or []):
        yield from _unknown(signal, signal_schema, ["signals", index])
