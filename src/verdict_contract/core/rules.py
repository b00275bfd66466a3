"""The semantic rules of the verdict that JSON Schema alone cannot express, in one registry.

Each rule is a plain generator function registered with :func:`rule` under its own (unique)
name and the spec clause it enforces. Most rules read one verdict: they receive the decoded body
(any JSON value inside a mapping) and must never raise on a malformed one: a field of the wrong
type is the schema's to report, so a rule simply skips what it cannot read. A few read an
exchange instead: what a call without a valid key was answered, beside the session's verdict
(``reads="refusal"``, built by :func:`refusal`), or a verdict and the same session's verdict
read later (``reads="repeat"``, built by :func:`repeat`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

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
Reads = Literal["verdict", "refusal", "repeat"]
"""What a rule reads: a verdict body; a refusal (:func:`refusal`: the answer to a call without
a valid key, beside the session's verdict); or a repeat (:func:`repeat`: a session's first
verdict and one read later)."""


@dataclass(frozen=True)
class Rule:
    """A named contract rule citing the spec clause it comes from."""

    name: str
    clause: str
    check: CheckFn
    strict_only: bool = False
    reads: Reads = "verdict"

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


def rule(
    clause: str, *, strict_only: bool = False, reads: Reads = "verdict"
) -> Callable[[CheckFn], CheckFn]:
    """Register a rule function under its own name; a second rule of that name is an error."""

    def register(check: CheckFn) -> CheckFn:
        name = check.__name__
        if name in RULES:
            raise ValueError(f"a contract rule named {name!r} is already registered")
        RULES[name] = Rule(name, clause, check, strict_only, reads)
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


_LINE_BREAK = re.compile(r"[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")
"""What ``str.splitlines`` splits at: a text holding one of these is more than one line."""
_SENTENCE_END = re.compile(r"(?<![.!?])[.!?]++[\"')\]]*+\s++(?=[\"'(\[]?[A-Z0-9])")
"""A sentence's end: ``.``, ``!`` or ``?``, then space and a capital or digit (possessive, and
from a run's first mark only: linear on any text a service sends)."""
_NO_SENTENCE_END = frozenset({"approx", "cf", "etc", "incl", "vs", "mrs"})
"""Abbreviations whose dot ends no sentence (besides initialisms and ``Dr.``-like pairs)."""
_MARKUP = re.compile(r"<\s*/?\s*[A-Za-z][^<>]*>|&(?:[A-Za-z]+|#[0-9]+|#x[0-9A-Fa-f]+);")
"""An HTML or XML tag, or a character reference: markup, where plain language belongs."""
_PLACEHOLDER = re.compile(r"\$?\{\s*[A-Za-z_][A-Za-z0-9_.]*\s*\}|%\([A-Za-z_]+\)s")
"""A template's unfilled placeholder: ``{country}``, ``${name}``, ``%(name)s``."""
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f]")
"""Control characters other than white space: never part of language."""
_NOT_LANGUAGE = frozenset({"null", "none", "undefined", "nan", "[object object]", "todo"})
"""What a program prints for a value it did not have: no text at all."""


def sentence_count(text: str) -> int:
    """The sentences of ``text``, counted so that no abbreviation, initialism or decimal adds one.

    An end is ``.``, ``!`` or ``?`` followed by white space and a capital or a digit. A dot after
    a word with a dot inside (``e.g.``, ``U.S.``), a single letter, two letters in title case
    (``No.``, ``Dr.``) or a known abbreviation ends nothing: a count that errs low raises no
    false alarm.
    """
    ends = 0
    text = text.strip()
    for match in _SENTENCE_END.finditer(text):
        before = text[max(0, match.start() - 64) : match.start()].split()
        if not before:
            continue  # a mark with no word before it ends nothing
        bare = before[-1].strip("\"'([").rstrip(".")
        title_case_pair = len(bare) == 2 and bare[0].isupper() and bare[1].islower()  # Dr, No
        if "." in bare or len(bare) == 1 or title_case_pair or bare.lower() in _NO_SENTENCE_END:
            continue
        ends += 1
    return ends + 1 if text else 0


def _texts(body: Body) -> Iterator[tuple[str, str, str]]:
    """``(path, name, text)`` of the summary and of every signal headline that is a string."""
    summary = _get(body, "summary", str)
    if summary is not None:
        yield "/summary", "summary", summary
    for index, signal in enumerate(_get(body, "signals", list) or []):
        if isinstance(signal, Mapping) and isinstance(signal.get("headline"), str):
            yield f"/signals/{index}/headline", "headline", signal["headline"]


@rule("§2.3")
def headline_is_one_line(body: Body) -> Iterator[Finding]:
    """Every signal ``headline`` is one line: text, without a line break."""
    for path, _, text in _texts(body):
        if path == "/summary":
            continue
        if not text.strip():
            yield Finding(path, "headline is blank", describe(text), "one line of text")
        elif _LINE_BREAK.search(text.strip()):
            lines = len(text.strip().splitlines())
            yield Finding(path, f"headline spans {lines} lines", describe(text), "one line")


@rule("§2.2")
def summary_is_one_or_two_sentences(body: Body) -> Iterator[Finding]:
    """``summary`` is one or two sentences (abbreviations and initialisms end none)."""
    summary = _get(body, "summary", str)
    count = sentence_count(summary) if summary is not None else 0
    if count > 2:
        yield Finding(
            "/summary",
            f"summary is {count} sentences",
            describe(summary),
            "one or two sentences in plain language",
        )


