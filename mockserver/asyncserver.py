"""The mock's own HTTP/1.1 server: one asyncio loop (uvloop where installed), httptools parsing.

Chosen by measurement (``benchmarks/bench_serve.py``, the table in docs/servers.md):
``GET``/``HEAD /e`` is answered on the loop itself from :func:`.explain.decide`, with no WSGI
environ and no Flask request, which brings it near a native server; and one process owns the
limiter, journal and scripts, so they stay exact. Every other request goes to the Flask app on a
worker thread (:mod:`.wsgibridge`). What a WSGI server cannot do, this one does:

- a scripted delay waits on the loop (``call_later``): it holds its own connection only;
- a scripted ``reset`` is a TCP reset (``SO_LINGER`` 0, then abort): the client gets no byte;
- ``truncated`` sends the head with the full Content-Length, half the body, and closes.

Limits hold before the app is called: a request line over :data:`MAX_TARGET_BYTES` is 414,
headers over :data:`.limits.MAX_HEADER_BYTES` 431 (and a head or trailers still arriving past
:data:`MAX_HEAD_BYTES`), a body over ``--max-body`` 413 (declared or as it arrives, never read
further), anything httptools cannot parse 400; each in the documented JSON shape, then the
connection closes. ``Expect: 100-continue`` gets its interim answer, in turn.
Connections idle for :data:`IDLE_TIMEOUT` seconds (or stuck mid-request that long) are closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from email.utils import formatdate
from typing import TYPE_CHECKING, Final, cast

import httptools
from flask import Flask

from verdict_contract.core.spec import ENDPOINT_PATH
from verdict_contract.mockserver.accesslog import log as access_log
from verdict_contract.mockserver.accesslog import log_line
from verdict_contract.mockserver.answer import (
    Answer,
    error_answer,
    explain_headers,
    not_allowed,
    status_line,
)
from verdict_contract.mockserver.explain import (
    Decision,
    decide,
    decide_shared,
    journal_elsewhere,
    record,
)
from verdict_contract.mockserver.faults import FAULT_HEADER
from verdict_contract.mockserver.limits import MAX_HEADER_BYTES
from verdict_contract.mockserver.sessions import SpecError
from verdict_contract.mockserver.settings import Settings
from verdict_contract.mockserver.state import MockState
from verdict_contract.mockserver.web import EXTENSION
from verdict_contract.mockserver.wsgibridge import Reply, Request, call_app, environ_for

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication

log = logging.getLogger("mockserver.server")

MAX_TARGET_BYTES: Final = 256 * 1024
"""The longest request target (path and query) the server reads; longer is 414."""
IDLE_TIMEOUT: Final = 30.0
"""Seconds a connection may sit idle, or stuck half-way through a request, before it closes."""
_HOT_PREFIX: Final = ENDPOINT_PATH.encode() + b"?"
_HOT_PATH: Final = ENDPOINT_PATH.encode()
_HEADS_KEPT: Final = 1024  # heads of distinct shapes remembered (then forgotten all at once)
_CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"
# httptools keeps a header name or value whole until its line ends, so the bytes of a request
# still arriving are counted: its head (with the read it began in) may be this long; its
# body, chunk framing and trailers add at most six bytes per body byte ("1\r\nx\r\n").
_READ_BYTES: Final = 256 * 1024  # the most one read hands over (uvloop's buffer)
MAX_HEAD_BYTES: Final = MAX_TARGET_BYTES + MAX_HEADER_BYTES + _READ_BYTES
_FRAMING: Final = 6


def new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop where it is installed (Linux, macOS), asyncio's own elsewhere (Windows)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency where it exists
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class _Refused(Exception):
    """Raised in a parser callback to stop parsing: the request was answered and closed."""


class _Date:
    """The headers every answer ends with (Date, Server), formatted once a second."""

    def __init__(self) -> None:
        self.second = -1
        self.lines = b""

    def __call__(self) -> bytes:
        now = int(time.time())
        if now != self.second:
            date = formatdate(now, usegmt=True)
            self.second, self.lines = now, f"Date: {date}\r\nServer: verdict-mock\r\n".encode()
        return self.lines


def _head_start(status: str, headers: list[tuple[str, str]]) -> bytes:
    """The status line and headers of an answer, up to (not including) Date and Server."""
    lines = [f"HTTP/1.1 {status}\r\n"]
    lines.extend(f"{name}: {value}\r\n" for name, value in headers)
    return "".join(lines).encode("latin-1")


_NO_BODY: Final = frozenset({204, 304})
"""Statuses that carry no body (a scripted 204 or 304 keeps its connection usable)."""
_CLOSING: Final = b"Connection: close\r\n\r\n"
_KEEPING: Final = b"\r\n"


class HttpConnection(asyncio.Protocol):
    """One client connection: parse requests, answer them in order, enact faults."""

    def __init__(self, server: AsyncServer) -> None:
        self.server = server
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.pending: deque[Request | Answer] = deque()  # Answer: a refusal, close, a 100
        self.busy = False  # an answer is being delayed or computed on a worker thread
        self.blocked = False  # the client is not reading: queued requests wait, as reading does
        self.last_active = server.loop.time()
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._size = 0
        self._body: list[bytes] = []
        self._body_size = 0
        self._dead = False  # closing (a refusal, a parser error, a cut): nothing more is read
        self._reading = False  # a request has begun and is not yet complete
        self._began = self.last_active  # when it began (or when reading it could resume)
        self._room = 0  # bytes the request still arriving may take (MAX_HEAD_BYTES, then more)

    # -- the transport's side ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.Transport", transport)  # uvloop's is not a subclass
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        self.pending.clear()

    def data_received(self, data: bytes) -> None:
        self.last_active = self.server.loop.time()
        if self._dead:
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:  # the request was answered; no protocol switch
            self._dead = True
            self.pending.append(_CLOSE)
            self._next()
        except httptools.HttpParserCallbackError as exc:
            if not isinstance(exc.__context__, _Refused):
                log.exception("unexpected error reading a request")
                self._refuse(400, "bad_request", "the request could not be processed")
        except httptools.HttpParserError as exc:
            self._refuse(400, "bad_request", f"the request is not valid HTTP/1.1: {exc}")
        else:
            if self._reading:  # a request still arriving: what the parser keeps of it is bounded
                self._room -= len(data)
                if self._room < 0:
                    self._refuse(
                        431,
                        "request_header_fields_too_large",
                        f"the request's head or trailers hold more than {MAX_HEAD_BYTES} bytes",
                    )

    def pause_writing(self) -> None:  # the client is not reading: stop reading it too
        self.blocked = True
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.blocked = False
        self._next()

    # -- httptools callbacks ----------------------------------------------------------------
    def on_message_begin(self) -> None:
        if self._dead:  # the connection ended with the answer before: read no further request
            raise _Refused
        self._reading, self._room, self._began = True, MAX_HEAD_BYTES, self.last_active
        self._url, self._headers, self._size = b"", [], 0
        self._body, self._body_size = [], 0

    def on_url(self, url: bytes) -> None:
        self._url += url
        if len(self._url) > MAX_TARGET_BYTES:
            self._refuse_raise(
                414, "uri_too_long", f"the request target is longer than {MAX_TARGET_BYTES} bytes"
            )

    def on_header(self, name: bytes, value: bytes) -> None:
        self._size += len(name) + len(value)
        if self._size > MAX_HEADER_BYTES:
            self._refuse_raise(
                431,
                "request_header_fields_too_large",
                f"the request headers hold more than {MAX_HEADER_BYTES} bytes; "
                f"the mock accepts at most {MAX_HEADER_BYTES}",
            )
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._room += _FRAMING * self.server.max_body
        expect_continue = False
        for name, value in self._headers:
            lowered = name.lower()
            if lowered == b"content-length" and _length(value) > self.server.max_body:
                self._refuse_raise(
                    413,
                    "request_entity_too_large",
                    f"the request body is {_length(value)} bytes; the mock accepts at most "
                    f"{self.server.max_body} (--max-body)",
                )
            if lowered == b"expect" and value.strip().lower() == b"100-continue":
                expect_continue = True
        if expect_continue and self.transport is not None:
            if self.pending or self.busy:  # owed once the answers before it are sent
                self.pending.append(_GO_ON)
            else:
                self.transport.write(_CONTINUE)

    def on_body(self, body: bytes) -> None:
        self._body_size += len(body)
        if self._body_size > self.server.max_body:
            self._refuse_raise(
                413,
                "request_entity_too_large",
                f"the request body is over {self.server.max_body} bytes (--max-body)",
            )
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._reading = False
        version = self.parser.get_http_version()
        request = Request(
            self.parser.get_method().decode("latin-1"),
            self._url,
            self._headers,
            b"".join(self._body),
            version,
        )
        if version != "1.1" or not self.parser.should_keep_alive():
            self.pending.append(request)
            self.pending.append(_CLOSE)
            self._next()
            raise _Refused  # nothing after a closing request is read
        if self.busy or self.pending:
            self.pending.append(request)
        else:
            self._serve(request, keep_alive=True)

    # -- answering --------------------------------------------------------------------------
    def _next(self) -> None:
        """Serve queued requests in order until one is busy (a delay, a worker thread) or the
        client stops reading; then read on."""
        while self.pending and not (self.busy or self.blocked) and self.transport is not None:
            item = self.pending.popleft()
            if item is _GO_ON:
                self.transport.write(_CONTINUE)
                continue
            if isinstance(item, Answer):  # a refusal or the end of a closing request
                if item is not _CLOSE:
                    self._write_answer(item, head_only=False, close=True, vary=False)
                self._close()
                return
            self._serve(item, keep_alive=not (self.pending and self.pending[0] is _CLOSE))
        transport = self.transport
        if transport and not (self.busy or self.blocked or self._dead or transport.is_closing()):
            transport.resume_reading()

    def _serve(self, request: Request, keep_alive: bool) -> None:
        url = request.url
        if self.server.hot and (url == _HOT_PATH or url.startswith(_HOT_PREFIX)):
            if request.method in ("GET", "HEAD"):
                query = url[len(_HOT_PREFIX) :] if len(url) > len(_HOT_PATH) else b""
                if b"#" in query:  # a fragment is not part of the query (a client sends none)
                    query = query.partition(b"#")[0]
                self._serve_explain(request, query, keep_alive)
            else:  # as the app's own 405, without the trip to a worker thread
                answer = not_allowed(request.method, "GET, HEAD")
                if self.server.state is not None:  # journaled as the app journals it
                    query = url.partition(b"?")[2].partition(b"#")[0]
                    journal_elsewhere(
                        self.server.state,
                        request.method,
                        ENDPOINT_PATH,
                        query,
                        request.headers,
                        answer,
                    )
                self._send(request, answer, keep_alive, False)
        else:
            self._serve_app(request, keep_alive)

    def _serve_explain(self, request: Request, query: bytes, keep_alive: bool) -> None:
        authorization = None
        for name, value in request.headers:
            if name.lower() == b"authorization":
                text = value.decode("latin-1")
                authorization = text if authorization is None else f"{authorization},{text}"
        state = self.server.state
        assert state is not None  # the hot path is on for the mock's own app only
        if state.shared is not None:  # --state: the shared store decides (one round trip)
            self._busy()
            task = self.server.loop.create_task(
                decide_shared(state, request.method, query, authorization)
            )
            self.server.tasks.add(task)
            task.add_done_callback(lambda done: self._shared_decided(request, done, keep_alive))
            return
        try:
            decision = decide(state, request.method, query, authorization, request.headers)
        except SpecError as exc:  # e.g. a scenario session whose overrides cannot be served
            self._send(request, error_answer(422, "invalid_session", str(exc)), keep_alive)
            return
        except Exception:  # never a 5xx for a request, however it fails
            log.exception("unexpected error answering GET %s", ENDPOINT_PATH)
            answer = error_answer(400, "bad_request", "the request could not be processed")
            self._send(request, answer, keep_alive)
            return
        if decision.answer.delay:
            self._busy()
            self.server.loop.call_later(
                decision.answer.delay, self._delayed, request, decision, keep_alive
            )
            return
        record(state, decision)
        self._send(request, decision.answer, keep_alive)

    def _shared_decided(
        self, request: Request, done: asyncio.Task[Decision], keep_alive: bool
    ) -> None:
        """A shared state's decision (journaled already): sent now, or after its delay."""
        self.server.tasks.discard(done)
        self._idle()
        if done.cancelled() or self.transport is None or self.transport.is_closing():
            return  # the server stopped, or the client left, meanwhile
        try:
            decision = done.result()
        except SpecError as exc:
            decision_answer = error_answer(422, "invalid_session", str(exc))
        except Exception:  # never a 5xx for a request, however it fails
            log.exception("unexpected error answering GET %s", ENDPOINT_PATH)
            decision_answer = error_answer(400, "bad_request", "the request could not be processed")
        else:
            if decision.answer.delay:
                self._busy()
                self.server.loop.call_later(
                    decision.answer.delay, self._delayed, request, decision, keep_alive
                )
                return
            decision_answer = decision.answer
        self._send(request, decision_answer, keep_alive)
        self._next()

    def _delayed(self, request: Request, decision: Decision, keep_alive: bool) -> None:
        # The loop's timers have millisecond grain and may fire a little early: wait it out.
        left = decision.started + decision.answer.delay - time.perf_counter()
        if left > 0:
            self.server.loop.call_later(left, self._delayed, request, decision, keep_alive)
            return
        self._idle()
        assert self.server.state is not None
        record(self.server.state, decision)
        if self.transport is None or self.transport.is_closing():
            return  # the client left while it waited
        self._send(request, decision.answer, keep_alive)
        self._next()

    def _send(self, request: Request, answer: Answer, keep_alive: bool, vary: bool = True) -> None:
        """Write an answer to ``/e``, enacting its fault."""
        if answer.fault == "reset":
            self._log(request, "000", 0)
            self._reset()
            return
        close = not keep_alive or answer.fault == "truncated"
        sent = self._write_answer(answer, request.method == "HEAD", close, vary)
        self._log(request, status_line(answer.status), sent)
        if close:
            self._close()

    def _write_answer(self, answer: Answer, head_only: bool, close: bool, vary: bool = True) -> int:
        # The start of a head is the same for every answer of one shape: built once.
        key = (answer.status, tuple(answer.headers), len(answer.body), vary)
        heads = self.server.heads
        start = heads.get(key)
        if start is None:
            if len(heads) >= _HEADS_KEPT:
                heads.clear()
            headers = [h for h in explain_headers(answer, vary) if h[0] != FAULT_HEADER]
            if answer.status in _NO_BODY:  # RFC 9110: no body, so no length of one
                headers = [(k, v) for k, v in headers if k != "Content-Length"]
            start = _head_start(status_line(answer.status), headers)
            heads[key] = start
        body = b"" if head_only or answer.status in _NO_BODY else answer.body
        assert self.transport is not None
        end = _CLOSING if close else _KEEPING
        self.transport.write(b"".join((start, self.server.date(), end, body)))
        return len(body)

    def _head(self, status: str, headers: list[tuple[str, str]], close: bool) -> bytes:
        end = _CLOSING if close else _KEEPING
        return _head_start(status, headers) + self.server.date() + end

    def _serve_app(self, request: Request, keep_alive: bool) -> None:
        assert self.transport is not None
        server = self.server
        try:
            environ = environ_for(
                request, server.address, self.transport.get_extra_info("peername")
            )
        except httptools.HttpParserInvalidURLError:
            answer = error_answer(400, "bad_request", "the URL is not valid")
            self._send(request, answer, keep_alive=False, vary=False)
            return
        if (
            server.hot
            and environ["PATH_INFO"] == ENDPOINT_PATH
            and request.method in ("GET", "HEAD")
        ):
            # /e spelled otherwise (absolute-form, /%65): on the loop too, or a delay holds a thread
            self._serve_explain(request, environ["QUERY_STRING"].encode("latin-1"), keep_alive)
            return
        self._busy()

        def answered(done: Future[Reply]) -> None:  # on the worker thread
            with contextlib.suppress(RuntimeError):  # the server stopped meanwhile
                server.loop.call_soon_threadsafe(self._app_answered, request, done, keep_alive)

        server.pool.submit(call_app, server.app, environ).add_done_callback(answered)

    def _app_answered(self, request: Request, done: Future[Reply], keep_alive: bool) -> None:
        self._idle()
        if self.transport is None or self.transport.is_closing():
            return
        try:
            reply = done.result()
        except ConnectionResetError:  # the app asked for a reset (faults.FaultMiddleware)
            self._reset()
            return
        except Exception:  # never a 5xx: the app's own handlers answered what they could
            log.exception("unexpected error answering %s", request.method)
            answer = error_answer(400, "bad_request", "the request could not be processed")
            self._send(request, answer, keep_alive=False, vary=False)
            return
        # 1xx, 204 and 304 have no body, nor a Content-Length made up for one (RFC 9110 8.6).
        head_only = request.method == "HEAD" or reply.status[:3] in _BODILESS
        declared = reply.declared_length()
        headers = [(k, v) for k, v in reply.headers if k.lower() not in _HOP_BY_HOP]
        if declared is None and not head_only:
            headers.append(("Content-Length", str(len(reply.body))))
        # An app body shorter than its Content-Length (a scripted cut) ends the connection.
        cut = not head_only and declared is not None and declared != len(reply.body)
        close = not keep_alive or cut
        self.transport.write(self._head(reply.status, headers, close))
        if not head_only:
            self.transport.write(reply.body)
        if close:
            self._close()
        self._next()

    # -- the connection ---------------------------------------------------------------------
    def _busy(self) -> None:
        self.busy = True
        if self.transport is not None:
            self.transport.pause_reading()

    def _idle(self) -> None:
        """The answer is ready: the idle clock starts now, not when the request arrived."""
        self.busy = False
        self.last_active = self._began = self.server.loop.time()

    def _refuse(self, status: int, code: str, message: str) -> None:
        """Answer a request the server will not read (after those queued before it), close."""
        self._dead = True
        if self.transport is not None:
            self.transport.pause_reading()
        self.pending.append(error_answer(status, code, message))
        self._next()

    def _refuse_raise(self, status: int, code: str, message: str) -> None:
        self._refuse(status, code, message)
        raise _Refused

    def _close(self) -> None:
        self._dead = True
        if self.transport is not None:
            self.transport.close()
        self.pending.clear()

    def _reset(self) -> None:
        """Close with a TCP reset: nothing more is sent, unsent bytes are dropped."""
        self._dead = True
        if self.transport is None:
            return
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()
        self.pending.clear()

    def _log(self, request: Request, status: str, size: int) -> None:
        if not self.server.access_log:
            return
        path, _, query = request.url.partition(b"?")
        peer = self.transport.get_extra_info("peername") if self.transport else None
        environ = {
            "REQUEST_METHOD": request.method,
            "PATH_INFO": path.decode("latin-1"),
            "QUERY_STRING": query.decode("latin-1"),
            "SERVER_PROTOCOL": f"HTTP/{request.version}",
            "REMOTE_ADDR": peer[0] if peer else "-",
        }
        state = self.server.state
        is_key = state.key_ok if state is not None else (lambda _: False)
        access_log.info("%s", log_line(environ, status, size, is_key))

    def idle_for(self, now: float) -> float:
        """Seconds since the last byte, or since the request still arriving began."""
        if self.busy:
            return 0.0
        return now - (self._began if self._reading else self.last_active)


