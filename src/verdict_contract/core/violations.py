"""The typed failure every check reports: what was received, what the contract documents."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .redact import escaped

_MAX_SHOWN = 80


def describe(value: object, limit: int = _MAX_SHOWN) -> str:
    """Render a received value as short JSON, cut to ``limit`` characters, nothing in it that a
    terminal or a renderer would act on (:func:`.redact.escaped`)."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr)
    except (TypeError, ValueError):  # e.g. NaN keys or recursion: fall back to repr
        text = repr(value)
    text = escaped(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def pointer(parts: Iterable[str | int]) -> str:
    """Return the RFC 6901 JSON pointer for a path (``""`` is the whole body), as output shows
    it: a name a target sent holds no line break or escape (:func:`.redact.escaped`)."""
    return escaped("".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts))


@dataclass(frozen=True)
class Violation:
    """One way a response breaks the contract.

    ``rule`` names the registry rule (or ``json_schema.<keyword>`` for a schema constraint),
    ``path`` is a JSON pointer into the body and ``clause`` the spec section it comes from.
    """

    rule: str
    path: str
    message: str
    clause: str
    received: str = ""
    documented: str = ""

    def __str__(self) -> str:
        where = self.path or "(body)"
        text = f"{where}: {self.message} [{self.rule}, spec {self.clause}]"
        if self.received or self.documented:
            text += f"\n      received:   {self.received}\n      documented: {self.documented}"
        return text


def format_violations(violations: Sequence[Violation], *, subject: str = "verdict") -> str:
    """Render violations as a readable block for an assertion message or a terminal."""
    count = len(violations)
    noun = "violation" if count == 1 else "violations"
    lines = [f"{subject} breaks the contract ({count} {noun}):"]
    lines.extend(f"  - {v}" for v in violations)
    return "\n".join(lines)
