"""One client connection of the mock's own server: parsing, the pipeline, flow control, bounds.

httptools parses; each request becomes a :class:`.cycle.RequestCycle` in the connection's
pipeline and is answered strictly in turn: ``GET``/``HEAD /e`` on the loop (a scripted delay
with ``call_later``), anything else by the app on a worker thread. Nothing is answered while the
client is not reading (``pause_writing``), and nothing is read while an answer is waited on.
The bounds of one client: :data:`MAX_PIPELINED` requests queued, its body in one buffer of at
most ``--max-body``, its head as :data:`MAX_HEAD_BYTES`, and the idle timeout for a connection
idle, stuck half-way through a request, or not reading what it was sent (then reset).
A refusal is written, then what the client still sends is read and discarded for up to
:data:`DRAIN_SECONDS` (or :data:`DRAIN_BYTES`) before closing (RFC 9112 §9.6).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Final, Protocol, cast

import httptools

from verdict_contract.core.spec import API_METHODS, ENDPOINT_PATH, is_api_call

from ..explain import (
    Decision,
    decide,
    decide_shared,
    journal_elsewhere,
    record,
)
from ..model.answer import Answer, error_answer, failure_answer, not_allowed, status_line
from ..state import MockState
from ..web.accesslog import log_request
from ..web.limits import MAX_HEADER_BYTES
from .cycle import (
    DECIDING,
    DELAYED,
    DONE,
    NOTED,
    QUEUED,
    WRITING,
    RequestCycle,
)
from .wire import CONTINUE, Heads, peer_closed, reset_on_close
from .wsgibridge import Reply, Request, call_app, environ_for

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication

log = logging.getLogger("mockserver.server")

MAX_TARGET_BYTES: Final = 256 * 1024
"""The longest request target (path and query) the server reads; longer is 414."""
IDLE_TIMEOUT: Final = 30.0
"""Seconds a connection may sit idle, stuck half-way through a request, or not read its
answers, before it closes (aborted, if its answers are still unsent)."""
MAX_PIPELINED: Final = 100
"""Requests one connection may have waiting for their answers; the next is refused (503)."""
DRAIN_SECONDS: Final = 2.0
"""After a refusal, how long what the client still sends is read and discarded."""
DRAIN_BYTES: Final = 16 * 1024 * 1024
"""... and how many bytes of it, at most."""
_HOT_PREFIX: Final = ENDPOINT_PATH.encode() + b"?"
_HOT_PATH: Final = ENDPOINT_PATH.encode()
_HASH: Final = ord("#")  # bytes find an int by memchr; a one-byte bytes costs ten times more
# httptools keeps a header name or value whole until its line ends, so the bytes of a request
# still arriving are counted: its head (with the read it began in) may be this long; its
# body, chunk framing and trailers add at most six bytes per body byte ("1\r\nx\r\n").
_READ_BYTES: Final = 256 * 1024  # the most one read hands over (uvloop's buffer)
MAX_HEAD_BYTES: Final = MAX_TARGET_BYTES + MAX_HEADER_BYTES + _READ_BYTES
_FRAMING: Final = 6
_VERSIONS: Final = frozenset({"1.0", "1.1"})


class _Refused(Exception):
    """Raised in a parser callback to stop parsing: nothing more of this connection is read."""


class Host(Protocol):
    """What a connection needs of its server (:class:`.asyncserver.AsyncServer`)."""

    app: WSGIApplication
    state: MockState | None
    hot: bool  # /e answered on the loop
    max_body: int
    max_connections: int
    access_log: bool
    heads: Heads
    connections: set[HttpConnection]
    open: int  # connections counted against max_connections
    address: tuple[str, int]
    pool: ThreadPoolExecutor
    loop: asyncio.AbstractEventLoop
    tasks: set[asyncio.Task[Decision]]  # a shared state's decisions under way


def _overloaded(code: str, message: str) -> Answer:
    return error_answer(503, code, message, headers=[("Retry-After", "1")])


class HttpConnection(asyncio.Protocol):
    """One client connection: parse requests, answer them in order, within its bounds."""

    def __init__(self, server: Host) -> None:
        self.server = server
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.pipeline: deque[RequestCycle] = deque()  # read whole; the first is being answered
        self.cycle: RequestCycle | None = None  # the request still arriving
        self.writing_paused = False  # the client is not reading: nothing more is answered
        self.reading = True
        self.closing = False  # no further request is read; close once the pipeline is answered
        self.ended = False  # closed or closing: nothing more is written
        self.lingering = False  # refused: reading and discarding until the drain ends
        self.counted = False  # holds one of the server's --max-connections
        self.last_active = server.loop.time()
        self._began = self.last_active  # when the request still arriving began
        self._paused_at = 0.0  # when the client stopped reading
        self._room = 0  # bytes the request still arriving may take (MAX_HEAD_BYTES, then more)
        self._drained = 0
        self._timer: asyncio.TimerHandle | None = None  # a delay's, or the drain's

    # -- the transport's side ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.Transport", transport)  # uvloop's is not a subclass
        server = self.server
        server.connections.add(self)
        if server.open >= server.max_connections:
            answer = _overloaded(
                "too_many_connections",
                f"the mock holds {server.max_connections} connections already "
                "(--max-connections); retry, or reuse a connection",
            )
            self._linger(server.heads.answer(answer, False, True, False)[0])
            return
        server.open += 1
        self.counted = True

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        if self.counted:
            self.server.open -= 1
            self.counted = False
        self.ended = True
        self._give_up()
        self.transport = None

    def eof_received(self) -> bool:
        """The client sent all it will: answer what it asked, then close."""
        self.closing = True
        return not (self.lingering or not self.pipeline)  # False: the transport closes itself

    def data_received(self, data: bytes) -> None:
        self.last_active = self.server.loop.time()
        if self.lingering:
            self._drained += len(data)
            if self._drained > DRAIN_BYTES:
                self.abort()
            return
        if self.closing:
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:  # answered as a closing request; no protocol switch
            pass
        except httptools.HttpParserCallbackError as exc:
            if not isinstance(exc.__context__, _Refused):
                log.exception("unexpected error reading a request")
                self._refuse(400, "bad_request", "the request could not be processed")
        except httptools.HttpParserError as exc:
            self._refuse(400, "bad_request", f"the request is not valid HTTP/1.1: {exc}")
        else:
            if self.cycle is not None:  # a request still arriving: what is kept of it is bounded
                self._room -= len(data)
                if self._room < 0:
                    self._refuse(
                        431,
                        "request_header_fields_too_large",
                        f"the request's head or trailers hold more than {MAX_HEAD_BYTES} bytes",
                    )

    def pause_writing(self) -> None:  # the client is not reading: stop answering and reading
        self.writing_paused = True
        self._paused_at = self.server.loop.time()
        self._flow()

    def resume_writing(self) -> None:
        self.writing_paused = False
        self.last_active = self.server.loop.time()
        self._advance()

    # -- httptools callbacks ----------------------------------------------------------------
    def on_message_begin(self) -> None:
        if self.closing:  # the connection ends with the answers owed: read no further request
            raise _Refused
        self.cycle = RequestCycle()
        self._room, self._began = MAX_HEAD_BYTES, self.last_active

    def on_url(self, url: bytes) -> None:
        cycle = self.cycle
        if cycle is None:  # httptools calls back within a message only
            raise _Refused
        cycle.url += url
        if len(cycle.url) > MAX_TARGET_BYTES:
            self._refuse_raise(
                414, "uri_too_long", f"the request target is longer than {MAX_TARGET_BYTES} bytes"
            )

    def on_header(self, name: bytes, value: bytes) -> None:
        cycle = self.cycle
        if cycle is None:
            raise _Refused
        cycle.size += len(name) + len(value)
        if cycle.size > MAX_HEADER_BYTES:
            self._refuse_raise(
                431,
                "request_header_fields_too_large",
                f"the request headers hold more than {MAX_HEADER_BYTES} bytes; "
                f"the mock accepts at most {MAX_HEADER_BYTES}",
            )
        cycle.headers.append((name, value))
        if len(name) in NOTED:
            cycle.note(name, value)

    def on_headers_complete(self) -> None:
        cycle = self.cycle
        if cycle is None:
            raise _Refused
        cycle.version = version = self.parser.get_http_version()
        if version not in _VERSIONS:
            self._refuse_raise(
                400, "bad_request", f"HTTP/{version[:8]} is not served here; send HTTP/1.1"
            )
        max_body = self.server.max_body
        self._room += _FRAMING * max_body
        if cycle.declared > max_body:
            self._refuse_raise(
                413,
                "request_entity_too_large",
                f"the request body is {cycle.declared} bytes; the mock accepts at most "
                f"{max_body} (--max-body)",
            )
        if cycle.asks_continue:
            cycle.expect_continue = True
            self._continue()

    def on_body(self, body: bytes) -> None:
        cycle = self.cycle
        if cycle is None:
            raise _Refused
        if len(cycle.body) + len(body) > self.server.max_body:
            self._refuse_raise(
                413,
                "request_entity_too_large",
                f"the request body is over {self.server.max_body} bytes (--max-body)",
            )
        cycle.body += body

    def on_message_complete(self) -> None:
        cycle = self.cycle
        if cycle is None:
            raise _Refused
        parser = self.parser
        if len(self.pipeline) >= MAX_PIPELINED:
            self._refuse_raise(
                503,
                "too_many_pipelined_requests",
                f"{MAX_PIPELINED} requests are already waiting for their answers on this "
                "connection; read the answers before sending more",
            )
        version = cycle.version
        keep_alive = version == "1.1" and parser.should_keep_alive() and not parser.should_upgrade()
        self.cycle = None
        method = _METHODS.get(parser.get_method()) or parser.get_method().decode("latin-1")
        cycle.complete(method, version, keep_alive)
        if not keep_alive:
            self.closing = True
        pipeline = self.pipeline
        if pipeline or self.writing_paused or self.ended:
            pipeline.append(cycle)  # answered in its turn
            if len(pipeline) == 1:
                self._advance()
        else:  # its turn has come: the common case, answered here without the queue
            self._start(cycle)
            if cycle.phase is not DONE:  # waiting on a delay or the app
                pipeline.append(cycle)
                self._flow()
        if not keep_alive:
            raise _Refused  # nothing after a closing request is read

    # -- the pipeline -----------------------------------------------------------------------
    def _advance(self) -> None:
        """Answer the pipeline in order until one request waits (a delay, a worker thread) or
        the client stops reading; then read on, or close if the connection is ending."""
        pipeline = self.pipeline
        while pipeline and not (self.writing_paused or self.ended):
            cycle = pipeline[0]
            if cycle.phase is QUEUED:
                self._start(cycle)
            if cycle.phase is not DONE:
                break
            if pipeline:  # (a cut or a reset emptied it)
                pipeline.popleft()
        if not pipeline and not self.ended:
            if self.closing:
                self._close()
                return
            if self.cycle is not None and self.cycle.expect_continue:
                self._continue()
        self._flow()

    def _start(self, cycle: RequestCycle) -> None:
        """Begin answering the request at the head of the pipeline."""
        if cycle.refusal is not None:
            cycle.to(WRITING)
            self._linger(self.server.heads.answer(cycle.refusal, False, True, False)[0])
            cycle.to(DONE)
            return
        request = cycle.request
        assert request is not None
        url = request.url
        if self.server.hot and (url == _HOT_PATH or url.startswith(_HOT_PREFIX)):
            if request.method in ("GET", "HEAD"):
                query = url[len(_HOT_PREFIX) :] if len(url) > len(_HOT_PATH) else b""
                if _HASH in query:  # a fragment is not part of the query (a client sends none)
                    query = query.partition(b"#")[0]
                self._serve_explain(cycle, request, query)
            else:  # as the app's own 405, without the trip to a worker thread
                answer = not_allowed(request.method, ", ".join(API_METHODS))
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
                self._send(cycle, answer, vary=False)
        else:
            self._serve_app(cycle, request)

    def _continue(self) -> None:
        """Write the 100 Continue of the request still arriving, once its turn has come."""
        cycle = self.cycle
        if cycle is None or cycle.continued or self.pipeline or self.writing_paused:
            return
        if self.transport is not None and not self.ended:
            cycle.continued = True
            self.transport.write(CONTINUE)

    def _flow(self) -> None:
        """Read while the client reads its answers and no answer is waited on."""
        transport = self.transport
        if transport is None or self.ended:
            return
        wanted = not (
            self.closing or self.writing_paused or (self.pipeline and self.pipeline[0].busy)
        )
        if wanted != self.reading:
            self.reading = wanted
            if wanted:
                transport.resume_reading()
            else:
                transport.pause_reading()

    def _give_up(self) -> None:
        """The connection is gone or cut: no request left in it will be answered."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for cycle in self.pipeline:
            if cycle.phase is DELAYED and cycle.decision is not None:
                assert self.server.state is not None  # a delay is the hot path's
                record(self.server.state, cycle.decision, fault="disconnected")
            if cycle.phase is not DONE:
                cycle.to(DONE)
        self.pipeline.clear()
        self.cycle = None

    # -- answering /e on the loop -----------------------------------------------------------
    def _serve_explain(self, cycle: RequestCycle, request: Request, query: bytes) -> None:
        authorization = cycle.authorization
        state = self.server.state
        assert state is not None  # the hot path is on for the mock's own app only
        if state.shared is not None:  # --state: the shared store decides (one round trip)
            cycle.to(DECIDING)
            task = self.server.loop.create_task(
                decide_shared(state, request.method, query, authorization)
            )
            self.server.tasks.add(task)
            task.add_done_callback(lambda done: self._shared_decided(cycle, done))
            return
        try:
            decision = decide(state, request.method, query, authorization, request.headers)
        except Exception as exc:  # never a 5xx for a request, however it fails
            self._send(cycle, _failure(exc))
            return
        if not self._held(cycle, decision):
            record(state, decision)
            self._send(cycle, decision.answer)

    def _held(self, cycle: RequestCycle, decision: Decision) -> bool:
        """Whether the answer waits out its scripted delay on the loop (sent by ``_delayed``)."""
        if not decision.answer.delay:
            return False
        cycle.to(DELAYED)
        cycle.decision = decision
        self._timer = self.server.loop.call_later(
            decision.answer.delay, self._delayed, cycle, decision
        )
        return True

    def _shared_decided(self, cycle: RequestCycle, done: asyncio.Task[Decision]) -> None:
        """A shared state's decision (journaled already): sent now, or after its delay."""
        self.server.tasks.discard(done)
        if done.cancelled() or cycle.phase is not DECIDING or self.ended:
            return  # the server stopped, or the client left, meanwhile
        self._rested()
        try:
            decision = done.result()
        except Exception as exc:  # never a 5xx for a request, however it fails
            answer = _failure(exc)
        else:
            if self._held(cycle, decision):
                return
            answer = decision.answer
        self._send(cycle, answer)
        self._advance()

    def _delayed(self, cycle: RequestCycle, decision: Decision) -> None:
        if cycle.phase is not DELAYED:
            return  # given up: the client left (journaled then)
        # The loop's timers have millisecond grain and may fire a little early: wait it out.
        left = decision.started + decision.answer.delay - time.perf_counter()
        if left > 0:
            self._timer = self.server.loop.call_later(left, self._delayed, cycle, decision)
            return
        self._timer = None
        self._rested()
        assert self.server.state is not None
        # A client that closed its side meanwhile (reading was paused: a peek tells) is
        # journaled as disconnected; the answer is still written, in case it only half-closed.
        gone = self._client_gone()
        record(self.server.state, decision, fault="disconnected" if gone else None)
        self._send(cycle, decision.answer)
        self._advance()

    def _send(self, cycle: RequestCycle, answer: Answer, vary: bool = True) -> None:
        """Write an answer to ``/e``, enacting its fault."""
        request = cycle.request
        assert request is not None
        assert self.transport is not None
        cycle.to(WRITING)
        if answer.fault == "reset":
            self._log(request, "000", 0)
            cycle.to(DONE)
            self._reset()
            return
        close = not cycle.keep_alive or answer.fault == "truncated"
        data, sent = self.server.heads.answer(answer, request.method == "HEAD", close, vary)
        self.transport.write(data)
        cycle.to(DONE)
        if self.server.access_log:
            self._log(request, status_line(answer.status), sent)
        if close:
            self._close()

    # -- answering through the app ----------------------------------------------------------
    def _serve_app(self, cycle: RequestCycle, request: Request) -> None:
        assert self.transport is not None
        server = self.server
        try:
            environ = environ_for(
                request, server.address, self.transport.get_extra_info("peername")
            )
        except httptools.HttpParserInvalidURLError:
            cycle.keep_alive = False
            self._send(cycle, error_answer(400, "bad_request", "the URL is not valid"), vary=False)
            return
        if server.hot and is_api_call(request.method, environ["PATH_INFO"]):
            # /e spelled otherwise (absolute-form, /%65): on the loop too, or a delay holds a thread
            self._serve_explain(cycle, request, environ["QUERY_STRING"].encode("latin-1"))
            return
        cycle.to(DECIDING)

        def answered(done: Future[Reply]) -> None:  # on the worker thread
            with contextlib.suppress(RuntimeError):  # the server stopped meanwhile
                server.loop.call_soon_threadsafe(self._app_answered, cycle, done)

        server.pool.submit(call_app, server.app, environ).add_done_callback(answered)

    def _app_answered(self, cycle: RequestCycle, done: Future[Reply]) -> None:
        if cycle.phase is not DECIDING or self.transport is None or self.ended:
            return  # the connection is gone
        self._rested()
        request = cycle.request
        assert request is not None
        try:
            reply = done.result()
        except ConnectionResetError:  # the app asked for a reset (faults.FaultMiddleware)
            cycle.to(DONE)
            self._reset()
            return
        except Exception:  # never a 5xx: the app's own handlers answered what they could
            log.exception("unexpected error answering %s", request.method)
            cycle.to(WRITING)
            cycle.keep_alive = False
            answer = error_answer(400, "bad_request", "the request could not be processed")
            self.transport.write(self.server.heads.answer(answer, False, True, False)[0])
            cycle.to(DONE)
            self._close()
            return
        cycle.to(WRITING)
        data, close = self.server.heads.reply(reply, request.method, cycle.keep_alive)
        self.transport.write(data)
        cycle.to(DONE)
        if close:
            self._close()
        self._advance()

    # -- the connection ---------------------------------------------------------------------
    def _rested(self) -> None:
        """An answer waited on is ready: the idle clock starts now, not when it was asked."""
        self.last_active = self._began = self.server.loop.time()

    def _refuse(self, status: int, code: str, message: str) -> None:
        """Answer a request the server will not read (after those queued before it), drain."""
        self.closing = True
        self.cycle = None
        self.pipeline.append(RequestCycle(refusal=error_answer(status, code, message)))
        if len(self.pipeline) == 1:
            self._advance()
        else:
            self._flow()

    def _refuse_raise(self, status: int, code: str, message: str) -> None:
        self._refuse(status, code, message)
        raise _Refused

    def _linger(self, data: bytes) -> None:
        """Write a closing answer, then read and discard for a while before closing (RFC 9112
        §9.6): a client still sending its request reads the answer instead of a reset."""
        transport = self.transport
        assert transport is not None
        self.closing = self.ended = self.lingering = True
        transport.write(data)
        if transport.can_write_eof():
            transport.write_eof()
        self.reading = True
        transport.resume_reading()
        self._timer = self.server.loop.call_later(DRAIN_SECONDS, self.abort)

    def _close(self) -> None:
        self.closing = self.ended = True
        if self.transport is not None:
            self.transport.close()
        self._give_up()

    def abort(self) -> None:
        """Close at once, dropping what the client never read."""
        self.closing = self.ended = True
        if self.transport is not None:
            self.transport.abort()
        self._give_up()

    def _reset(self) -> None:
        """Close with a TCP reset: nothing more is sent, unsent bytes are dropped."""
        if self.transport is not None:
            reset_on_close(self.transport)
        self.abort()

    def _client_gone(self) -> bool:
        return self.transport is None or peer_closed(self.transport)

    def _log(self, request: Request, status: str, size: int) -> None:
        if not self.server.access_log:
            return
        peer = self.transport.get_extra_info("peername") if self.transport else None
        state = self.server.state
        is_key = state.key_ok if state is not None else (lambda _: False)
        log_request(request.method, request.url, request.version, peer, status, size, is_key)

    def sweep(self, now: float, timeout: float) -> None:
        """Close the connection if it has been idle, stuck or not reading for ``timeout``."""
        if self.lingering or self.transport is None:
            return  # the drain's own timer ends it
        if self.writing_paused:  # its answers do not drain: drop them, the kernel's copy too
            if now - self._paused_at > timeout:
                self._reset()
            return
        if self.pipeline and self.pipeline[0].busy:
            return  # waiting on a delay or the app, not on the client
        since = self._began if self.cycle is not None else self.last_active
        if now - since > timeout:
            if self.transport.get_write_buffer_size():
                self.abort()
            else:
                self._close()


_METHODS: Final = {m.encode(): m for m in ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS")}
"""The usual methods' names, decoded once."""


def _failure(exc: Exception) -> Answer:
    """The answer to a request to ``/e`` that could not be decided (model/answer.py decides)."""
    return failure_answer(exc, f"answering GET {ENDPOINT_PATH}")
