"""Request limits enforced by the app, whatever server serves it: body size and header size.

A request over a limit is answered at once, in the documented JSON error shape, without its
body being read: 413 for a body over ``--max-body`` (declared by ``Content-Length``; a chunked
body is cut by Flask's ``MAX_CONTENT_LENGTH`` as it is read), 431 for headers over
:data:`MAX_HEADER_BYTES`. What a server refuses before the app sees the request is listed in
docs/servers.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from ..model.answer import JSON, error_answer, status_line

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

MAX_HEADER_BYTES: Final = 64 * 1024
"""The request headers' total size the mock accepts (names and values as sent, the query excluded).

Counted alike on every path and every server: the async server's reader counts the bytes as
they arrive, :func:`header_bytes` counts them back from a WSGI environ.
"""
_HTTP_PREFIX: Final = len("HTTP_")
_UNPREFIXED: Final = frozenset({"CONTENT_TYPE", "CONTENT_LENGTH"})


def header_bytes(environ: WSGIEnvironment) -> int:
    """The headers' names and values as the client sent them, counted from ``environ``.

    A WSGI name carries ``HTTP_`` that the client never sent: counting it made 7,000 small
    headers, which ``/e`` took on the async server, 431 on the Flask app's paths. A repeated
    header is one environ value joined by commas (waitress: ", "), about as long as its lines.
    """
    size = 0
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            size += len(key) - _HTTP_PREFIX + len(value)
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
        try:
            length = int(declared)
        except ValueError:
            length = -1
        if length < 0 or not declared.strip().isdigit():
            return _refuse(
                start_response,
                400,
                "bad_request",
                f"Content-Length must be a number of bytes; received {declared[:40]!r}",
            )
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
