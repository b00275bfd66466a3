"""``GET``/``HEAD /e`` under WSGI, answered straight from the environ, below Flask.

For the servers that call the app for every request (``--server waitress``, ``flask run``, any
WSGI server); the default server answers ``/e`` itself (asyncserver.py). The proxy answers it the
same way, from the upstream (:class:`.proxy.ValidatingProxy`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from verdict_contract.core.spec import ENDPOINT_PATH, is_api_call

from ..explain import handle
from ..model.answer import Answer, explain_headers, failure_answer, status_line
from ..state import MockState

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment


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
        answer = self.respond(method, environ.get("QUERY_STRING", "").encode("latin-1"), environ)
        start_response(status_line(answer.status), self.headers(answer))
        return [b"" if method == "HEAD" else answer.body]

    def respond(self, method: str, query: bytes, environ: WSGIEnvironment) -> Answer:
        """The answer to one call (journaled): never a 5xx of the mock's own."""
        headers = [  # for the journal, named as sent: ``user-agent``
            (name[5:].replace("_", "-").lower(), value)
            for name, value in environ.items()
            if name.startswith("HTTP_")
        ]
        try:
            return handle(self.state, method, query, environ.get("HTTP_AUTHORIZATION"), headers)
        except Exception as exc:
            return failure_answer(exc, f"answering {method} {ENDPOINT_PATH}")

    def headers(self, answer: Answer) -> list[tuple[str, str]]:
        return explain_headers(answer)
