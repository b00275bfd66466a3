"""Serving the mock with waitress, in the foreground (the CLI) or on a background thread (tests).

waitress, not gunicorn, by an earlier measurement (recorded in the README): a
request costs the same CPU under both, and gunicorn's extra throughput (about 1.6x on 2 cores)
comes only from a second process, in which the rate limiter, journal and scripts would each
count on their own (a 10/60 limit let 20 of 30 requests through). One process with threads
keeps them exact, and waitress runs on every OS the frontend developers use.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from waitress.server import create_server

log = logging.getLogger("mockserver.serve")


@dataclass
class BackgroundServer:
    """A waitress server on a daemon thread; ``port=0`` picks a free port.

    ``stop()`` asks the server thread to finish: that thread closes the listener and every
    client connection and stops the worker threads, so nothing is closed under its feet.
    """

    app: Any  # a WSGI application, usually the mock's Flask app
    host: str = "127.0.0.1"
    port: int = 0
    threads: int = 4
    _server: Any = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _stopping: threading.Event = field(default_factory=threading.Event, init=False, repr=False)

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the server is not started")
        host = self.host if ":" not in self.host else f"[{self.host}]"
        return f"http://{host}:{self._server.effective_port}"

    def start(self) -> BackgroundServer:
        self._stopping.clear()
        self._server = make_server(self.app, self.host, self.port, self.threads)
        self._thread = threading.Thread(target=self._run, name="verdict-mock", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        server = self._server
        sockets = getattr(server, "map", None) or server._map
        try:
            while not self._stopping.is_set():
                server.asyncore.loop(timeout=0.05, map=sockets, count=1)
        finally:
            server.task_dispatcher.shutdown()
            server.asyncore.close_all(sockets, ignore_all=True)

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(
        self,
        *exc_info: object,
    ) -> None:
        self.stop()


def make_server(app: Any, host: str, port: int, threads: int) -> Any:
    """Bind a waitress server (``port=0`` picks a free port: see ``effective_port``)."""
    return create_server(
        app,
        host=host,
        port=port,
        threads=threads,
        ident="verdict-mock",
        clear_untrusted_proxy_headers=True,
    )


def serve_forever(server: Any) -> None:
    """Serve in the foreground until interrupted."""
    try:
        server.run()
    except KeyboardInterrupt:
        log.info("stopped")
    finally:
        server.close()
