"""Each rule of the registry: one body that passes it and one that breaks only it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import fastjsonschema
import pytest
from jsonschema import Draft202012Validator

from tests.bodies import Body, contradicted, uncontradicted
from verdict_contract import RULES, validate_verdict
from verdict_contract.core.resources import verdict_schema
from verdict_contract.core.rules import rule, sentence_count
from verdict_contract.core.validator import check_refusal, check_repeat


def _set(path: str, value: Any) -> Callable[[Body], None]:
    def mutate(body: Body) -> None:
        *parents, last = path.split(".")
        target: Any = body
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        if last.isdigit() and int(last) == len(target):
            target.append(value)  # one past the end: a new element
        else:
            target[int(last) if last.isdigit() else last] = value

    return mutate


def _many(*steps: Callable[[Body], None]) -> Callable[[Body], None]:
    def mutate(body: Body) -> None:
        for step in steps:
            step(body)

    return mutate


_NOT_CONTRADICTED = _many(
    _set("verdict", "disputed"), _set("conclusive", False), _set("signals.0.tier", "conditional")
)
_ONE_FAMILY = _many(
    _set("signals.1.id", "geo.asn-mismatch"), _set("contradicting_families", ["network-geometry"])
)

_GEO_ABSOLUTE = {"id": "geo.rtt-floor", "tier": "absolute", "headline": "RTT is below the floor."}
_RENDER_WEAK = {"id": "render.gpu-vendor", "tier": "weak", "headline": "GPU vendor differs."}

# rule name -> (mutation that keeps the body valid near the rule's edge, mutation breaking it)
CASES: dict[str, tuple[Callable[[Body], None], Callable[[Body], None]]] = {
    "schema_version": (_set("schema", 7), _set("schema", 8)),
    "build_is_non_empty": (_set("provenance.build", "b"), _set("provenance.build", "  ")),
    "summary_is_non_empty": (_set("summary", "Short."), _set("summary", "")),
    "contradicting_families_only_when_contradicted": (
        _many(_NOT_CONTRADICTED, _set("contradicting_families", [])),
        _NOT_CONTRADICTED,
    ),
    "contradicting_families_unique": (
        _set("contradicting_families", ["network-geometry", "transport-stack", "compute"]),
        _set("contradicting_families", ["network-geometry", "transport-stack", "network-geometry"]),
    ),
    "contradicted_has_evidence": (
        _many(
            _set("signals", [_GEO_ABSOLUTE]), _set("contradicting_families", ["network-geometry"])
        ),
        _set("contradicting_families", []),
    ),
    "never_conclusive": (
        _many(_set("verdict", "refused"), _set("contradicting_families", [])),  # refused varies
        _many(
            _set("verdict", "insufficient"),
            _set("contradicting_families", []),
            _set("signals.0.tier", "weak"),
        ),
    ),
    "conclusive_matches_signals": (
        _many(_ONE_FAMILY, _set("conclusive", False)),  # composites of one family: review only
        _ONE_FAMILY,  # ... yet marked conclusive
    ),
    "known_family_has_signal": (
        _set("contradicting_families", ["network-geometry", "transport-stack", "render"]),
        _many(
            _set("signals.1.id", "tls.ja4-mismatch"),
            _set("contradicting_families", ["network-geometry", "transport-stack"]),
        ),
    ),
    "signal_id_dot_namespaced": (
        _set("signals.0.id", "geo.rtt.floor.v2"),
        _set("signals.0.id", "geo."),  # a prefix and a dot, but no name
    ),
    "family_counts_in_range": (
        _set("families", {"measured": 2, "reporting": 2}),
        _set("families", {"measured": 7, "reporting": 6}),
    ),
    "reporting_within_measured": (
        _set("families", {"measured": 3, "reporting": 3}),
        _set("families", {"measured": 3, "reporting": 4}),
    ),
    "no_unknown_properties": (_set("provenance.build", "x"), _set("signals.0.score", 0.9)),
    "strong_signals_only_when_contradicted": (
        _many(
            _NOT_CONTRADICTED, _set("contradicting_families", []), _set("signals.0.tier", "weak")
        ),
        _many(  # two composite signals from two families, yet disputed
            _set("verdict", "disputed"),
            _set("conclusive", False),
            _set("contradicting_families", []),
        ),
    ),
    "contradicting_families_reported": (
        _set("families", {"measured": 3, "reporting": 3}),
        _many(
            _set("contradicting_families", ["network-geometry", "transport-stack", "render"]),
            _set("families", {"measured": 6, "reporting": 2}),
        ),
    ),
    "signal_families_reported": (
        _many(_set("signals.2", _RENDER_WEAK), _set("families", {"measured": 3, "reporting": 3})),
        _many(_set("signals.2", _RENDER_WEAK), _set("families", {"measured": 3, "reporting": 2})),
    ),
    "headline_is_one_line": (
        _set("signals.0.headline", "RTT is below the floor for Lyon; see geo.rtt-floor."),
        _set("signals.0.headline", "RTT is below the floor.\nSee the trace."),
    ),
    "summary_is_one_or_two_sentences": (  # abbreviations, initialisms and decimals end none
        _set("summary", "RTT of 4.2 ms fits e.g. Lyon, not the U.S. client Dr. Ng claims. Act."),
        _set("summary", "The locale is contradicted. The stack is Linux. Act on it."),
    ),
    "text_is_plain_language": (
        _set("signals.0.headline", "RTT < 5 ms & TTL > 64: Linux (not Windows)."),
        _set("signals.0.headline", "<b>RTT</b> is below the floor."),
    ),
    "strong_signal_family_contradicts": (
        _set("contradicting_families", ["network-geometry", "transport-stack", "render"]),
        _set("contradicting_families", ["network-geometry", "render"]),  # stack.ttl-os unlisted
    ),
}


def _schema_alone_rejects(body: Body) -> bool:
    try:
        fastjsonschema.validate(verdict_schema(), body)
    except fastjsonschema.JsonSchemaValueException:
        fast = True
    else:
        fast = False
    slow = not Draft202012Validator(verdict_schema()).is_valid(body)
    assert fast == slow, "jsonschema and fastjsonschema disagree on the schema file"
    return slow


def _tagged_rules() -> set[str]:
    return {entry["title"] for entry in verdict_schema()["allOf"]}


def test_the_base_bodies_conform() -> None:
    assert validate_verdict(contradicted(), strict=True) == []
    assert validate_verdict(uncontradicted(), strict=True) == []


def test_every_rule_has_a_case() -> None:
    assert set(CASES) == {name for name, r in RULES.items() if r.reads == "verdict"}
    assert set(REFUSALS) == {name for name, r in RULES.items() if r.reads == "refusal"}
    assert set(REPEATS) == {name for name, r in RULES.items() if r.reads == "repeat"}


REPEATS: dict[str, tuple[Callable[[Body], None], Callable[[Body], None]]] = {
    # rule name -> (a change a later read may show, a change it may not)
    "verdict_never_changes": (
        _many(_set("meta", {"request_id": "r-2"}), _set("signals.0.score", 0.4)),
        _set("families.reporting", 5),
    ),
}


@pytest.mark.parametrize("name", list(REPEATS))
def test_repeat_rule_passes_and_catches(name: str) -> None:
    allowed, forbidden = contradicted(), contradicted()
    REPEATS[name][0](allowed)
    REPEATS[name][1](forbidden)
    assert check_repeat(contradicted(), allowed) == []
    (violation,) = check_repeat(contradicted(), forbidden)
    assert (violation.rule, violation.path) == (name, "/families")


def test_a_documented_field_gone_later_is_a_change() -> None:
    later = contradicted()
    del later["summary"]
    assert [v.path for v in check_repeat(contradicted(), later)] == ["/summary"]
    assert [v.received for v in check_repeat(contradicted(), later)] == ["(absent)"]


@pytest.mark.parametrize(
    "text",
    [
        "a<br>line",
        "Hello &amp; bye",
        "Seen in ${city}.",
        "Seen in %(city)s.",
        "bell\x07",
        "undefined",
        "None",
    ],
)
def test_plain_language_refuses_what_no_reader_wants(text: str) -> None:
    body = contradicted()
    body["summary"] = text
    assert [v.rule for v in validate_verdict(body)] == ["text_is_plain_language"]


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("", 0),
        ("No contradiction.", 1),
        ("Found in 3 families. 2 fired.", 2),
        ("Is it so? Yes! Done.", 3),
        ("RTT of 4.2 ms. Next.", 2),
        ("Seen by Dr. Smith. No. 5 agrees.", 2),
        ("Ends with etc. and more. Then e.g. this. Fine.", 3),
        ("Virgin Islands, U.S. Two.", 1),  # errs low: no false alarm,
        ("Seen (in Lyon.) Then more.", 2),
    ],
)
def test_sentence_count(text: str, count: int) -> None:
    assert sentence_count(text) == count


@pytest.mark.parametrize("run", [".", "a.", "!?", ". A"])
def test_text_rules_read_a_hostile_summary_in_one_pass(run: str) -> None:
    """200,000 characters of marks: a backtracking pattern would not return in a lifetime."""
    body = contradicted()
    body["summary"] = run * (200_000 // len(run))
    assert {v.rule for v in validate_verdict(body)} <= {"summary_is_one_or_two_sentences"}


REFUSALS: dict[str, tuple[str, str]] = {
    # rule name -> (an answer without a valid key that keeps it, one that breaks it)
    "no_verdict_without_a_key": (
        '{"error": {"code": "unauthorized", "message": "Bearer key missing or invalid"}}',
        '{"error": "unauthorized", "data": {"verdict": "contradicted"}}',
    ),
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_refusal_rule_passes_and_catches(name: str) -> None:
    kept, broken = REFUSALS[name]
    assert check_refusal(kept, contradicted()) == []
    assert [v.rule for v in check_refusal(broken, contradicted())] == [name]
    assert validate_verdict(contradicted()) == []  # a verdict is never read as a refusal


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("unauthorized: svs-2026.11.3-4f9c2e1", "provenance.build"),
        (
            "<p>The claimed locale is contradicted by network geometry and the TCP stack.</p>",
            "summary",
        ),
        ('{"error": "unauthorized", "hint": "geo.rtt-floor"}', "signals[0].id"),
        ("401 Unauthorized\nTTL points to Linux.", "signals[1].headline"),
        ('{"verdict": "refused"}', "'verdict'"),
        ('[{"x": {"signals": []}}]', "'signals'"),
    ],
)
def test_a_refusal_quoting_the_verdict_is_caught(text: str, found: str) -> None:
    (violation,) = check_refusal(text, contradicted())
    assert found in violation.message


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Unauthorized",
        '{"error": {"code": "unauthorized", "message": "Provide a Bearer key."}}',
        '{"error": "bad key", "summary": "Send Authorization: Bearer <key>"}',
        "composite",  # a tier alone (shorter than a quote) is no giveaway
        "not JSON {",
    ],
)
def test_a_refusal_without_verdict_data_passes(text: str) -> None:
    assert check_refusal(text, contradicted()) == []
    assert check_refusal(text, None) == []


@pytest.mark.parametrize("name", list(CASES))
def test_rule_passes_a_conforming_body(name: str) -> None:
    body = contradicted()
    CASES[name][0](body)
    assert validate_verdict(body, strict=True) == []


@pytest.mark.parametrize("name", list(CASES))
def test_rule_catches_its_break_and_only_its_break(name: str) -> None:
    body = contradicted()
    CASES[name][1](body)
    violations = validate_verdict(body, strict=True)
    assert violations, f"{name}: the breaking body passed"
    assert {v.rule for v in violations} == {name}
    assert all(v.clause == RULES[name].clause for v in violations)


@pytest.mark.parametrize("name", sorted(_tagged_rules()))
def test_schema_file_expresses_tagged_rule(name: str) -> None:
    """Integrators with only the schema file catch the same break."""
    good, bad = contradicted(), contradicted()
    CASES[name][0](good)
    CASES[name][1](bad)
    assert not _schema_alone_rejects(good)
    assert _schema_alone_rejects(bad)


def test_strict_only_rule_is_silent_by_default() -> None:
    body = contradicted()
    body["risk_score"] = 0.4
    assert validate_verdict(body) == []
    assert [v.path for v in validate_verdict(body, strict=True)] == ["/risk_score"]


def test_conclusive_with_absolute_signal_from_one_family() -> None:
    body = contradicted()
    _ONE_FAMILY(body)
    body["signals"][0]["tier"] = "absolute"
    assert validate_verdict(body) == []
    body["conclusive"] = False
    assert [v.rule for v in validate_verdict(body)] == ["conclusive_matches_signals"]


def test_unknown_prefixes_count_as_distinct_families() -> None:
    body = contradicted()
    body["signals"] = [
        {"id": "tls.ja4", "tier": "composite", "headline": "h"},
        {"id": "render.gpu", "tier": "composite", "headline": "h"},
    ]
    body["contradicting_families"] = ["tls-construction", "render"]
    assert validate_verdict(body) == []
    body["signals"][1]["id"] = "tls.alpn"
    assert [v.rule for v in validate_verdict(body)] == ["conclusive_matches_signals"]


def test_registry_rejects_a_duplicate_name() -> None:
    with pytest.raises(ValueError, match="already registered"):
        rule("§9")(RULES["schema_version"].check)


@pytest.mark.parametrize(
    "field",
    [
        "schema",
        "provenance",
        "verdict",
        "conclusive",
        "contradicting_families",
        "families",
        "signals",
        "summary",
    ],
)
@pytest.mark.parametrize("wrong", [None, "7", 3.5, []])
def test_a_wrong_type_is_reported_once_without_cascading(field: str, wrong: object) -> None:
    body = contradicted()
    if type(body[field]) is type(wrong):
        pytest.skip("not a wrong value for this field")
    body[field] = wrong
    violations = validate_verdict(body, strict=True)
    assert [v.path for v in violations] == [f"/{field}"], violations
