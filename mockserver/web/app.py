"""The Flask app of the mock: ``/e``, the control API and error handling, built per settings."""

from __future__ import annotations

from typing import NamedTuple

from flask import Flask, Response, current_app, request
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from verdict_contract.core.redact import printable
from verdict_contract.core.spec import ENDPOINT_PATH
from verdict_contract.core.suggest import closest

from ..explain import journal_elsewhere
from ..model.answer import NO_STORE, Answer, error_answer, failure_answer, not_allowed, status_line
from ..settings import Settings
from ..state import MockState
from .accesslog import AccessLog
from .answers import EXTENSION, error_response, state_of, to_response
from .control import control
from .metrics import install_metrics, probes
from .middleware import ExplainMiddleware, FaultMiddleware, RequestLimits
from .proxy import PROXY_EXTENSION, ValidatingProxy

_NOT_FOUND = f"no such endpoint; the API is GET {ENDPOINT_PATH}?n=<session id>"
_CONTROL_PREFIX = "/_mock"


def _http_error(error: HTTPException) -> Response:
    status = error.code or 400
    if isinstance(error, MethodNotAllowed):
        allowed = ", ".join(sorted(error.valid_methods or ()))  # werkzeug's order varies
        return _journaled(not_allowed(request.method, allowed))
    if status == 404:
        return _journaled(error_answer(404, "not_found", _not_found(request.path)))
    if status >= 500:  # never answer 5xx to a request, however malformed
        status = 400
    return error_response(
        status, error.name.lower().replace(" ", "_"), error.description or error.name
    )


def _root() -> str:
    """What ``GET /`` says: a newcomer's first request, so where the API and the dashboard are."""
    api = f"nothing is served at /; the API is GET {ENDPOINT_PATH}?n=<session id> with "
    api += "Authorization: Bearer <key>"
    settings = state_of().settings
    if not settings.control:
        off = "are off (--no-control)"
        return f"{api}; the dashboard and the control API under {_CONTROL_PREFIX}/ {off}"
    dashboard = f"{_CONTROL_PREFIX}/"
    if settings.control_token is not None:  # once; a cookie keeps it (docs/mock.md)
        dashboard += "?token=<the control token>"
    return (
        f"{api}; the dashboard is {dashboard}, the control API under {_CONTROL_PREFIX}/ "
        f"(GET {_CONTROL_PREFIX}/health)"
    )


def _not_found(path: str) -> str:
    """What a 404 says: the API's endpoint, or under ``/_mock`` the control API's routes and the
    closest to a misspelt path by its name or its view's (``/_mock/journal``: ``/requests``)."""
    if path == "/":
        return _root()
    if path != _CONTROL_PREFIX and not path.startswith(_CONTROL_PREFIX + "/"):
        return _NOT_FOUND
    routes: dict[str, set[str]] = {}
    names: dict[str, str] = {}  # a route's last segment, and its view's name: the route
    for rule in current_app.url_map.iter_rules():
        if rule.rule.startswith(_CONTROL_PREFIX + "/") and rule.endpoint.startswith("control."):
            routes.setdefault(rule.rule, set()).update(rule.methods or ())
            names.setdefault(rule.rule.rstrip("/").rpartition("/")[2], rule.rule)
            names.setdefault(rule.endpoint.rpartition(".")[2], rule.rule)
    if not routes:
        return f"{_NOT_FOUND}; the control API under {_CONTROL_PREFIX}/ is off (--no-control)"
    listed = ", ".join(
        f"{'|'.join(sorted(methods - {'HEAD', 'OPTIONS'}))} {rule}"
        for rule, methods in sorted(routes.items())
    )
    asked = path[len(_CONTROL_PREFIX) + 1 :].strip("/")[:100].lower()
    close = closest(asked, names) if asked else None
    hint = f"did you mean {names[close]}? " if close else ""
    return f"no such control endpoint; {hint}the control API is: {listed}"


def _journaled(answer: Answer) -> Response:
    """A 404 or 405 answered to a request the API does not take, journaled unless control's."""
    path = request.path
    if path != _CONTROL_PREFIX and not path.startswith(_CONTROL_PREFIX + "/"):
        headers = list(request.headers.items())
        journal_elsewhere(state_of(), request.method, path, request.query_string, headers, answer)
    return to_response(answer)


def _unexpected_error(error: Exception) -> Response:
    doing = f"answering {request.method} {printable(request.path)}"  # a path, escaped for logs
    return to_response(failure_answer(error, doing))


def _finished(response: Response) -> Response:
    """The standard reason phrase, as in every answer the mock frames itself (werkzeug's are upper
    case: ``"409 CONFLICT"``); under ``/_mock``, never cached (mutable state); a 204, no type."""
    response.status = status_line(response.status_code)
    if request.path.startswith(_CONTROL_PREFIX):
        response.headers["Cache-Control"] = NO_STORE
    if response.status_code == 204:
        response.headers.pop("Content-Type", None)
    return response


def create_app(settings: Settings | None = None, state: MockState | None = None) -> Flask:
    """Build the mock app for ``settings`` (the defaults serve the demo sessions), around
    ``state`` if given (the in-process transports build their state first)."""
    settings = state.settings if state is not None else settings or Settings()
    # Named after this module, not the working directory, and with no static route: nothing of
    # the disk is served; dashboard.py reads its assets from the package.
    app = Flask(__name__, static_folder=None)
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body  # a chunked body, cut as it is read
    state = state or MockState(settings)
    app.extensions[EXTENSION] = state
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _unexpected_error)
    app.after_request(_finished)
    app.register_blueprint(probes)  # any Host, --no-control too: read-only (metrics.py)
    install_metrics(app, state)  # the same: /_mock/metrics
    if settings.control:
        app.register_blueprint(control)
    explain: ExplainMiddleware | ValidatingProxy = ExplainMiddleware(app.wsgi_app, state)
    if settings.proxy_to is not None:  # /e goes to the real service instead (proxy.py)
        explain = app.extensions[PROXY_EXTENSION] = ValidatingProxy(app.wsgi_app, state)
    # Outermost: faults act on the connection whichever layer produced them.
    app.wsgi_app = FaultMiddleware(explain)  # type: ignore[method-assign]
    # Limits hold whatever server serves the app; the access log sees every answer.
    app.wsgi_app = RequestLimits(app.wsgi_app, settings.max_body)  # type: ignore[method-assign]
    if settings.access_log:
        app.wsgi_app = AccessLog(app.wsgi_app, state)  # type: ignore[method-assign]
    return app


class MockParts(NamedTuple):
    """What a server needs of a mock app: its state, and its proxy when ``/e`` is proxied."""

    state: MockState
    proxy: ValidatingProxy | None


def parts_of(app: object) -> MockParts | None:
    """The parts of a mock app built by :func:`create_app`; None for any other WSGI app."""
    if not isinstance(app, Flask) or EXTENSION not in app.extensions:
        return None
    return MockParts(app.extensions[EXTENSION], app.extensions.get(PROXY_EXTENSION))
