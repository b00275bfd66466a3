"""The mock's own server on a daemon thread: what ``verdict_mock`` runs (:func:`.mocks.live_mock`),
and what tests and benchmarks serve an app with; in one process, which keeps the limiter, journal
and scripts exact."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from verdict_contract.mockserver.server.asyncserver import AsyncServer


@dataclass
class BackgroundServer:
    """A server on a daemon thread; ``port=0`` picks a free port. ``stop()`` asks the server's
    thread to close the listener and every connection, so nothing is closed under its feet."""

    app: Any  # a WSGI application, usually the mock's Flask app
    host: str = "127.0.0.1"
    port: int = 0
    threads: int = 4
    _server: AsyncServer | None = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)

    @property
    def base_url(self) -> str:
        host = self.host if ":" not in self.host else f"[{self.host}]"
        return f"http://{host}:{self.effective_port}"

    @property
    def effective_port(self) -> int:
        """The port it listens on (``port=0`` picked a free one)."""
        if self._server is None:
            raise RuntimeError("the server is not started")
        return self._server.effective_port

    def start(self) -> BackgroundServer:
        self._server = AsyncServer(self.app, self.host, self.port, self.threads)
        self._thread = threading.Thread(target=self._server.run, name="verdict-mock", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
