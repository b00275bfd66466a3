"""Verdict bodies shared by the tests: the example shipped with the schema, and variations."""

from __future__ import annotations

from typing import Any

from verdict_contract.core.resources import example_verdict

Body = dict[str, Any]


def contradicted() -> Body:
    """A conclusive contradicted verdict: composite signals from two families."""
    return example_verdict()


def uncontradicted() -> Body:
    body = contradicted()
    body.update(
        verdict="uncontradicted",
        conclusive=False,
        contradicting_families=[],
        signals=[],
        summary="No contradiction was found.",
    )
    return body
