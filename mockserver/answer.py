"""An answer of the mock, independent of the web framework, and the shape of every error.

Every non-200 answer is ``{"error": {"code": ..., "message": ...}}`` as JSON, never cached.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from http import HTTPStatus

JSON = "application/json"
NO_STORE = "no-store"

Headers = Sequence[tuple[str, str]]


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)
    outcome: str = ""  # one word for the journal: verdict, unknown, expired, scripted, ...
    fault: str | None = None  # the connection fault it carries (faults.py), for the journal


_REASONS = {status.value: f"{status.value} {status.phrase}" for status in HTTPStatus}


def status_line(status: int) -> str:
    """The WSGI status string for a code: ``"404 Not Found"`` (``"599 Unknown"`` if unnamed)."""
    return _REASONS.get(status) or f"{status} Unknown"


def error_body(code: str, message: str) -> bytes:
    """The documented error shape, as JSON bytes."""
    return json.dumps({"error": {"code": code, "message": message}}, ensure_ascii=False).encode()


def error_answer(
    status: int, code: str, message: str, outcome: str = "", headers: Headers = ()
) -> Answer:
    """An error answer; ``outcome`` defaults to ``code``, ``headers`` come after Cache-Control."""
    return Answer(
        status, error_body(code, message), [("Cache-Control", NO_STORE), *headers], outcome or code
    )
