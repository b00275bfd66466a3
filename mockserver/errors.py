"""The one shape of every non-200 answer: ``{"error": {"code": ..., "message": ...}}``."""

from __future__ import annotations

import json

from flask import Response

NO_STORE = "no-store"


def error_response(status: int, code: str, message: str, **headers: str) -> Response:
    body = json.dumps({"error": {"code": code, "message": message}}, ensure_ascii=False)
    response = Response(body, status, content_type="application/json")
    response.headers["Cache-Control"] = NO_STORE
    for name, value in headers.items():
        response.headers[name.replace("_", "-")] = value
    return response
