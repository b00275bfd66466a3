"""make_verdict, the faker provider and the hypothesis strategy yield contract-valid verdicts."""

from __future__ import annotations

from typing import Any

import pytest
from faker import Faker
from hypothesis import given, settings

from verdict_contract import validate_verdict
from verdict_contract.core.spec import TIERS, VERDICTS
from verdict_contract.mockserver import InvalidVerdictError, VerdictProvider, make_verdict
from verdict_contract.mockserver.strategies import verdicts


@pytest.mark.parametrize("kind", VERDICTS)
def test_make_verdict_honours_the_kind(kind: str) -> None:
    body = make_verdict(kind)  # type: ignore[arg-type]
    assert body["verdict"] == kind
    assert validate_verdict(body, strict=True) == []


def test_make_verdict_is_deterministic_per_seed() -> None:
    assert make_verdict("contradicted", True) == make_verdict("contradicted", True)
    assert make_verdict("contradicted", True) != make_verdict("contradicted", True, seed="other")


def test_make_verdict_returns_independent_copies() -> None:
    first = make_verdict("disputed")
    first["signals"].clear()
    assert make_verdict("disputed")["signals"] != []


def test_conclusive_alone_picks_a_kind_that_can_be_conclusive() -> None:
    assert make_verdict(conclusive=True)["verdict"] in ("contradicted", "refused")


def test_valid_overrides_are_applied() -> None:
    body = make_verdict("uncontradicted", summary="Nothing contradicts the claims.")
    assert body["summary"] == "Nothing contradicts the claims."


@pytest.mark.parametrize(
    "overrides", [{"signals": "none"}, {"contradicting_families": ["render"]}, {"summary": ""}]
)
def test_breaking_overrides_raise(overrides: dict[str, Any]) -> None:
    with pytest.raises(InvalidVerdictError, match="valid=False"):
        make_verdict("uncontradicted", **overrides)
    broken = make_verdict("uncontradicted", valid=False, **overrides)
    assert validate_verdict(broken) != []


def test_a_future_body_is_built_on_purpose_as_mint_builds_one() -> None:
    """``schema=`` and ``extra=`` change the body as §9 lets the service change it; the same
    keywords as field overrides still break the contract and raise."""
    body: dict[str, Any] = dict(make_verdict("refused", schema=8, extra={"appeal": "open"}))
    assert body["schema"] == 8
    assert body["appeal"] == "open"
    del body["appeal"]
    body["schema"] = 7
    assert body == make_verdict("refused")  # nothing else changed, and that is valid
    with pytest.raises(InvalidVerdictError, match="valid=False"):
        make_verdict("refused", appeal="open")


def test_impossible_conclusive_raises_unless_asked() -> None:
    with pytest.raises(InvalidVerdictError, match="never conclusive"):
        make_verdict("disputed", True)
    body = make_verdict("disputed", True, valid=False)
    assert [v.rule for v in validate_verdict(body)] == ["never_conclusive"]


def test_faker_provider_is_seeded_by_faker() -> None:
    def draw(seed: int) -> dict[str, Any]:
        fake = Faker()
        fake.add_provider(VerdictProvider)
        fake.seed_instance(seed)
        return fake.verdict()  # type: ignore[no-any-return]

    assert draw(1) == draw(1)
    assert draw(1) != draw(2)
    assert validate_verdict(draw(3), strict=True) == []


@pytest.mark.parametrize("tier", TIERS)
def test_faker_signal(tier: str) -> None:
    fake = Faker()
    fake.add_provider(VerdictProvider)
    signal = fake.signal("network-geometry", tier)
    assert signal["id"].startswith("geo.")
    assert signal["tier"] == tier
    assert "{" not in signal["headline"]


@settings(max_examples=200, deadline=None)
@given(verdicts())
def test_strategy_yields_only_valid_verdicts(body: dict[str, Any]) -> None:
    assert validate_verdict(body, strict=True) == []


@settings(max_examples=30, deadline=None)
@given(verdicts("refused", conclusive=True))
def test_strategy_respects_its_arguments(body: dict[str, Any]) -> None:
    assert (body["verdict"], body["conclusive"]) == ("refused", True)


def test_strategy_refuses_an_impossible_request() -> None:
    with pytest.raises(ValueError, match="never conclusive"):
        verdicts("insufficient", conclusive=True)
