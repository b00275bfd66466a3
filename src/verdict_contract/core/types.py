"""Types of the verdict body for integrators' type checkers: one ``TypedDict`` per object.

They are written down to match ``schema/verdict-7.schema.json``; ``tests/core/test_types.py``
compares every key, required set and enum with the schema, so the two cannot drift apart.
"""

from __future__ import annotations

from typing import TypedDict

from .spec import Family as Family
from .spec import Tier, VerdictKind
from .spec import VerdictRow as VerdictRow


class Provenance(TypedDict):
    build: str


class Families(TypedDict):
    measured: int
    reporting: int


class Signal(TypedDict):
    id: str
    tier: Tier
    headline: str


class Verdict(TypedDict):
    """A schema-7 verdict body (``GET /e`` answering 200)."""

    schema: int
    provenance: Provenance
    verdict: VerdictKind
    conclusive: bool
    summary: str
    contradicting_families: list[Family]
    families: Families
    signals: list[Signal]


__all__ = [
    "Families",
    "Family",
    "Provenance",
    "Signal",
    "Tier",
    "Verdict",
    "VerdictKind",
    "VerdictRow",
]
