"""The Flask app of the mock: ``GET /e`` as the spec describes it, plus error handling."""

from __future__ import annotations

import math
import time
from urllib.parse import parse_qsl

from flask import Flask, Response, current_app, request
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from contract_tests.spec import ENDPOINT_PATH, SESSION_PARAM
from mockserver.errors import error_response
from mockserver.faults import FaultMiddleware, fault_response
from mockserver.sessions import MAX_SESSION_ID_LENGTH, Session, SpecError, Step
from mockserver.settings import Settings
from mockserver.state import MockState

EXTENSION = "verdict_mock"
VERDICT_CACHE_CONTROL = "private, max-age=86400, immutable"
"""A verdict never changes (spec §8), so callers may keep it; it is per key, hence private."""

_STEP_ERRORS = {
    401: ("unauthorized", "scripted: missing or invalid API key"),
    404: ("session_not_found", "scripted: unknown or expired session"),
    429: ("rate_limited", "scripted: rate limit exceeded; retry after the announced time"),
    500: ("internal_error", "scripted: internal server error"),
    503: ("unavailable", "scripted: service unavailable; retry later"),
}


def state_of(app: Flask | None = None) -> MockState:
    """Return the state a mock app (by default the current one) owns."""
    state: MockState = (app or current_app).extensions[EXTENSION]
    return state


def _bearer(header: str | None) -> str | None:
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def _session_ids(query_string: bytes) -> list[str] | None:
    """Return the ``n`` values of a raw query string, or None if they are not UTF-8.

    werkzeug keeps undecodable escapes such as ``%FF`` as literal text; the mock refuses them.
    """
    try:
        pairs = parse_qsl(query_string.decode("utf-8"), keep_blank_values=True, errors="strict")
    except (UnicodeDecodeError, ValueError):
        return None
    return [value for name, value in pairs if name == SESSION_PARAM]


def _bad_session_id(values: list[str] | None) -> str | None:
    """Say what is wrong with the ``n`` values of a request, if anything."""
    if values is None:
        return "the query string is not valid UTF-8 percent-encoding"
    if not values:
        return "the query parameter n (the session id) is missing"
    if len(values) > 1:
        return f"the query parameter n was given {len(values)} times; send it once"
    (value,) = values
    if not value:
        return "the query parameter n is empty"
    if len(value) > MAX_SESSION_ID_LENGTH:
        return f"the session id is longer than {MAX_SESSION_ID_LENGTH} characters"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return "the session id holds control characters"
    return None


def _step_response(step: Step, body: bytes) -> Response | None:
    if step.status is not None:
        code, message = _STEP_ERRORS[step.status]
        if step.status in (429, 503):
            return error_response(step.status, code, message, Retry_After="1")
        if step.status == 401:
            return error_response(401, code, message, WWW_Authenticate="Bearer")
        return error_response(step.status, code, message)
    if step.fault is not None:
        return fault_response(step.fault, body)
    time.sleep(step.delay_ms / 1000)
    return None


def explain(state: MockState) -> tuple[Response, str]:
    """Answer ``GET /e``; returns the response and a one-word outcome for the journal."""
    key = _bearer(request.headers.get("Authorization"))
    if key is None or not state.key_ok(key):
        return error_response(
            401,
            "unauthorized",
            "missing or invalid API key; send Authorization: Bearer <key>",
            WWW_Authenticate="Bearer",
        ), "unauthorized"
    wait = state.limiter.admit(key)
    if wait is not None:
        return error_response(
            429,
            "rate_limited",
            "rate limit exceeded for this API key",
            Retry_After=str(max(1, math.ceil(wait))),
        ), "rate_limited"
    values = _session_ids(request.query_string)
    problem = _bad_session_id(values)
    if problem is not None or not values:
        return error_response(400, "bad_request", problem or ""), "bad_request"
    session_id = values[0]
    session = state.lookup(session_id)
    if session is None:
        return error_response(
            404, "session_not_found", "unknown session id, or the session expired"
        ), "unknown"
    body = state.generator.render(session.id, session.spec)
    step = state.scripts.next_step(session_id) or session.spec.always
    if step is not None:
        scripted = _step_response(step, body)
        if scripted is not None:
            return scripted, "scripted"
    if session.expired(time.time(), state.settings.session_lifetime):
        return error_response(
            404, "session_not_found", "unknown session id, or the session expired"
        ), "expired"
    response = Response(body, 200, content_type="application/json")
    response.headers["Cache-Control"] = VERDICT_CACHE_CONTROL
    return response, "verdict"


def _journaled_explain() -> Response:
    state = state_of()
    response, outcome = explain(state)
    response.headers["Vary"] = "Authorization"
    state.journal.record(
        method=request.method,
        path=request.path,
        args=request.args.items(multi=True),
        authorization=request.headers.get("Authorization"),
        status=response.status_code,
        outcome=outcome,
    )
    return response


def _http_error(error: HTTPException) -> Response:
    status = error.code or 400
    if isinstance(error, MethodNotAllowed):
        allowed = ", ".join(error.valid_methods or ())
        return error_response(
            405,
            "method_not_allowed",
            f"{request.method} is not allowed here; use {allowed}",
            Allow=allowed,
        )
    if status == 404:
        return error_response(
            404, "not_found", f"no such endpoint; the API is GET {ENDPOINT_PATH}?n=<session id>"
        )
    if status >= 500:  # never answer 5xx to a request, however malformed
        status = 400
    return error_response(
        status, error.name.lower().replace(" ", "_"), error.description or error.name
    )


def _unexpected_error(error: Exception) -> Response:
    current_app.logger.exception("unexpected error answering %s", request.path)
    if isinstance(error, SpecError):
        return error_response(422, "invalid_session", str(error))
    return error_response(400, "bad_request", "the request could not be processed")


def create_app(settings: Settings | None = None) -> Flask:
    """Build the mock app for ``settings`` (the defaults serve the demo sessions)."""
    settings = settings or Settings()
    app = Flask("mockserver")
    app.json.sort_keys = False  # type: ignore[attr-defined]
    state = MockState(settings)
    app.extensions[EXTENSION] = state
    app.add_url_rule(
        ENDPOINT_PATH,
        "explain",
        _journaled_explain,
        methods=["GET"],
        provide_automatic_options=False,
    )
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _unexpected_error)
    if settings.control:
        from mockserver.control import control

        app.register_blueprint(control)
    app.wsgi_app = FaultMiddleware(app.wsgi_app)  # type: ignore[method-assign]
    return app


def session_url(session: Session) -> str:
    return f"{ENDPOINT_PATH}?{SESSION_PARAM}={session.id}"
