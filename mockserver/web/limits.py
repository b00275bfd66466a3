"""Body and header size limits, answered in JSON before the body is read, whatever the server.

A declared ``Content-Length`` over ``--max-body`` is a 413 (a chunked body is cut by Flask's
``MAX_CONTENT_LENGTH`` as it is read); headers over :data:`MAX_HEADER_BYTES`, a 431.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from ..model.answer import JSON, error_answer, status_line

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
