"""The mock's own HTTP/1.1 server: one asyncio loop (uvloop where installed), httptools parsing.

``GET``/``HEAD /e`` is answered on the loop (its shared store's round trips awaited there),
every other request by the Flask app on a worker thread; one connection is a
:class:`.protocol.HttpConnection`. Here: the listener, ``--max-connections``, the idle sweep,
and stopping, at once (``stop()`` from any thread, SIGINT) or gracefully (SIGTERM: nothing new
is accepted, what was read whole is answered within ``--grace-seconds``, then the rest is cut;
a second SIGTERM cuts at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Final

from ..settings import Settings
from ..state import MockState
from ..web.app import parts_of
from ..web.proxy import ValidatingProxy
from .protocol import DRAIN_SECONDS, IDLE_TIMEOUT, HttpConnection
from .wire import Heads, bound_socket

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication

log = logging.getLogger("mockserver.server")

SWEEP_SECONDS: Final = 0.5
"""How often the answers' Date is brought up to the second and idle connections are swept."""


class AsyncServer:
    """A WSGI app served on a socket bound at construction (``port=0`` picks a free one);
    ``run()`` serves until ``stop()``, which any thread may call."""

    def __init__(
        self,
        app: WSGIApplication,
        host: str,
        port: int,
        threads: int,
        idle_timeout: float = IDLE_TIMEOUT,
        drain_seconds: float = DRAIN_SECONDS,
    ) -> None:
        self.app = app
        parts = parts_of(app)
        self.state: MockState | None = parts.state if parts else None  # None: any WSGI app
        settings = parts.state.settings if parts else Settings()
        self.hot = parts is not None and settings.proxy_to is None  # proxied: /e is the app's
        self.max_body = settings.max_body
        self.max_connections = settings.max_connections
        self.access_log = settings.access_log
        self.idle_timeout = idle_timeout
        self.drain_seconds = drain_seconds
        self.grace = settings.grace_seconds
        self.heads = Heads()
        self.connections: set[HttpConnection] = set()
        room_for(self.max_connections)
        self.open = 0  # connections counted against --max-connections
        self.sock = bound_socket(host, port, reuse_port=settings.workers > 1, listen=True)
        self.address: tuple[str, int] = self.sock.getsockname()[:2]
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="verdict-mock-app")
        self._proxy: ValidatingProxy | None = parts.proxy if parts else None
        try:  # uvloop where it is installed (the [server] extra, not on Windows)
            import uvloop

            self.loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        except ImportError:  # a plain install (the plugin's fixtures), or Windows
            self.loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()  # stop now
        self._finish = asyncio.Event()  # SIGTERM: finish the requests under way first
        self._sweeper: asyncio.TimerHandle | None = None

    @property
    def effective_port(self) -> int:
        return self.address[1]

    def run(self) -> None:
        """Serve on this thread until :meth:`stop` (or a signal, on the main thread)."""
        asyncio.set_event_loop(self.loop)
        main = threading.current_thread() is threading.main_thread()
        # Windows' loops take no signal handler: Ctrl-C is a KeyboardInterrupt there (serve.py)
        signals = (signal.SIGINT, signal.SIGTERM) if main and sys.platform != "win32" else ()
        if signals:  # on the loop, not as KeyboardInterrupt inside a callback
            self.loop.add_signal_handler(signal.SIGINT, self._stop.set)
            self.loop.add_signal_handler(signal.SIGTERM, self.stop_gracefully)
        try:
            self.loop.run_until_complete(self._serve())
        finally:
            for number in signals:
                self.loop.remove_signal_handler(number)
            # The worker threads end with their call; a proxied call was ended by proxy.stop().
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.loop.close()

    async def _serve(self) -> None:
        loop = self.loop
        listener = await loop.create_server(
            lambda: HttpConnection(self), sock=self.sock, backlog=1024
        )
        self._sweep()
        try:
            ending = [loop.create_task(event.wait()) for event in (self._stop, self._finish)]
            await asyncio.wait(ending, return_when=asyncio.FIRST_COMPLETED)
            for waiter in ending:
                waiter.cancel()
            listener.close()  # from now on a new connection is refused
            if not self._stop.is_set():
                await self._let_finish()
        finally:
            if self._sweeper is not None:
                self._sweeper.cancel()
            listener.close()
            for connection in list(self.connections):
                connection.abort()
            if self._proxy is not None:  # calls upstream end now, not at their timeout
                self._proxy.stop()
            await asyncio.sleep(0)  # let the aborted transports close
            if self.state is not None:  # their connections belong to this loop
                for state in list(self.state.tenants.values()) or [self.state]:
                    if state.shared is not None:
                        await state.shared.close_async()

    def stop(self) -> None:
        """Stop serving (from any thread): the listener and every connection close."""
        with contextlib.suppress(RuntimeError):  # the loop is already closed
            self.loop.call_soon_threadsafe(self._stop.set)

    def stop_gracefully(self) -> None:
        """SIGTERM (on the loop): finish the requests under way; the second time, stop now."""
        if self._finish.is_set():
            self._stop.set()
        self._finish.set()

    async def _let_finish(self) -> None:
        """Answer what was read whole, within the grace: idle connections close at once, busy
        ones once their answers are written (each saying ``Connection: close``)."""
        started = self.loop.time()
        deadline, open_then = started + self.grace, len(self.connections)
        busy = sum(1 for connection in self.connections if connection.pipeline)
        log.info(
            "stopping gracefully (SIGTERM): %d connections open, %d with requests under way; "
            "they have %gs to finish",
            open_then,
            busy,
            self.grace,
            extra={"fields": {"connections": open_then, "busy": busy, "grace": self.grace}},
        )
        for connection in list(self.connections):
            connection.finish()
        while self.connections and not self._stop.is_set():
            left = deadline - self.loop.time()
            if left <= 0:
                log.warning(
                    "the grace of %gs is over: %d connections cut",
                    self.grace,
                    len(self.connections),
                )
                return
            with contextlib.suppress(TimeoutError):  # looked at again every 50 ms
                await asyncio.wait_for(self._stop.wait(), min(left, 0.05))
        took = self.loop.time() - started
        if self.connections:  # a second SIGTERM
            log.warning("stopped at once: %d connections cut", len(self.connections))
        else:
            log.info("stopped gracefully: every request under way answered in %.2fs", took)

    def close(self) -> None:
        """Release a server that was never run (its socket, loop and pool)."""
        self.sock.close()
        self.pool.shutdown(wait=False)
        if not self.loop.is_closed():
            self.loop.close()

    def _sweep(self) -> None:
        """Twice a second (or each idle timeout, if shorter): the Date of the answers, then
        the connections idle, stuck or not reading for too long."""
        self.heads.tick()
        now = self.loop.time()
        for connection in list(self.connections):
            connection.sweep(now, self.idle_timeout)
        self._sweeper = self.loop.call_later(min(SWEEP_SECONDS, self.idle_timeout), self._sweep)


_SPARE_FILES = 64  # listener, log files, worker sockets (a proxy's calls upstream)


def room_for(connections: int) -> None:
    """Raise the open-file limit so ``connections`` fit: a refused accept() would spin."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows: no such limit to raise
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + _SPARE_FILES
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        soft = raised
    if soft < wanted:
        log.warning(
            "the open-file limit (%d) is below --max-connections (%d) plus %d: lower "
            "--max-connections or raise the limit (ulimit -n)",
            soft,
            connections,
            _SPARE_FILES,
        )
