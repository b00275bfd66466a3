"""From a request httptools parsed to a WSGI call and back, for the mock's own server: the
PEP 3333 environ, and the app's whole answer (the mock's answers are small and bounded)."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_to_bytes

import httptools

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication, WSGIEnvironment

Address = tuple[str, int]


@dataclass(slots=True)
class Request:
    """One request as the server parsed it (header names and values as sent)."""

    method: str
    url: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes
    version: str  # "1.1" or "1.0"


@dataclass(frozen=True, slots=True)
class Reply:
    """What the app answered: its status line, headers and whole body."""

    status: str
    headers: list[tuple[str, str]]
    body: bytes

    def declared_length(self) -> int | None:
        """The Content-Length the app set, if it set one."""
        for name, value in self.headers:
            if name.lower() == "content-length" and value.strip().isdigit():
                return int(value)
        return None


def environ_for(request: Request, server: Address, peer: Address | None) -> WSGIEnvironment:
    """The WSGI environ of ``request`` (raises ``httptools.HttpParserInvalidURLError``)."""
    url = httptools.parse_url(request.url)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": request.method,
        "SCRIPT_NAME": "",
        # PEP 3333: the path percent-decoded, its bytes as latin-1 text; the query as sent.
        "PATH_INFO": unquote_to_bytes(url.path or b"/").decode("latin-1"),
        "QUERY_STRING": (url.query or b"").decode("latin-1"),
        "SERVER_NAME": server[0],
        "SERVER_PORT": str(server[1]),
        "SERVER_PROTOCOL": f"HTTP/{request.version}",
        "REMOTE_ADDR": peer[0] if peer else "",
        "REMOTE_PORT": str(peer[1]) if peer else "",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(request.body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "wsgi.input_terminated": True,  # the body is whole: read wsgi.input to its end
    }
    for raw_name, raw_value in request.headers:
        name = raw_name.decode("latin-1")
        if "_" in name:  # X_Forwarded_For would pass for X-Forwarded-For: dropped, as nginx
            continue
        key = name.upper().replace("-", "_")
        if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            key = f"HTTP_{key}"
        value = raw_value.decode("latin-1")
        environ[key] = f"{environ[key]},{value}" if key in environ else value
    if environ.pop("HTTP_TRANSFER_ENCODING", None) is not None or request.body:
        environ["CONTENT_LENGTH"] = str(len(request.body))  # a chunked body arrives whole
    return environ


def call_app(app: WSGIApplication, environ: WSGIEnvironment) -> Reply:
    """Run a WSGI app to the end of its answer."""
    started: list[Any] = []
    chunks: list[bytes] = []

    def start_response(
        status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], object]:
        # PEP 3333: nothing is sent before the app returns, so a second call with exc_info
        # (an error page after all) replaces the headers; a second call without it is a bug.
        if started and exc_info is None:
            raise AssertionError("start_response was called twice without exc_info")
        started[:] = [status, headers]
        return chunks.append

    result: Iterable[bytes] = app(environ, start_response)
    try:
        chunks.extend(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    if not started:
        raise RuntimeError("the WSGI app returned without calling start_response")
    return Reply(started[0], list(started[1]), b"".join(chunks))
