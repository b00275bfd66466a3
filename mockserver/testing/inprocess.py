"""Calling the mock app in-process, for the transports of :mod:`.testing` (respx, responses).

One request goes through the same WSGI stack as over HTTP, minus the socket; a scripted fault
comes back as a :class:`Reply` naming it, for each adapter to raise its own client's error. A
scripted delay at least as long as the client's read timeout becomes the fault ``timeout`` at
once (the client would have given up), and is journaled so.
"""

from __future__ import annotations

import threading
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from flask import Flask
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Response

from verdict_contract.core.spec import ENDPOINT_PATH

from ..explain import journal, parse_query
from ..model.faults import FAULT_HEADER
from ..web.faults import FaultMiddleware
from ..web.glue import state_of


@dataclass(frozen=True)
class Reply:
    """What the client gets: an answer, or a fault (``reset``, ``truncated``, ``timeout``,
    ``cancelled``)."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    fault: str | None = None


class _ScriptedTimeout(BaseException):
    """A scripted delay at least as long as the client's read timeout.

    A BaseException so that it passes the app's net for errors (which answers 400).
    """


class _ClientCancelled(BaseException):
    """The client cancelled its call while a scripted delay held the answer (async only)."""


class InProcessApp:
    """The mock app behind a function call; scripted delays honour the caller's timeout."""

    def __init__(self, app: Flask) -> None:
        # Faults act on sockets; in-process, their marks are read instead. The request limits and
        # access log above them guard a socket server, so in-process calls start below them too.
        wsgi: Any = app.wsgi_app
        while not isinstance(wsgi, FaultMiddleware) and hasattr(wsgi, "app"):
            wsgi = wsgi.app
        self._wsgi: Any = wsgi.app if isinstance(wsgi, FaultMiddleware) else app.wsgi_app
        self.state = state_of(app)
        self._read_timeout: ContextVar[float | None] = ContextVar("read_timeout", default=None)
        self._cancel: ContextVar[threading.Event | None] = ContextVar("cancel", default=None)
        self.state.delay = self._delay

    def _delay(self, seconds: float) -> None:
        timeout = self._read_timeout.get()
        if timeout is not None and seconds >= timeout:
            raise _ScriptedTimeout
        cancel = self._cancel.get()  # shorter than the timeout: wait for real (async: a thread)
        if cancel is None:
            time.sleep(seconds)
        elif cancel.wait(seconds):  # the async client cancelled its call meanwhile
            raise _ClientCancelled

    def call(
        self,
        method: str,
        path: str,
        query: bytes,
        headers: list[tuple[str, str]],
        body: bytes = b"",
        read_timeout: float | None = None,
        cancel: threading.Event | None = None,
    ) -> Reply:
        """One request; ``cancel``, set by an async client's adapter when its caller cancels,
        ends a scripted delay early: the request is journaled with the fault ``cancelled``."""
        self._read_timeout.set(read_timeout)
        self._cancel.set(cancel)
        environ = EnvironBuilder(
            method=method,
            path=path,
            query_string=query.decode("latin-1"),
            headers=headers,
            data=body,
        ).get_environ()
        generation = self.state.journal.generation
        try:
            answer = Response.from_app(self._wsgi, environ)
        except (_ScriptedTimeout, _ClientCancelled) as stopped:
            gone = "timeout" if isinstance(stopped, _ScriptedTimeout) else "cancelled"
            if path == ENDPOINT_PATH:
                authorization = next((v for k, v in headers if k.lower() == "authorization"), None)
                pairs = parse_query(query)
                journal(
                    self.state,
                    method,
                    pairs,
                    query,
                    authorization,
                    gone,
                    generation,
                    headers=headers,
                )
            return Reply(0, [], b"", gone)
        fault = answer.headers.get(FAULT_HEADER)
        kept = [(k, v) for k, v in answer.headers.items() if k != FAULT_HEADER]
        return Reply(answer.status_code, kept, answer.get_data(), fault)
