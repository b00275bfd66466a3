"""Hand-written verdict bodies shared by the tests (written from the spec, not from the code)."""

from __future__ import annotations

import copy
from typing import Any

Body = dict[str, Any]

_CONCLUSIVE_CONTRADICTED: Body = {
    "schema": 7,
    "provenance": {"build": "svs-2026.11.3-4f9c2e1"},
    "verdict": "contradicted",
    "conclusive": True,
    "summary": "The claimed locale is contradicted by network geometry and the TCP stack.",
    "contradicting_families": ["network-geometry", "transport-stack"],
    "families": {"measured": 6, "reporting": 6},
    "signals": [
        {"id": "geo.rtt-floor", "tier": "composite", "headline": "RTT is below the floor."},
        {"id": "stack.ttl-os", "tier": "composite", "headline": "TTL points to Linux."},
    ],
}


def contradicted() -> Body:
    """A conclusive contradicted verdict: composite signals from two families."""
    return copy.deepcopy(_CONCLUSIVE_CONTRADICTED)


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
