"""The WSGI layers under the Flask app, whatever the server: size limits answered in JSON before
the body is read (a chunked body is cut by Flask's ``MAX_CONTENT_LENGTH`` as it is read),
scripted faults enacted on the connection, and ``GET``/``HEAD /e`` answered straight from the
environ for the servers that call the app for every request (``flask run``, any WSGI server;
the mock's own answers ``/e`` itself), or from the upstream (:class:`.proxy.ValidatingProxy`).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from verdict_contract.core.spec import API_METHODS, ENDPOINT_PATH

from ..explain import handle, wrong_method
from ..model.answer import JSON, Answer, error_answer, explain_headers, failure_answer, status_line
from ..model.steps import FAULT_HEADER
from ..state import MockState

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

MAX_HEADER_BYTES: Final = 64 * 1024
"""The request headers' names and values as sent, in bytes, the query excluded: counted alike
by the async server's reader and, from a WSGI environ, by :func:`header_bytes`."""
_UNPREFIXED: Final = frozenset({"CONTENT_TYPE", "CONTENT_LENGTH"})


def header_bytes(environ: WSGIEnvironment) -> int:
    """The headers' names and values as the client sent them, counted from ``environ`` (a
    repeated header is one value joined by commas, about as long as its lines)."""
    size = 0
    for key, value in environ.items():
        if key.startswith("HTTP_"):  # a prefix the client never sent
            size += len(key) - len("HTTP_") + len(value)
        elif key in _UNPREFIXED:
            size += len(key) + len(value)
    return size


def _refuse(start_response: StartResponse, status: int, code: str, message: str) -> Iterable[bytes]:
    answer = error_answer(status, code, message)
    headers = [("Content-Type", JSON), ("Content-Length", str(len(answer.body))), *answer.headers]
    start_response(status_line(status), headers)
    return [answer.body]


class RequestLimits:
    """Refuse requests whose declared body or whose headers are over the limits."""

    def __init__(self, app: WSGIApplication, max_body: int) -> None:
        self.app = app
        self.max_body = max_body

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        declared = environ.get("CONTENT_LENGTH") or "0"
        if not declared.strip().isdecimal():  # what int() reads, and no sign
            return _refuse(
                start_response,
                400,
                "bad_request",
                f"Content-Length must be a number of bytes; received {declared[:40]!r}",
            )
        length = int(declared)
        if length > self.max_body:
            return _refuse(
                start_response,
                413,
                "request_entity_too_large",
                f"the request body is {length} bytes; the mock accepts at most {self.max_body} "
                "(--max-body)",
            )
        size = header_bytes(environ)
        if size > MAX_HEADER_BYTES:
            return _refuse(
                start_response,
                431,
                "request_header_fields_too_large",
                f"the request headers hold {size} bytes; the mock accepts at most "
                f"{MAX_HEADER_BYTES}",
            )
        return self.app(environ, start_response)


def _reset(environ: WSGIEnvironment) -> None:
    """Close the client connection with a TCP reset instead of an answer (werkzeug names its
    socket; the mock's own server resets on the ``ConnectionResetError``)."""
    sock = environ.get("werkzeug.socket")
    if isinstance(sock, socket.socket):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)  # close() alone waits for werkzeug's own file objects
        sock.close()
    raise ConnectionResetError("verdict-mock: scripted connection reset")


class FaultMiddleware:
    """Strip the fault mark from responses and enact it on the connection."""

    def __init__(self, app: WSGIApplication) -> None:
        self.app = app

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            kept = [(k, v) for k, v in headers if k != FAULT_HEADER]
            if len(kept) != len(headers) and dict(headers)[FAULT_HEADER] == "reset":
                _reset(environ)
            return start_response(status, kept, exc_info)

        return self.app(environ, start)


def _headers(environ: WSGIEnvironment) -> list[tuple[str, str]]:
    """A request's headers for the journal, named as sent: ``user-agent``."""
    return [
        (k[5:].replace("_", "-").lower(), v) for k, v in environ.items() if k.startswith("HTTP_")
    ]


class ExplainMiddleware:
    """Serve ``GET``/``HEAD /e`` from the environ; pass every other request to ``app``."""

    def __init__(self, app: WSGIApplication, state: MockState) -> None:
        self.app = app
        self.state = state

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        method = environ["REQUEST_METHOD"]
        if environ.get("PATH_INFO", "") != ENDPOINT_PATH:
            return self.app(environ, start_response)
        # PEP 3333 hands the raw query over as latin-1 text; this restores its bytes.
        query = environ.get("QUERY_STRING", "").encode("latin-1")
        if method in API_METHODS:
            answer, headers = self.respond(method, query, environ), self.headers
        else:
            answer = wrong_method(self.state, method, query, _headers(environ))
            headers = partial(explain_headers, vary=False)
        start_response(status_line(answer.status), headers(answer))
        return [b"" if method == "HEAD" else answer.body]

    def respond(self, method: str, query: bytes, environ: WSGIEnvironment) -> Answer:
        """The answer to one call (journaled): never a 5xx of the mock's own."""
        authorization, headers = environ.get("HTTP_AUTHORIZATION"), _headers(environ)
        try:
            return handle(self.state, method, query, authorization, headers)
        except Exception as exc:
            return failure_answer(exc, f"answering {method} {ENDPOINT_PATH}")

    def headers(self, answer: Answer) -> list[tuple[str, str]]:
        return explain_headers(answer)
