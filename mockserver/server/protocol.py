"""One client connection of the mock's own HTTP/1.1 server, and each request on it.

As uvicorn's ``httptools_impl.py``: :class:`HttpConnection` is the asyncio protocol and
httptools' callback object. It reads each request into a :class:`RequestCycle` of its pipeline,
or refuses it as it arrives: a target over :data:`MAX_TARGET_BYTES` (414), headers over
:data:`.middleware.MAX_HEADER_BYTES` or a head still arriving past :data:`MAX_HEAD_BYTES` (431), a
body over ``--max-body`` (413), more than :data:`MAX_PIPELINED` requests waiting (503), anything
httptools cannot parse (400). It answers strictly in turn: ``GET``/``HEAD /e`` on the loop from
:func:`.explain.decide` (a scripted delay with ``call_later``, a fault enacted: a TCP reset, a
cut body), anything else by the app on a worker thread; ``Expect: 100-continue`` gets its 100
in turn. With its flow control (:mod:`.flow`): nothing is answered while the client is not
reading, nothing is read while an answer is waited on, and a refusal is written, then what the
client still sends is discarded for up to :data:`DRAIN_SECONDS` (RFC 9112 §9.6). The idle
timeout closes a connection idle, stuck half-way through a request, or not reading its answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol, cast

import httptools

from verdict_contract.core.spec import API_METHODS, ENDPOINT_PATH, is_api_call

from ..explain import Decider, Decision, decide, journal_elsewhere, record, run, unavailable
from ..model.answer import (
    NO_STATUS,
    Answer,
    error_answer,
    failure_answer,
    not_allowed,
    status_line,
)
from ..state import MockState
from ..store.backend import StateUnavailable
from ..store.primitives import Reply as StoreReply
from ..web.accesslog import Served, log_request
from ..web.middleware import MAX_HEADER_BYTES
from .flow import ENDING, LINGERING, OPEN, FlowControl
from .wire import CONTINUE, Heads, peer_closed
from .wsgibridge import Request, call_app, environ_for

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication

    from .wsgibridge import Reply

log = logging.getLogger("mockserver.server")


class Phase(enum.IntEnum):
    """Where a request is between its first byte and the end of its answer (an ``IntEnum``:
    a phase is hashed and compared at every move, on the hot path)."""

    READING = 1  # its head or body is still arriving
    QUEUED = 2  # read whole (or refused): waits for the answers before it to be written
    DECIDING = 3  # the app computes its answer on a worker thread, or a shared state decides it
    DELAYED = 4  # its answer is decided; a scripted delay is waited out on the loop
    DONE = 5  # answered (its bytes handed to the transport), or given up (the client left)


# Each phase as a module constant too: on Python 3.11 reading an Enum member as a class
# attribute costs about 50 ns (its metaclass's lookup), and a request reads a dozen. Measured:
# wrk against verdict-mock, GET /e, 38k req/s with Phase.X on the hot path, 44k with these.
READING: Final = Phase.READING
QUEUED: Final = Phase.QUEUED
DECIDING: Final = Phase.DECIDING
DELAYED: Final = Phase.DELAYED
DONE: Final = Phase.DONE

_MOVES: Final[dict[Phase, frozenset[Phase]]] = {
    READING: frozenset({QUEUED, DONE}),
    QUEUED: frozenset({DECIDING, DELAYED, DONE}),
    DECIDING: frozenset({DELAYED, DONE}),
    DELAYED: frozenset({DONE}),
    DONE: frozenset(),  # answered once: a second answer is refused
}
BUSY: Final = frozenset({DECIDING, DELAYED})
"""Phases in which the connection waits on something other than its client."""


class PhaseError(RuntimeError):
    """A move between phases that the table does not allow: a bug in the server."""


@dataclass(slots=True, eq=False)
class RequestCycle:
    """One request: what was read of it, its phase, and how its answer ends the connection.

    ``body`` is one growing buffer (a body sent in 2-byte chunks costs its size, not an object
    per chunk). ``refusal`` is set for a request answered without being read whole (413,
    431...): it is queued at once, and its answer closes the connection.
    """

    refusal: Answer | None = None
    phase: Phase = READING
    url: bytes = b""
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    size: int = 0  # header bytes so far
    body: bytearray = field(default_factory=bytearray)
    version: str = ""  # "1.1", "1.0", as its head said
    # Noted from the head as it arrives, so nothing loops over the headers:
    authorization: str | None = None  # every Authorization header, joined by ","
    declared: int = 0  # the largest Content-Length declared
    asks_continue: bool = False  # an Expect: 100-continue header was among them
    expect_continue: bool = False  # ... in its head (not its trailers): it gets a 100
    continued: bool = False  # its 100 Continue was written
    keep_alive: bool = True
    request: Request | None = None
    decision: Decision | None = None  # while DELAYED: journaled however it ends
    state: MockState | None = None  # its tenant's state, found once (HttpConnection._state)

    def __post_init__(self) -> None:
        if self.refusal is not None:
            self.phase, self.keep_alive = QUEUED, False

    def to(self, phase: Phase) -> None:
        """Move to ``phase``; a move the table does not list raises :class:`PhaseError`."""
        if phase not in _MOVES[self.phase]:
            raise PhaseError(f"a request cannot go from {self.phase.name} to {phase.name}")
        self.phase = phase

    def complete(self, method: str, version: str, keep_alive: bool) -> Request:
        """The request is read whole: it waits its turn (:attr:`Phase.QUEUED`)."""
        self.to(QUEUED)
        self.keep_alive = keep_alive
        self.request = Request(method, self.url, self.headers, bytes(self.body), version)
        self.body = bytearray()  # the request holds the bytes now: keep them once
        return self.request

    @property
    def busy(self) -> bool:
        return self.phase in BUSY


MAX_TARGET_BYTES: Final = 256 * 1024
"""The longest request target (path and query) the server reads; longer is 414."""
MAX_PIPELINED: Final = 100
"""Requests one connection may have waiting for their answers; the next is refused (503)."""
# httptools keeps a header name or value whole until its line ends, so the bytes of a request
# still arriving are counted: its head (with the read it began in) may be this long; its
# body, chunk framing and trailers add at most six bytes per body byte ("1\r\nx\r\n").
_READ_BYTES: Final = 256 * 1024  # the most one read hands over (uvloop's buffer)
MAX_HEAD_BYTES: Final = MAX_TARGET_BYTES + MAX_HEADER_BYTES + _READ_BYTES
_FRAMING: Final = 6
_VERSIONS: Final = frozenset({"1.0", "1.1"})
_HOT_PREFIX: Final = ENDPOINT_PATH.encode() + b"?"
_HOT_PATH: Final = ENDPOINT_PATH.encode()
_FAILED: Final = f"answering GET {ENDPOINT_PATH}"
IDLE_TIMEOUT: Final = 30.0
"""Seconds a connection may sit idle, stuck half-way through a request, or not read its
answers, before it closes (aborted, if its answers are still unsent)."""
DRAIN_SECONDS: Final = 5.0
"""After a refusal, how long what the client still sends is read and discarded (any size)."""


class _Refused(Exception):
    """Raised in a parser callback to stop parsing: nothing more of this connection is read."""


class Host(Protocol):
    """What a connection needs of its server (:class:`.asyncserver.AsyncServer`; the tests'
    fake server, :mod:`tests.mockserver.fakes`)."""

    app: WSGIApplication
    state: MockState | None
    hot: bool  # /e answered on the loop
    drain_seconds: float
    access_log: bool
    heads: Heads
    address: tuple[str, int]
    pool: ThreadPoolExecutor
    loop: asyncio.AbstractEventLoop
    max_body: int
    max_connections: int
    connections: set[HttpConnection]
    open: int  # connections counted against max_connections


class HttpConnection(asyncio.Protocol):
    """One client connection: read its requests within their bounds, answer them in order."""

    flow: FlowControl  # from connection_made on

    def __init__(self, server: Host) -> None:
        self.server = server
        self.parser = httptools.HttpRequestParser(self)
        self.arriving: RequestCycle | None = None  # the request still arriving
        self.began = 0.0  # when it began (loop time)
        self.room = 0  # bytes it may still take (MAX_HEAD_BYTES, then its body's share)
        self.pipeline: deque[RequestCycle] = deque()  # read whole; the first is being answered
        self.counted = False  # holds one of the server's --max-connections
        self.last_active = server.loop.time()
        self.timer: asyncio.TimerHandle | None = None  # the scripted delay waited out
        self.starting = False  # within _start: an answer given now is not waited on

    # -- the transport's side ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        server = self.server
        # uvloop's transport is no subclass of asyncio.Transport
        self.flow = FlowControl(cast("asyncio.Transport", transport), server.loop)
        server.connections.add(self)
        if server.open >= server.max_connections:
            answer = error_answer(
                503,
                "too_many_connections",
                f"the mock holds {server.max_connections} connections already "
                "(--max-connections); retry, or reuse a connection",
                headers=[("Retry-After", "1")],
            )
            data = server.heads.answer(answer, False, True, False)[0]
            self.flow.linger(data, server.drain_seconds)
            return
        server.open += 1
        self.counted = True

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        if self.counted:
            self.server.open -= 1
            self.counted = False
        self.flow.lost()
        self._give_up()

    def eof_received(self) -> bool:
        """The client sent all it will: answer what it asked, then close."""
        self.flow.end()
        return self.flow.state is not LINGERING and bool(self.pipeline)  # False: it closes itself

    def data_received(self, data: bytes) -> None:
        self.last_active = self.server.loop.time()
        if self.flow.state is not OPEN:  # lingering: discarded, as ending: no request is read
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
            if self.arriving is not None:  # a request still arriving: what is kept is bounded
                self.room -= len(data)
                if self.room < 0:
                    self._refuse(
                        431,
                        "request_header_fields_too_large",
                        f"the request's head or trailers hold more than {MAX_HEAD_BYTES} bytes",
                    )

    def pause_writing(self) -> None:  # the client is not reading: stop answering and reading
        self.flow.pause_writing()
        self._flow()

    def resume_writing(self) -> None:
        self.flow.resume_writing()
        self.last_active = self.server.loop.time()
        self.advance()

    # -- httptools' callbacks (within a message: ``arriving`` is set) ---------------------------
    def on_message_begin(self) -> None:
        if self.flow.state is not OPEN:  # the connection ends with the answers owed
            raise _Refused
        self.arriving = RequestCycle()
        self.room, self.began = MAX_HEAD_BYTES, self.last_active

    def on_url(self, url: bytes) -> None:
        cycle = self.arriving
        assert cycle is not None
        cycle.url += url
        if len(cycle.url) > MAX_TARGET_BYTES:
            raise self._refuse(
                414, "uri_too_long", f"the request target is longer than {MAX_TARGET_BYTES} bytes"
            )

    def on_header(self, name: bytes, value: bytes) -> None:
        cycle = self.arriving
        assert cycle is not None
        cycle.size += len(name) + len(value)
        if cycle.size > MAX_HEADER_BYTES:
            raise self._refuse(
                431,
                "request_header_fields_too_large",
                f"the request headers hold more than {MAX_HEADER_BYTES} bytes; "
                f"the mock accepts at most {MAX_HEADER_BYTES}",
            )
        cycle.headers.append((name, value))
        lowered = name.lower()  # the headers that decide how the request is read or answered
        if lowered == b"authorization":
            text, before = value.decode("latin-1"), cycle.authorization
            cycle.authorization = text if before is None else f"{before},{text}"
        elif lowered == b"content-length":
            with contextlib.suppress(ValueError):  # httptools has checked that it is digits
                cycle.declared = max(cycle.declared, int(value))
        elif lowered == b"expect" and value.strip().lower() == b"100-continue":
            cycle.asks_continue = True

    def on_headers_complete(self) -> None:
        cycle = self.arriving
        assert cycle is not None
        cycle.version = version = self.parser.get_http_version()
        if version not in _VERSIONS:
            raise self._refuse(
                400, "bad_request", f"HTTP/{version[:8]} is not served here; send HTTP/1.1"
            )
        max_body = self.server.max_body
        self.room += _FRAMING * max_body
        if cycle.declared > max_body:
            raise self._refuse(
                413,
                "request_entity_too_large",
                f"the request body is {cycle.declared} bytes; the mock accepts at most "
                f"{max_body} (--max-body)",
            )
        if cycle.asks_continue:
            cycle.expect_continue = True
            self._continue()

    def on_body(self, body: bytes) -> None:
        cycle = self.arriving
        assert cycle is not None
        if len(cycle.body) + len(body) > self.server.max_body:
            raise self._refuse(
                413,
                "request_entity_too_large",
                f"the request body is over {self.server.max_body} bytes (--max-body)",
            )
        cycle.body += body

    def on_message_complete(self) -> None:
        cycle = self.arriving
        assert cycle is not None
        parser = self.parser
        if len(self.pipeline) >= MAX_PIPELINED:
            raise self._refuse(
                503,
                "too_many_pipelined_requests",
                f"{MAX_PIPELINED} requests are already waiting for their answers on this "
                "connection; read the answers before sending more",
            )
        version = cycle.version
        keep_alive = version == "1.1" and parser.should_keep_alive() and not parser.should_upgrade()
        self.arriving = None
        cycle.complete(parser.get_method().decode("latin-1"), version, keep_alive)
        self._queued(cycle)
        if not keep_alive:
            raise _Refused  # nothing after a closing request is read

    def _queued(self, cycle: RequestCycle) -> None:
        """A request read whole: answered now if its turn has come, else in its turn."""
        if not cycle.keep_alive:
            self.flow.end()
        pipeline = self.pipeline
        if pipeline or not self.flow.answers:
            pipeline.append(cycle)  # answered in its turn
            if len(pipeline) == 1:
                self.advance()
        else:  # its turn has come: the common case, answered here without the queue
            self._start(cycle)
            if cycle.phase is not DONE:  # waiting on a delay or the app
                pipeline.append(cycle)
                self._flow()

    def _refuse(self, status: int, code: str, message: str) -> _Refused:
        """Answer a request the server will not read (after those queued before it), then
        linger; a parser callback raises what this returns, to stop parsing."""
        self.arriving = None
        self.flow.end()
        self.pipeline.append(RequestCycle(refusal=error_answer(status, code, message)))
        if len(self.pipeline) == 1:
            self.advance()
        else:
            self._flow()
        return _Refused()

    # -- the pipeline -----------------------------------------------------------------------
    def advance(self) -> None:
        """Answer the pipeline in order until one request waits (a delay, a worker thread) or
        the client stops reading; then read on, or close if the connection is ending."""
        pipeline = self.pipeline
        flow = self.flow
        while pipeline and flow.answers:
            cycle = pipeline[0]
            if cycle.phase is QUEUED:
                self._start(cycle)
            if cycle.phase is not DONE:
                break
            if pipeline:  # (a cut or a reset emptied it)
                pipeline.popleft()
        if not pipeline and flow.writes:
            if flow.state is ENDING:
                self.close()
                return
            arriving = self.arriving
            if arriving is not None and arriving.expect_continue:
                self._continue()
        self._flow()

    def _continue(self) -> None:
        """Write the 100 Continue of the request still arriving, once its turn has come."""
        cycle = self.arriving
        if cycle is None or cycle.continued or self.pipeline or not self.flow.answers:
            return
        cycle.continued = True
        self.flow.transport.write(CONTINUE)

    def _flow(self) -> None:
        """Read while the client reads its answers and no answer is waited on."""
        flow = self.flow
        busy = bool(self.pipeline) and self.pipeline[0].busy
        flow.read(flow.state is OPEN and not flow.write_paused and not busy)

    def _give_up(self) -> None:
        """The connection is gone or cut: no request left in it will be answered."""
        if self.timer is not None:  # a delay under way is not waited out
            self.timer.cancel()
            self.timer = None
        for cycle in self.pipeline:
            if cycle.phase is DELAYED and cycle.decision is not None:
                state = self._state(cycle)  # a delay is the hot path's
                append, _ = record(state, cycle.decision, fault="disconnected")
                state.store.submit(append, lambda _: None)  # its failure is logged by the store
            if cycle.phase is not DONE:
                cycle.to(DONE)
        self.pipeline.clear()
        self.arriving = None

    # -- answering, in turn -----------------------------------------------------------------
    def _start(self, cycle: RequestCycle) -> None:
        """Begin answering the request at the head of the pipeline."""
        if cycle.refusal is not None:
            cycle.to(DONE)
            data = self.server.heads.answer(cycle.refusal, False, True, False)[0]
            self.flow.linger(data, self.server.drain_seconds)
            return
        request = cycle.request
        assert request is not None
        url = request.url
        if self.server.hot and (url == _HOT_PATH or url.startswith(_HOT_PREFIX)):
            if request.method in API_METHODS:
                # A fragment is not part of the query (a client sends none). Not ``b"#" in``:
                # bytes.__contains__ tries its argument as an int first, and the TypeError it
                # raises and clears cost 1.7% of a request (bench_instructions).
                query = url[len(_HOT_PREFIX) :].partition(b"#")[0]
                self._explain(cycle, request, query)
            else:  # as the app's own 405, without the trip to a worker thread
                started = time.perf_counter()
                answer = not_allowed(request.method, ", ".join(API_METHODS))
                if (state := self.server.state) is not None:  # journaled as the app does
                    query = url.partition(b"?")[2].partition(b"#")[0]
                    journal_elsewhere(
                        state, request.method, ENDPOINT_PATH, query, request.headers, answer
                    )
                self._send(cycle, answer, time.perf_counter() - started, vary=False)
        else:
            self._app(cycle, request)

    def _explain(self, cycle: RequestCycle, request: Request, query: bytes) -> None:
        state = self._state(cycle)  # the hot path is on for the mock's own app only
        if state.shared is None:  # memory answers at once: its round trips run in a loop, no
            try:  # callbacks (11%: bench_instructions)
                decider = decide(state, request.method, query, cycle.authorization, request.headers)
                decision = run(state, decider)
            except Exception as exc:  # never a 5xx for a request, however it fails
                self._send(cycle, failure_answer(exc, _FAILED), 0.0)
                return
            if decision.answer.delay:
                self._hold(cycle, decision)
                return
            append, latency = record(state, decision)
            state.store.append(append)
            self._send(cycle, decision.answer, latency)
            return
        cycle.to(DECIDING)
        self.starting = True  # a store that answers at once answers within _start()
        try:
            decider = decide(state, request.method, query, cycle.authorization, request.headers)
            self._decide(cycle, decider, None)
        finally:
            self.starting = False

    def _decide(
        self, cycle: RequestCycle, decider: Decider, reply: StoreReply | bool | Exception | None
    ) -> None:
        """Take the decision on with the store's ``reply``: its next round trip submitted,
        or its answer journaled and sent."""
        if cycle.phase is not DECIDING or not self.flow.writes:
            return  # the server stopped, or the client left, meanwhile
        state = self._state(cycle)
        try:
            if isinstance(reply, Exception):
                raise reply
            ask = next(decider) if reply is None else decider.send(reply)  # type: ignore[arg-type]
        except StopIteration as decided:
            decision: Decision = decided.value
            if decision.answer.delay:
                self._hold(cycle, decision)
            else:
                self._journal(cycle, decision, None)
            return
        except StateUnavailable as exc:  # a store's 503
            self._answered(cycle, unavailable(exc), 0.0)
            return
        except Exception as exc:  # never a 5xx for a request, however it fails
            self._answered(cycle, failure_answer(exc, _FAILED), 0.0)
            return
        state.store.submit(ask, lambda reply: self._decide(cycle, decider, reply))

    def _state(self, cycle: RequestCycle) -> MockState:
        """The state of the request's tenant (its key's; the mock's own without ``--tenants``)."""
        if cycle.state is None:
            state = self.server.state
            assert state is not None
            cycle.state = state.tenant_of(cycle.authorization)
        return cycle.state

    def _hold(self, cycle: RequestCycle, decision: Decision) -> None:
        """Wait out the answer's scripted delay on the loop (sent by ``_delayed``)."""
        cycle.to(DELAYED)
        cycle.decision = decision
        self.timer = self.server.loop.call_later(
            decision.answer.delay, self._delayed, cycle, decision
        )

    def _delayed(self, cycle: RequestCycle, decision: Decision) -> None:
        if cycle.phase is not DELAYED:
            return  # given up: the client left (journaled then)
        # The loop's timers have millisecond grain and may fire a little early: wait it out.
        left = decision.started + decision.answer.delay - time.perf_counter()
        if left > 0:
            self.timer = self.server.loop.call_later(left, self._delayed, cycle, decision)
            return
        self.timer = None
        # A client that closed its side meanwhile (reading was paused: a peek tells) is
        # journaled as disconnected; the answer is still written, in case it only half-closed.
        cycle.decision = None  # journaled here, not again if the client leaves meanwhile
        gone = self.flow.gone or peer_closed(self.flow.transport)
        self._journal(cycle, decision, "disconnected" if gone else None)

    def _journal(self, cycle: RequestCycle, decision: Decision, fault: str | None) -> None:
        """Journal the decided request, then send its answer (journaled before the client can
        ask the journal about it). A store that fails to journal it logs so; the answer, its
        steps taken, is sent all the same."""
        state = self._state(cycle)
        append, latency = record(state, decision, fault)
        answer = decision.answer
        state.store.submit(append, lambda _: self._answered(cycle, answer, latency))

    def _answered(self, cycle: RequestCycle, answer: Answer, latency: float) -> None:
        if cycle.phase not in BUSY or not self.flow.writes:
            return  # the server stopped, or the client left, meanwhile
        waited = not self.starting
        if waited:
            self._answer_ready()
        self._send(cycle, answer, latency)
        if waited:
            self.advance()

    def _send(self, cycle: RequestCycle, answer: Answer, latency: float, vary: bool = True) -> None:
        """Write an answer to ``/e``, enacting its fault; counted for the metrics with its
        ``latency`` (seconds since its request was decided, as :func:`.explain.record` gives)."""
        request = cycle.request
        assert request is not None
        cycle.to(DONE)  # answered: its bytes go to the transport in this step
        if self.server.state is not None:
            self._state(cycle).traffic.count(answer.reading, latency)
        if answer.fault == "reset":
            self._log(cycle, NO_STATUS, 0)
            self.reset()
            return
        close = not cycle.keep_alive or answer.fault == "truncated"
        data, sent = self.server.heads.answer(answer, request.method == "HEAD", close, vary)
        self.flow.transport.write(data)
        if self.server.access_log:
            self._log(cycle, status_line(answer.status), sent, latency)
        if close:
            self.close()

    def _app(self, cycle: RequestCycle, request: Request) -> None:
        server = self.server
        try:
            environ = environ_for(
                request, server.address, self.flow.transport.get_extra_info("peername")
            )
        except httptools.HttpParserInvalidURLError:
            cycle.keep_alive = False
            refusal = error_answer(400, "bad_request", "the URL is not valid")
            self._send(cycle, refusal, 0.0, vary=False)
            return
        if server.hot and is_api_call(request.method, environ["PATH_INFO"]):
            # /e spelled otherwise (absolute-form, /%65): on the loop too, or a delay holds a thread
            self._explain(cycle, request, environ["QUERY_STRING"].encode("latin-1"))
            return
        cycle.to(DECIDING)

        def answered(done: Future[Reply]) -> None:  # on the worker thread
            with contextlib.suppress(RuntimeError):  # the server stopped meanwhile
                server.loop.call_soon_threadsafe(self._app_answered, cycle, done)

        server.pool.submit(call_app, server.app, environ).add_done_callback(answered)

    def _app_answered(self, cycle: RequestCycle, done: Future[Reply]) -> None:
        if cycle.phase is not DECIDING or not self.flow.writes:
            return  # the connection is gone
        self._answer_ready()
        request = cycle.request
        assert request is not None
        cycle.to(DONE)
        try:
            reply = done.result()
        except ConnectionResetError:  # the app asked for a reset (middleware.FaultMiddleware)
            self.reset()
            return
        except Exception as exc:  # never a 5xx: the app's own handlers answered what they could
            cycle.keep_alive = False
            answer = failure_answer(exc, f"answering {request.method}")
            self.flow.transport.write(self.server.heads.answer(answer, False, True, False)[0])
            self.close()
            return
        data, close = self.server.heads.reply(reply, request.method, cycle.keep_alive)
        self.flow.transport.write(data)
        if close:
            self.close()
        self.advance()

    def _log(self, cycle: RequestCycle, status: str, size: int, took: float | None = None) -> None:
        request, state = cycle.request, self.server.state
        if not self.server.access_log or request is None or state is None:
            return
        peer = self.flow.transport.get_extra_info("peername")
        served = Served(status, size, seconds=took)
        log_request(
            state,
            request.method,
            request.url,
            request.version,
            peer,
            request.headers,
            cycle.authorization,
            served,
        )

    # -- the connection ---------------------------------------------------------------------
    def _answer_ready(self) -> None:
        """An answer waited on is ready: the idle clock starts now, not when it was asked."""
        self.last_active = self.began = self.server.loop.time()

    def close(self) -> None:
        self.flow.close()
        self._give_up()

    def finish(self) -> None:
        """The server stops: answer the requests read whole, each saying ``Connection: close``,
        read nothing further, then close; a connection with none closes now."""
        if not self.flow.writes:
            return  # lingering (its drain timer ends it) or closed
        if not self.pipeline:
            self.close()  # idle, or a request still arriving: nothing is owed
            return
        for cycle in self.pipeline:
            cycle.keep_alive = False
        self.flow.end()
        self._flow()

    def abort(self) -> None:
        """Close at once, dropping what the client never read."""
        self.flow.abort()
        self._give_up()

    def reset(self) -> None:
        """Close with a TCP reset: nothing more is sent, unsent bytes are dropped."""
        self.flow.reset()
        self._give_up()

    def sweep(self, now: float, timeout: float) -> None:
        """Close the connection if it has been idle, stuck or not reading for ``timeout``."""
        flow = self.flow
        if not flow.writes:
            return  # lingering: the drain's own timer ends it; or closed already
        if flow.write_paused:  # its answers do not drain: drop them, the kernel's copy too
            if now - flow.paused_at > timeout:
                self.reset()
            return
        if self.pipeline and self.pipeline[0].busy:
            return  # waiting on a delay or the app, not on the client
        since = self.began if self.arriving is not None else self.last_active
        if now - since > timeout:
            if flow.transport.get_write_buffer_size():
                self.abort()
            else:
                self.close()
