"""The mock's answers as Flask responses, and the state a mock app owns."""

from __future__ import annotations

from flask import Flask, Response, current_app, g

from ..model.answer import JSON, Answer, Headers, error_answer
from ..state import MockState

EXTENSION = "verdict_mock"
"""Where a mock app keeps its :class:`MockState` (``app.extensions``)."""


SCOPE = "verdict_tenant"
"""Where a control call keeps the state of its token's tenant (``flask.g``, see guard.py)."""


def state_of(app: Flask | None = None) -> MockState:
    """The state a mock app (by default the current one) owns; in a control call, its token's
    tenant's (``--tenants``)."""
    if app is None and (scoped := g.get(SCOPE)) is not None:
        return scoped  # type: ignore[no-any-return]
    state: MockState = (app or current_app).extensions[EXTENSION]
    return state


def to_response(answer: Answer) -> Response:
    """The Flask response for an answer (Content-Length set unless the answer sets it)."""
    response = Response(answer.body, answer.status, content_type=JSON)
    for name, value in answer.headers:
        response.headers[name] = value
    return response


def error_response(status: int, code: str, message: str, headers: Headers = ()) -> Response:
    return to_response(error_answer(status, code, message, headers=headers))
