"""Connection faults for scripted sessions: a reset, a cut body, a body that is not JSON.

The app marks a response with FAULT_HEADER; the web layer's ``FaultMiddleware``, outermost in
the WSGI stack, enacts the mark on the connection (a reset raises ConnectionResetError, which
the default server turns into a TCP reset). In-process transports (respx) read the mark
instead; the default server's own ``/e`` path reads :attr:`.Answer.fault`.
"""

from __future__ import annotations

from typing import Final

from .answer import NO_STORE, Answer

FAULT_HEADER: Final = "X-Verdict-Mock-Fault"


def fault_answer(kind: str, body: bytes) -> Answer:
    """Return the answer that carries fault ``kind`` for a verdict ``body``."""
    sent = b"" if kind == "reset" else body[: len(body) // 2]
    headers = [("Cache-Control", NO_STORE)]
    if kind != "malformed":  # malformed: complete HTTP, but the JSON stops half-way
        headers += [("Content-Length", str(len(body))), (FAULT_HEADER, kind)]
    return Answer(200, sent, headers, "scripted", fault=kind)