@rule("§2.2, §2.3")
def text_is_plain_language(body: Body) -> Iterator[Finding]:
    """``summary`` and headlines are plain language: no markup, placeholder or control character.

    Nor a program's word for a missing value (``null``, ``undefined``, ``None``) in place of text.
    """
    for path, name, text in _texts(body):
        found = None
        for pattern, what in (
            (_MARKUP, "markup"),
            (_PLACEHOLDER, "an unfilled placeholder"),
            (_CONTROL, "a control character"),
        ):
            match = pattern.search(text)
            if match is not None:
                found = f"{name} holds {what}: {match.group()!r}"
                break
        if found is None and text.strip().lower() in _NOT_LANGUAGE:
            found = f"{name} is a program's word for no value"
        if found is not None:
            yield Finding(path, found, describe(text), "plain language (spec: human-readable)")


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


VERDICT_ONLY_FIELDS: frozenset[str] = frozenset(
    {"verdict", "conclusive", "contradicting_families", "signals"}
)
"""Names that only a verdict holds: an error body has no use for them."""
_MIN_QUOTED = 8
"""A value of the verdict shorter than this (a tier, a count) could be a coincidence."""


def refusal(text: str, verdict: Mapping[str, Any] | None) -> Body:
    """What a ``reads="refusal"`` rule reads: the text a call without a valid key was answered
    with, and the verdict the session gives an authorised call (None if none is known)."""
    return {"text": text, "verdict": verdict}


def _fields_named(value: object, path: list[str | int]) -> Iterator[list[str | int]]:
    """The paths of every object member named in VERDICT_ONLY_FIELDS, at any depth."""
    if isinstance(value, Mapping):
        for key, member in value.items():
            if key in VERDICT_ONLY_FIELDS:
                yield [*path, key]
            yield from _fields_named(member, [*path, key])
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _fields_named(item, [*path, index])


def _quotable(verdict: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(field, value)`` of the verdict's own texts: build, summary, signal ids and headlines."""
    provenance = _mapping(verdict, "provenance")
    build = _get(provenance, "build", str) if provenance is not None else None
    if build is not None:
        yield "provenance.build", build
    summary = _get(verdict, "summary", str)
    if summary is not None:
        yield "summary", summary
    for index, signal in enumerate(_get(verdict, "signals", list) or []):
        if isinstance(signal, Mapping):
            for key in ("id", "headline"):
                if isinstance(signal.get(key), str):
                    yield f"signals[{index}].{key}", signal[key]


@rule("§4 rule 1, §5.3", reads="refusal")
def no_verdict_without_a_key(body: Body) -> Iterator[Finding]:
    """An answer to a call without a valid key carries nothing of the session's verdict.

    Whatever its status: no member only a verdict has (``verdict``, ``signals``...), and none of
    the session's own texts (its build, summary, signal ids or headlines).
    """
    text = body.get("text")
    if not isinstance(text, str):
        return
    try:
        decoded: object = json.loads(text)
    except (ValueError, RecursionError):
        decoded = None
    documented = "nothing of a verdict without a valid key (401)"
    member = next(_fields_named(decoded, []), None)
    if member is not None:
        yield Finding(
            pointer(member),
            f"an answer without a valid key holds the verdict's member {member[-1]!r}",
            describe(text),
            documented,
        )
        return
    verdict = body.get("verdict")
    quoted = (
        next((f for f, v in _quotable(verdict) if len(v) >= _MIN_QUOTED and v in text), None)
        if isinstance(verdict, Mapping)
        else None
    )
    if quoted is not None:
        yield Finding(
            "", f"an answer without a valid key quotes the session's {quoted}", "", documented
        )


def repeat(first: Mapping[str, Any], later: Mapping[str, Any]) -> Body:
    """What a ``reads="repeat"`` rule reads: a session's first verdict and one read later."""
    return {"first": first, "later": later}


def _documented(value: object, schema: Mapping[str, Any]) -> object:
    """``value`` with only the members the schema documents, at every depth."""
    properties = schema.get("properties")
    if isinstance(value, Mapping) and isinstance(properties, Mapping):
        return {k: _documented(v, properties[k]) for k, v in value.items() if k in properties}
    items = schema.get("items")
    if isinstance(value, list) and isinstance(items, Mapping):
        return [_documented(v, items) for v in value]
    return value


_ABSENT = object()


@rule("§3, §8", reads="repeat")
def verdict_never_changes(body: Body) -> Iterator[Finding]:
    """A session's verdict read again, at any later time in its life, is the same verdict.

    Every documented field is compared; a field the spec does not document (a request id) may
    change.
    """
    first, later = body.get("first"), body.get("later")
    if not isinstance(first, Mapping) or not isinstance(later, Mapping):
        return
    for key, schema in verdict_schema()["properties"].items():
        was = _documented(first[key], schema) if key in first else _ABSENT
        now = _documented(later[key], schema) if key in later else _ABSENT
        if was != now:
            yield Finding(
                f"/{key}",
                f"{key} changed since the session's first verdict",
                "(absent)" if now is _ABSENT else describe(now),
                f"{'(absent)' if was is _ABSENT else describe(was)}, as first produced: "
                "a verdict is immutable",
            )
