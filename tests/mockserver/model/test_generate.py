"""mockserver.generate: deterministic verdicts that always keep the contract."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import run_threads
from verdict_contract import validate_verdict
from verdict_contract.core.spec import FAMILIES, KNOWN_PREFIXES, VERDICTS, VerdictKind, family_of
from verdict_contract.mockserver.model.generate import (
    CATALOGUE,
    DEFAULT_CONCLUSIVE,
    FAMILY_PREFIX,
    RENDERED_KEPT,
    VerdictGenerator,
    templates,
)
from verdict_contract.mockserver.model.sessions import SessionSpec, SpecError, parse_spec

PROPERTY_IDS = 1_000

ALL_COMBINATIONS = {
    ("contradicted", True),
    ("contradicted", False),
    ("refused", True),
    ("refused", False),
    ("disputed", False),
    ("uncontradicted", False),
    ("insufficient", False),
}
"""Every (verdict, conclusive) pair spec §2.4 allows."""


@pytest.fixture(scope="module")
def bodies() -> list[dict[str, Any]]:
    """The verdicts of 1,000 ids with nothing requested, generated once for several tests."""
    generator = VerdictGenerator("property-seed")
    return [generator.verdict(f"session-{i}") for i in range(PROPERTY_IDS)]


# --- determinism ------------------------------------------------------------------------------


def test_same_seed_and_id_give_identical_bytes() -> None:
    first, second = VerdictGenerator("seed-a"), VerdictGenerator("seed-a")
    for i in range(50):
        spec = SessionSpec()
        assert first.render(f"id-{i}", spec) == second.render(f"id-{i}", spec)
        assert first.verdict(f"id-{i}") == second.verdict(f"id-{i}")


def test_render_is_the_compact_json_of_verdict() -> None:
    generator = VerdictGenerator("seed-a")
    raw = generator.render("id-1", SessionSpec())
    body = generator.verdict("id-1")
    assert raw == json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    assert raw.startswith(b'{"schema":7,')


def test_a_body_kept_for_an_id_is_rendered_anew_for_another_spec() -> None:
    generator = VerdictGenerator("seed-a")
    refused = generator.render("id-1", SessionSpec(verdict="refused"))
    assert json.loads(refused)["verdict"] == "refused"
    disputed = generator.render("id-1", SessionSpec(verdict="disputed"))
    assert json.loads(disputed)["verdict"] == "disputed"
    # an equal spec, another object: the kept body
    assert generator.render("id-1", SessionSpec(verdict="disputed")) is disputed


def test_rendered_bodies_are_bounded() -> None:
    generator = VerdictGenerator("seed-a")
    first = generator.render("id-0", SessionSpec())
    for i in range(1, RENDERED_KEPT + 1):
        generator.render(f"id-{i}", SessionSpec())
    again = generator.render("id-0", SessionSpec())
    assert again is not first  # forgotten once the generator kept its most
    assert again == first  # rendered alike


def test_different_seed_gives_different_bytes() -> None:
    first, second = VerdictGenerator("seed-a"), VerdictGenerator("seed-b")
    for i in range(50):
        assert first.render(f"id-{i}", SessionSpec()) != second.render(f"id-{i}", SessionSpec())


def test_different_ids_give_different_bytes() -> None:
    generator = VerdictGenerator("seed-a")
    rendered = {generator.render(f"id-{i}", SessionSpec()) for i in range(200)}
    assert len(rendered) == 200


def test_generation_does_not_depend_on_what_was_generated_before() -> None:
    fresh = VerdictGenerator("seed-a").verdict("target")
    used = VerdictGenerator("seed-a")
    for i in range(30):
        used.verdict(f"before-{i}")
    assert used.verdict("target") == fresh


# --- the contract, over many ids --------------------------------------------------------------


def test_every_generated_verdict_keeps_the_strict_contract(bodies: list[dict[str, Any]]) -> None:
    assert len(bodies) == PROPERTY_IDS
    broken = {
        i: [str(v) for v in validate_verdict(body, strict=True)] for i, body in enumerate(bodies)
    }
    assert {i: v for i, v in broken.items() if v} == {}


def test_strict_validation_would_catch_a_broken_generated_verdict(
    bodies: list[dict[str, Any]],
) -> None:
    # the property above can fail: the same check finds a broken copy of a generated body
    body = dict(bodies[0])
    body["verdict"] = "disputed" if body["verdict"] == "contradicted" else "contradicted"
    body["conclusive"] = True
    assert validate_verdict(body, strict=True)


def test_every_verdict_and_conclusive_combination_appears(
    bodies: list[dict[str, Any]],
) -> None:
    seen = Counter((body["verdict"], body["conclusive"]) for body in bodies)
    assert set(seen) == ALL_COMBINATIONS
    assert seen[("refused", True)] > 0


def _basis(body: dict[str, Any]) -> bool:
    """Whether the signals make a verdict conclusive by §2.2: one absolute, or composites from
    two families."""
    tiers = [(s["tier"], family_of(s["id"])) for s in body["signals"]]
    composite = {family for tier, family in tiers if tier == "composite"}
    return any(tier == "absolute" for tier, _ in tiers) or len(composite) >= 2


def test_a_conclusive_refusal_rests_on_the_basis_of_section_2_2(
    bodies: list[dict[str, Any]],
) -> None:
    """§2.4 lets a refusal's conclusive vary; §2.2 says what conclusive rests on: the mock's
    conclusive refusals meet it, and its inconclusive ones do not."""
    refused = [b for b in bodies if b["verdict"] == "refused"]
    asked = [
        VerdictGenerator("s").verdict(
            f"r-{i}", parse_spec({"verdict": "refused", "conclusive": True})
        )
        for i in range(200)
    ]
    for body in [*refused, *asked]:
        assert _basis(body) is body["conclusive"], body
    assert sum(b["conclusive"] for b in refused) > 0
    assert not _basis({"signals": [{"id": "geo.a", "tier": "composite"}]})  # one family: none


def test_signals_come_from_the_catalogue_with_filled_headlines(
    bodies: list[dict[str, Any]],
) -> None:
    known_ids = {t.id_for(family) for family in FAMILIES for t in CATALOGUE[family]}
    for body in bodies[:2000]:
        for signal in body["signals"]:
            assert signal["id"] in known_ids
            assert "{" not in signal["headline"]  # every placeholder was filled
        assert body["families"]["reporting"] <= body["families"]["measured"]


@settings(max_examples=300, deadline=None)
@given(session_id=st.text(min_size=1, max_size=256))
def test_any_session_id_gives_a_valid_verdict(session_id: str) -> None:
    body = VerdictGenerator("hypothesis").verdict(session_id)
    assert validate_verdict(body, strict=True) == []


# --- requested verdicts -----------------------------------------------------------------------


@pytest.mark.parametrize(("verdict", "conclusive"), sorted(ALL_COMBINATIONS))
def test_requested_verdict_and_conclusive_are_honoured(verdict: str, conclusive: bool) -> None:
    generator = VerdictGenerator("requested")
    spec = parse_spec({"verdict": verdict, "conclusive": conclusive})
    for i in range(60):
        body = generator.verdict(f"id-{i}", spec)
        assert (body["verdict"], body["conclusive"]) == (verdict, conclusive)
        assert validate_verdict(body, strict=True) == []


@pytest.mark.parametrize("verdict", VERDICTS)
def test_requested_verdict_alone_is_honoured(verdict: VerdictKind) -> None:
    generator = VerdictGenerator("requested")
    spec = parse_spec({"verdict": verdict})
    values = set()
    for i in range(80):
        body = generator.verdict(f"id-{i}", spec)
        assert body["verdict"] == verdict
        values.add(body["conclusive"])
    assert values == {DEFAULT_CONCLUSIVE[verdict]}  # the documented default, every time


@pytest.mark.parametrize(
    ("conclusive", "kinds"),
    [(False, set(VERDICTS)), (True, {"contradicted", "refused"})],  # only these can be conclusive
)
def test_requested_conclusive_alone_is_honoured(conclusive: bool, kinds: set[str]) -> None:
    generator = VerdictGenerator("requested")
    spec = SessionSpec(conclusive=conclusive)
    verdicts = set()
    for i in range(100):
        body = generator.verdict(f"id-{i}", spec)
        assert body["conclusive"] is conclusive
        assert validate_verdict(body, strict=True) == []
        verdicts.add(body["verdict"])
    assert verdicts == kinds


@pytest.mark.parametrize("verdict", ["disputed", "uncontradicted", "insufficient"])
def test_impossible_spec_raises_spec_error(verdict: VerdictKind) -> None:
    generator = VerdictGenerator("requested")
    assert generator.verdict("id", SessionSpec(verdict=verdict, conclusive=False))
    with pytest.raises(SpecError, match=f"'{verdict}' verdict is never conclusive"):
        generator.verdict("id", SessionSpec(verdict=verdict, conclusive=True))
    with pytest.raises(SpecError):
        generator.render("id", SessionSpec(verdict=verdict, conclusive=True))


# --- field overrides --------------------------------------------------------------------------


def test_override_that_keeps_the_contract_is_applied() -> None:
    spec = parse_spec({"verdict": "uncontradicted", "fields": {"summary": "Custom summary."}})
    body = VerdictGenerator("fields").verdict("id", spec)
    assert body["summary"] == "Custom summary."
    assert body["verdict"] == "uncontradicted"
    assert validate_verdict(body, strict=True) == []


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"schema": 8}, "/schema"),
        ({"summary": "  "}, "/summary"),
        ({"contradicting_families": ["render"]}, "/contradicting_families"),
        ({"families": {"measured": 2, "reporting": 5}}, "/families/reporting"),
    ],
)
def test_override_that_breaks_the_contract_raises_unless_allowed(
    fields: dict[str, object], problem: str
) -> None:
    generator = VerdictGenerator("fields")
    spec = parse_spec({"verdict": "uncontradicted", "fields": fields})
    with pytest.raises(SpecError) as caught:
        generator.verdict("id", spec)
    assert "the field overrides break the contract" in str(caught.value)
    assert problem in str(caught.value)
    assert "allow_invalid" in str(caught.value)
    allowed = parse_spec({"verdict": "uncontradicted", "fields": fields, "allow_invalid": True})
    body = generator.verdict("id", allowed)
    for name, value in fields.items():
        assert body[name] == value
    assert validate_verdict(body, strict=True) != []


# --- threads ----------------------------------------------------------------------------------


def test_same_ids_from_8_threads_give_identical_bytes() -> None:
    ids = [f"thread-id-{i}" for i in range(300)]
    expected = [
        json.dumps(VerdictGenerator("threads").verdict(session_id)).encode() for session_id in ids
    ]
    shared = VerdictGenerator("threads")
    results: dict[int, list[bytes]] = {}

    def work(index: int) -> None:
        order = ids if index % 2 else list(reversed(ids))
        got = {sid: json.dumps(shared.verdict(sid)).encode() for sid in order}
        results[index] = [got[sid] for sid in ids]

    run_threads(8, work)
    assert len(results) == 8
    for index in range(8):
        assert results[index] == expected, f"thread {index} generated different bytes"


def test_cached_render_from_8_threads_gives_identical_bytes() -> None:
    ids = [f"cached-{i}" for i in range(100)]
    expected = [VerdictGenerator("threads").render(sid, SessionSpec()) for sid in ids]
    shared = VerdictGenerator("threads")
    results: dict[int, list[bytes]] = {}

    def work(index: int) -> None:
        results[index] = [shared.render(sid, SessionSpec()) for sid in ids]

    run_threads(8, work)
    assert all(results[index] == expected for index in range(8))


# --- catalogue --------------------------------------------------------------------------------


def test_catalogue_uses_the_prefixes_the_spec_names() -> None:
    for prefix, family in KNOWN_PREFIXES.items():
        assert FAMILY_PREFIX[family] == prefix
        for template in CATALOGUE[family]:
            signal_id = template.id_for(family)
            assert signal_id.startswith(f"{prefix}.")
            assert family_of(signal_id) == family


def test_catalogue_prefixes_are_one_per_family() -> None:
    assert set(FAMILY_PREFIX) == set(CATALOGUE) == set(FAMILIES)
    assert len(set(FAMILY_PREFIX.values())) == len(FAMILIES)
    for family in FAMILIES:
        assert {family_of(t.id_for(family)) for t in CATALOGUE[family]} == {
            KNOWN_PREFIXES.get(FAMILY_PREFIX[family], FAMILY_PREFIX[family])
        }


def test_every_family_has_a_signal_of_every_tier() -> None:
    for family in FAMILIES:
        for tier in ("absolute", "composite", "conditional", "weak"):
            assert templates(family, tier), f"{family} has no {tier} signal"


def test_generated_signal_prefixes_match_their_contradicting_family(
    bodies: list[dict[str, Any]],
) -> None:
    family_by_prefix = {prefix: family for family, prefix in FAMILY_PREFIX.items()}
    for body in bodies:
        prefixes = {signal["id"].partition(".")[0] for signal in body["signals"]}
        if body["verdict"] == "contradicted":
            assert {family_by_prefix[p] for p in prefixes} == set(body["contradicting_families"])
        for prefix, family in KNOWN_PREFIXES.items():
            if family in body["contradicting_families"]:
                assert prefix in prefixes