def _length(value: bytes) -> int:
    """A Content-Length value as a number (httptools has checked that it is digits)."""
    try:
        return int(value)
    except ValueError:
        return 0


_CLOSE: Final = Answer(0, b"", outcome="close")
"""Queued after a request that ends its connection (``Connection: close``, HTTP/1.0)."""
_GO_ON: Final = Answer(100, b"", outcome="continue")
"""Queued where a request's ``100 Continue`` is due, when answers before it are still owed."""
_HOP_BY_HOP: Final = frozenset({"connection", "keep-alive", "transfer-encoding", "date", "server"})
_BODILESS: Final = frozenset({"100", "101", "102", "103", "204", "304"})


class AsyncServer:
    """A WSGI app served by :class:`HttpConnection` on a socket bound at construction.

    For the mock's own app, ``GET``/``HEAD /e`` is answered on the loop (unless proxying).

    ``run()`` serves until ``stop()`` (which any thread may call); ``port=0`` picks a free port.
    """

    def __init__(
        self,
        app: WSGIApplication,
        host: str,
        port: int,
        threads: int,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self.app = app
        found = app.extensions.get(EXTENSION) if isinstance(app, Flask) else None
        self.state: MockState | None = found  # None: any WSGI app, every request to it
        settings = found.settings if found is not None else Settings()
        self.hot = found is not None and settings.proxy_to is None  # proxied: /e is the app's
        self.max_body = settings.max_body
        self.access_log = settings.access_log
        self.idle_timeout = idle_timeout
        self.date: Callable[[], bytes] = _Date()
        self.heads: dict[tuple[int, tuple[tuple[str, str], ...], int, bool], bytes] = {}
        self.connections: set[HttpConnection] = set()
        self.tasks: set[asyncio.Task[Decision]] = set()  # shared-state decisions under way
        self.sock = _bind(host, port, reuse_port=settings.workers > 1)
        self.address: tuple[str, int] = self.sock.getsockname()[:2]
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="verdict-mock-app")
        self.loop = new_loop()
        self._stop = asyncio.Event()
        self._sweeper: asyncio.TimerHandle | None = None

    @property
    def effective_port(self) -> int:
        return self.address[1]

    def run(self) -> None:
        """Serve on this thread until :meth:`stop`."""
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._serve())
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.loop.close()

    async def _serve(self) -> None:
        loop = self.loop
        listener = await loop.create_server(
            lambda: HttpConnection(self), sock=self.sock, backlog=1024
        )
        self._sweep()
        try:
            await self._stop.wait()
        finally:
            if self._sweeper is not None:
                self._sweeper.cancel()
            listener.close()
            for task in list(self.tasks):  # a shared state still deciding: not answered now
                task.cancel()
            for connection in list(self.connections):
                if connection.transport is not None:
                    connection.transport.abort()
            await asyncio.sleep(0)  # let the aborted transports close
            if self.state is not None and self.state.shared is not None:
                await self.state.shared.close_async()  # its connections belong to this loop

    def stop(self) -> None:
        """Stop serving (from any thread): the listener and every connection close."""
        with contextlib.suppress(RuntimeError):  # the loop is already closed
            self.loop.call_soon_threadsafe(self._stop.set)

    def close(self) -> None:
        """Release a server that was never run (its socket, loop and pool)."""
        self.sock.close()
        self.pool.shutdown(wait=False)
        if not self.loop.is_closed():
            self.loop.close()

    def _sweep(self) -> None:
        now = self.loop.time()
        for connection in list(self.connections):
            if connection.idle_for(now) > self.idle_timeout and connection.transport is not None:
                connection.transport.close()
        self._sweeper = self.loop.call_later(min(1.0, self.idle_timeout), self._sweep)


def _bind(host: str, port: int, reuse_port: bool = False) -> socket.socket:
    """A listening socket on ``host``:``port`` (raises OSError, e.g. if the port is taken).

    ``reuse_port``: several processes listen on the port and the kernel spreads connections
    among them (``--workers``; SO_REUSEPORT, where the OS has it).
    """
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.listen(1024)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def serve(server: AsyncServer) -> None:
    """Serve in the foreground until interrupted."""
    try:
        server.run()
    except KeyboardInterrupt:
        log.info("stopped")
