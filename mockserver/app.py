"""The Flask app of the mock: ``/e``, the control API and error handling, built per settings."""

from __future__ import annotations

from urllib.parse import urlencode

from flask import Flask, Response, current_app, request
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from contract_tests.spec import ENDPOINT_PATH, SESSION_PARAM
from mockserver.answer import error_response
from mockserver.faults import FaultMiddleware
from mockserver.sessions import Session, SpecError
from mockserver.settings import Settings
from mockserver.state import MockState

EXTENSION = "verdict_mock"


def state_of(app: Flask | None = None) -> MockState:
    """Return the state a mock app (by default the current one) owns."""
    state: MockState = (app or current_app).extensions[EXTENSION]
    return state


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
    if isinstance(error, SpecError):  # a request the mock cannot honour: said, not logged
        return error_response(422, "invalid_session", str(error))
    current_app.logger.exception("unexpected error answering %s", request.path)
    return error_response(400, "bad_request", "the request could not be processed")


def create_app(settings: Settings | None = None) -> Flask:
    """Build the mock app for ``settings`` (the defaults serve the demo sessions)."""
    from mockserver.explain import ExplainMiddleware, flask_view

    settings = settings or Settings()
    app = Flask("mockserver")
    app.json.sort_keys = False  # type: ignore[attr-defined]
    state = MockState(settings)
    app.extensions[EXTENSION] = state
    # GET and HEAD are answered by ExplainMiddleware; the route gives other methods their 405.
    app.add_url_rule(
        ENDPOINT_PATH, "explain", flask_view, methods=["GET"], provide_automatic_options=False
    )
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _unexpected_error)
    if settings.control:
        from mockserver.control import control

        app.register_blueprint(control)
    # Outermost: faults act on the connection whichever layer produced them.
    app.wsgi_app = FaultMiddleware(ExplainMiddleware(app.wsgi_app, state))  # type: ignore[method-assign]
    return app


def session_url(session: Session) -> str:
    return f"{ENDPOINT_PATH}?{urlencode({SESSION_PARAM: session.id})}"
