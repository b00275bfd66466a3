"""Parsing the values people type (flags, environment variables): one reader per kind.

The mock's settings (mockserver/settings.py) and the suite's options (contract_tests/config.py)
read through these, so ``--threads 0`` and ``--verdict-request-timeout 0`` are refused in the
same words; each raises ValueError naming the value, and its caller names the option.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

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


def whole_number(raw: str) -> int:
    """An integer, as typed."""
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{raw!r} is not a whole number") from None


def number(raw: str) -> float:
    """A number, as typed."""
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{raw!r} is not a number") from None


def positive_int(raw: str) -> int:
    """A whole number of at least 1."""
    value = whole_number(raw)
    if value < 1:
        raise ValueError(f"{raw!r}: must be at least 1")
    return value


def port(raw: str) -> int:
    """A TCP port, 0 for a free one."""
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise ValueError(
            f"{raw!r} is not a port: a whole number from 0 to 65535 (0 picks a free one)"
        )
    return value


def seconds(raw: str) -> float:
    """A positive number of seconds (a timeout, an interval)."""
    value = number(raw)
    if not 0 < value < math.inf:
        raise ValueError(f"{raw!r}: must be a positive number of seconds")
    return value


def one_of(*choices: str) -> Callable[[str], str]:
    """A reader of one of ``choices``, in any case."""

    def read(raw: str) -> str:
        if raw.strip().lower() not in choices:
            raise ValueError(f"{raw!r} is not one of {', '.join(choices)}")
        return raw.strip().lower()

    return read


def host_name(raw: str) -> str:
    """A host name (no scheme, user, path or space), lower-cased."""
    if not raw.strip() or any(c in raw for c in "/@ "):
        raise ValueError(f"{raw!r} is not a host name")
    return raw.strip().lower()


def output_file(raw: str) -> str:
    """A file a report is written to, its folder made now (as ``--junitxml`` makes its own), so
    a path that cannot be written is said before the run, not in a traceback after it."""
    path = Path(raw)
    if path.is_dir():
        raise ValueError(f"{raw!r} is a folder; name a file in it")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"{raw!r}: its folder cannot be made ({exc.strerror or exc})") from None
    return raw
