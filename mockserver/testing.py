"""The mock for integrators' tests: one app, reached over real HTTP or through respx.

Both transports give a :class:`VerdictMock` with the same ``base_url``, ``api_key``, ``mint``,
``requests`` and ``reset``; they run the same Flask app as ``verdict-mock``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpx
import respx
from flask import Flask
from verdict_contract.mockserver.app import create_app
from verdict_contract.mockserver.faults import FAULT_HEADER, FaultMiddleware
from verdict_contract.mockserver.serve import BackgroundServer
from verdict_contract.mockserver.sessions import Step, parse_spec
from verdict_contract.mockserver.settings import DEFAULT_API_KEY, Settings
from verdict_contract.mockserver.state import MockState
from verdict_contract.mockserver.web import state_of
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Response

RESPX_BASE_URL = "https://verdict.mock"


@dataclass
class VerdictMock:
    """A running mock: where it is, which key it takes, and its control methods."""

    app: Flask
    base_url: str
    router: respx.MockRouter | None = None

    @property
    def state(self) -> MockState:
        return state_of(self.app)

    @property
    def api_key(self) -> str:
        return self.state.api_keys[0]

    def mint(
        self,
        verdict: str | None = None,
        conclusive: bool | None = None,
        age_seconds: float | None = None,
        script: list[int | str | dict[str, int]] | tuple[Step, ...] = (),
        allow_invalid: bool = False,
        **fields: Any,
    ) -> str:
        """Create a session and return its id; ``fields`` override verdict fields.

        Raises ``mockserver.sessions.SpecError`` for an impossible request, like the control
        API's 422 (``disputed`` and ``conclusive=True``, overrides that break the contract).
        """
        raw: dict[str, Any] = {
            "script": [s.to_json() if isinstance(s, Step) else s for s in script]
        }
        for name, value in (
            ("verdict", verdict),
            ("conclusive", conclusive),
            ("age_seconds", age_seconds),
        ):
            if value is not None:
                raw[name] = value
        if fields:
            raw["fields"] = fields
        if allow_invalid:
            raw["allow_invalid"] = True
        return self.state.mint(parse_spec(raw, "mint()")).id

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The journal of calls to ``/e`` (keys masked), oldest first."""
        return [entry.to_json() for entry in self.state.journal.entries()]

    def reset(self) -> None:
        """Forget the journal, rate-limit counters and unconsumed scripts."""
        self.state.reset()

    def url(self, session_id: str) -> str:
        return str(httpx.URL(f"{self.base_url}/e", params={"n": session_id}))


@contextmanager
def live_mock(settings: Settings | None = None) -> Iterator[VerdictMock]:
    """Serve the mock over real HTTP on 127.0.0.1 (a free port) for the block's duration."""
    settings = settings or Settings(port=0, api_keys=(DEFAULT_API_KEY,))
    app = create_app(settings)
    with BackgroundServer(
        app, host=settings.host, port=settings.port, threads=settings.threads
    ) as server:
        yield VerdictMock(app, server.base_url)


def _inner_wsgi(app: Flask) -> Any:
    # The fault middleware acts on sockets; in-process, the marks are turned into httpx errors.
    # The request limits and access log above it guard a socket server; in-process they go too.
    wsgi = app.wsgi_app
    while not isinstance(wsgi, FaultMiddleware) and hasattr(wsgi, "app"):
        wsgi = wsgi.app
    return wsgi.app if isinstance(wsgi, FaultMiddleware) else app.wsgi_app


class _ScriptedTimeout(BaseException):
    """A scripted delay at least as long as the client's read timeout.

    A BaseException so that it passes the app's net for errors (which answers 400) and
    reaches the respx handler, which turns it into the client's timeout.
    """


def _handler(app: Flask) -> Any:
    inner = _inner_wsgi(app)
    read_timeout: ContextVar[float | None] = ContextVar("read_timeout", default=None)

    def delay(seconds: float) -> None:
        # The client would give up first: say so at once, as httpx would after waiting.
        timeout = read_timeout.get()
        if timeout is not None and seconds >= timeout:
            raise _ScriptedTimeout
        time.sleep(seconds)  # shorter than the timeout: wait for real (blocks an event loop)

    state_of(app).delay = delay

    def handle(request: httpx.Request) -> httpx.Response:
        read_timeout.set(request.extensions.get("timeout", {}).get("read"))
        environ = EnvironBuilder(
            method=request.method,
            path=request.url.path,
            query_string=request.url.query.decode("ascii"),
            headers=list(request.headers.items()),
            data=request.content,
        ).get_environ()
        try:
            answer = Response.from_app(inner, environ)
        except _ScriptedTimeout:
            raise httpx.ReadTimeout("timed out (scripted delay)", request=request) from None
        fault = answer.headers.get(FAULT_HEADER)
        if fault == "reset":
            raise httpx.ReadError("[Errno 104] Connection reset by peer", request=request)
        if fault == "truncated":
            raise httpx.RemoteProtocolError(
                "peer closed connection without sending complete message body", request=request
            )
        return httpx.Response(
            answer.status_code, headers=list(answer.headers.items()), content=answer.get_data()
        )

    return handle


@contextmanager
def respx_mock(
    base_url: str = RESPX_BASE_URL, settings: Settings | None = None, **router_options: Any
) -> Iterator[VerdictMock]:
    """Route httpx requests under ``base_url`` to the mock app, in-process, with respx.

    A scripted ``{"delay_ms": N}`` at least as long as the request's read timeout raises
    ``httpx.ReadTimeout`` at once; a shorter one sleeps (blocking an async client's loop).
    Requests elsewhere follow respx's defaults: an unmatched request raises
    ``respx.models.AllMockedAssertionError`` (pass ``assert_all_mocked=False`` to let it
    through to the network instead).
    """
    app = create_app(settings or Settings())
    options = {"assert_all_called": False, **router_options}
    with respx.mock(base_url=base_url, **options) as router:
        router.route().mock(side_effect=_handler(app))
        yield VerdictMock(app, base_url.rstrip("/"), router)
