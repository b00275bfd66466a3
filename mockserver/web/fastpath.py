"""The WSGI fast path: ``GET``/``HEAD /e`` answered straight from the environ.

For the servers that call the app for every request (``--server waitress``, ``flask run``, any
WSGI server), it skips Flask's request machinery on the hot path of load tests; every other
request goes on to the Flask app. The default server answers ``/e`` itself (asyncserver.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from verdict_contract.core.spec import ENDPOINT_PATH, is_api_call

from ..explain import handle
from ..model.answer import explain_headers, failure_answer, status_line
from ..state import MockState

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

log = logging.getLogger("mockserver")


def _headers(environ: WSGIEnvironment) -> list[tuple[str, str]]:
    """The request's headers from the environ (names as ``user-agent``), for the journal."""
    return [
        (name[5:].replace("_", "-").lower(), value)
        for name, value in environ.items()
        if name.startswith("HTTP_")
    ]


class ExplainMiddleware:
    """Serve ``GET``/``HEAD /e`` from the environ; pass every other request to ``app``."""

    def __init__(self, app: WSGIApplication, state: MockState) -> None:
        self.app = app
        self.state = state

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        method = environ["REQUEST_METHOD"]
        if not is_api_call(method, environ.get("PATH_INFO", "")):
            return self.app(environ, start_response)
        # PEP 3333 hands the raw query over as latin-1 text; this restores its bytes.
        query = environ.get("QUERY_STRING", "").encode("latin-1")
        try:
            authorization = environ.get("HTTP_AUTHORIZATION")
            answer = handle(self.state, method, query, authorization, _headers(environ))
        except Exception as exc:  # never a 5xx of the mock's own, however it fails
            answer = failure_answer(exc, f"answering {method} {ENDPOINT_PATH}")
        start_response(status_line(answer.status), explain_headers(answer))
        return [b"" if method == "HEAD" else answer.body]
