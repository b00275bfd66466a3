"""An answer of the mock, independent of the web framework, and the shape of every error.

Every non-200 answer is ``{"error": {"code": ..., "message": ...}}`` as JSON, never cached.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from flask import Response

JSON = "application/json"
NO_STORE = "no-store"


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)
    outcome: str = ""  # one word for the journal: verdict, unknown, expired, scripted, ...


def error_answer(status: int, code: str, message: str, outcome: str = "", **headers: str) -> Answer:
    body = json.dumps({"error": {"code": code, "message": message}}, ensure_ascii=False)
    extra = [(name.replace("_", "-"), value) for name, value in headers.items()]
    return Answer(status, body.encode(), [("Cache-Control", NO_STORE), *extra], outcome or code)


def to_response(answer: Answer) -> Response:
    """The Flask response for an answer (Content-Length set unless the answer sets it)."""
    response = Response(answer.body, answer.status, content_type=JSON)
    for name, value in answer.headers:
        response.headers[name] = value
    return response


def error_response(status: int, code: str, message: str, **headers: str) -> Response:
    return to_response(error_answer(status, code, message, **headers))
