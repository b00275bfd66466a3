"""A scripted fault enacted on the connection, whichever WSGI server holds it (model/steps.py)."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..model.steps import FAULT_HEADER

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment


def _reset(environ: WSGIEnvironment) -> None:
    """Close the client connection with a TCP reset instead of an answer."""
    # waitress exposes its channel only through this bound method; werkzeug names the socket.
    channel = getattr(environ.get("waitress.client_disconnected"), "__self__", None)
    sock = getattr(channel, "socket", None) or environ.get("werkzeug.socket")
    if isinstance(sock, socket.socket):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        if channel is not None:
            from waitress.channel import ClientDisconnected

            raise ClientDisconnected  # waitress closes the socket itself: RST, nothing sent
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
