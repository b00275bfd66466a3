"""Serving the mock: its own asyncio server (the default, docs/servers.md) or waitress (a plain
WSGI server, ``--server waitress``), in the foreground or on a thread; both in one process, which
keeps the limiter, journal and scripts exact.
"""

from __future__ import annotations

import gc
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from verdict_contract.core.extras import require_extra

from ..settings import Settings, env_var
from ..web.app import parts_of
from .asyncserver import AsyncServer, room_for
from .protocol import IDLE_TIMEOUT

log = logging.getLogger("mockserver.serve")

WAITRESS_IDLE_SECONDS = int(IDLE_TIMEOUT)
"""An idle waitress connection is closed after this (as the async server's); waitress's own is
120 s, during which 100 idle sockets kept every other client out."""
WAITRESS_CLEANUP_SECONDS = 5
"""How often waitress looks for idle connections: one is closed within 35 s of its last byte."""


class WaitressServer:
    """waitress, stoppable from another thread between two turns of its loop."""

    def __init__(self, app: Any, host: str, port: int, threads: int) -> None:
        require_extra("waitress", f"--server waitress ({env_var('server')})")  # [server]
        from waitress.server import create_server

        parts = parts_of(app)
        settings = parts.state.settings if parts is not None else Settings()
        room_for(settings.max_connections)
        self._server: Any = create_server(
            app,
            host=host,
            port=port,
            threads=threads,
            ident="verdict-mock",
            # the access log reads X-Forwarded-For of the proxies it trusts (accesslog.py)
            clear_untrusted_proxy_headers=not settings.forwarded_allow_ips,
            # waitress's defaults let one client spool 1 GiB to disk before the app's 413, and
            # 100 idle sockets hold every connection for 120 s (docs/servers.md). waitress
            # refuses a body past twice --max-body, chunk framing counted (text/plain 413); the
            # app one past --max-body (JSON 413)
            max_request_body_size=2 * settings.max_body,
            connection_limit=settings.max_connections,
            channel_timeout=WAITRESS_IDLE_SECONDS,
            cleanup_interval=WAITRESS_CLEANUP_SECONDS,
        )
        self._stopping = threading.Event()

    @property
    def effective_port(self) -> int:
        return int(self._server.effective_port)  # waitress may hold it as text

    def run(self) -> None:
        server = self._server
        sockets = getattr(server, "map", None) or server._map
        try:
            while not self._stopping.is_set():
                # poll: select() fails past 1024 descriptors, fewer than --max-connections may be
                server.asyncore.loop(timeout=0.05, map=sockets, count=1, use_poll=True)
        finally:
            server.task_dispatcher.shutdown()
            server.asyncore.close_all(sockets, ignore_all=True)

    def stop(self) -> None:
        self._stopping.set()

    def close(self) -> None:
        self._server.close()


Server = AsyncServer | WaitressServer
"""A bound server: ``run()`` serves until ``stop()`` (any thread may call it); ``close()``
releases one never run."""


def make_server(app: Any, host: str, port: int, threads: int, server: str | None = None) -> Server:
    """Bind a server for a WSGI app (``port=0`` picks a free port: see ``effective_port``);
    ``server``: by default the one a mock app's settings name, ``async`` for any other app."""
    parts = parts_of(app)
    if (server or (parts.state.settings.server if parts else "async")) == "waitress":
        return WaitressServer(app, host, port, threads)
    return AsyncServer(app, host, port, threads)


def serve_forever(server: Server) -> None:
    """Serve in the foreground until interrupted. What exists by now lives as long as the
    process: ``gc.freeze()`` keeps full collections, frequent under load, from walking it."""
    try:  # Ctrl-C at once after the banner (a --workers group's first second) stops it too
        gc.collect()
        gc.freeze()
        server.run()
    except KeyboardInterrupt:
        log.info("stopped")


@dataclass
class BackgroundServer:
    """A server on a daemon thread; ``port=0`` picks a free port, ``server`` (``async`` or
    ``waitress``) by default the one the app's settings name. ``stop()`` asks the server's
    thread to close the listener and every connection, so nothing is closed under its feet."""

    app: Any  # a WSGI application, usually the mock's Flask app
    host: str = "127.0.0.1"
    port: int = 0
    threads: int = 4
    server: str | None = None
    _server: Server | None = field(default=None, init=False, repr=False)
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
        self._server = make_server(self.app, self.host, self.port, self.threads, self.server)
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
