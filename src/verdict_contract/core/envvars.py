"""Reading values people type (flags, environment variables): one parser per kind."""

from __future__ import annotations

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off", "")


def parse_bool(raw: str) -> bool:
    """``1/true/yes/on`` or ``0/false/no/off`` (any case; empty is false); else ValueError."""
    value = raw.strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise ValueError(f"{raw!r} is not a boolean (use 1/0, true/false, yes/no, on/off)")
