"""The documented part of a verdict, and a readable diff of two of them (spec §8 immutability).

A verdict does not change once produced; fields the spec does not document (a per-call
``meta.request_id``, a timestamp) are allowed to, so only the documented ones are compared.
"""

from __future__ import annotations

import copy
import difflib
import json
from typing import Any

from verdict_contract.core.validator import unknown_properties


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def documented(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` without the properties the schema does not document."""
    kept = copy.deepcopy(body)
    # Deepest first, so that removing /signals/0/x never shifts another path.
    for path in sorted((v.path for v in unknown_properties(body)), key=len, reverse=True):
        *parents, last = (_unescape(t) for t in path.lstrip("/").split("/"))
        node: Any = kept
        for token in parents:
            node = node[int(token)] if isinstance(node, list) else node.get(token)
        if isinstance(node, dict):
            node.pop(last, None)
    return kept


def documented_diff(
    first: dict[str, Any], second: dict[str, Any], later: str = "second call"
) -> list[str]:
    """The unified diff of the documented fields of two verdicts; empty when they agree."""

    def lines(body: dict[str, Any]) -> list[str]:
        return json.dumps(documented(body), indent=2, sort_keys=True).splitlines()

    return list(
        difflib.unified_diff(lines(first), lines(second), "first call", later, n=1, lineterm="")
    )
