"""One client connection of the mock's own HTTP/1.1 server, and each request on it.

As uvicorn's ``httptools_impl.py``: httptools parses; :class:`RequestReader` is its callback
object and reads each request (within one request's bounds) into a :class:`RequestCycle` in the
connection's pipeline, or refuses it as it arrives: a target over :data:`MAX_TARGET_BYTES`
(414), headers over :data:`.limits.MAX_HEADER_BYTES` or a head still arriving past
:data:`MAX_HEAD_BYTES` (431), a body over ``--max-body`` (413), more than :data:`MAX_PIPELINED`
requests waiting (503), anything httptools cannot parse (400). :class:`Responder` answers the
requests strictly in turn: ``GET``/``HEAD /e`` on the loop from :func:`.explain.decide` (a
scripted delay with ``call_later``, a fault enacted: a TCP reset, a cut body), anything else by
the app on a worker thread. :class:`HttpConnection` (the asyncio protocol) holds them together
with :class:`.flow.FlowControl` (its flow control beside it, as uvicorn's): nothing is answered
while the client is not reading, nothing is read while an answer is waited on, and a refusal is
written, then what the client still sends is discarded for up to :data:`DRAIN_SECONDS` before
closing (RFC 9112 §9.6). The idle timeout closes a connection idle, stuck half-way through a
request, or not reading what it was sent (then reset).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
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
from ..web.accesslog import log_request, tenant_label
from ..web.limits import MAX_HEADER_BYTES
from .flow import ENDING, OPEN, FlowControl
from .wire import CONTINUE, Heads, peer_closed
from .wsgibridge import Request, call_app, environ_for

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication

    from .wsgibridge import Reply

log = logging.getLogger("mockserver.server")


# --- a request on the connection ------------------------------------------------------------


class Phase(enum.IntEnum):
    """Where a request is between its first byte and the end of its answer.

    An ``IntEnum``: a phase is hashed and compared at every move, on the hot path.
    """

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
    Phase.READING: frozenset({Phase.QUEUED, Phase.DONE}),
    Phase.QUEUED: frozenset({Phase.DECIDING, Phase.DELAYED, Phase.DONE}),
    Phase.DECIDING: frozenset({Phase.DELAYED, Phase.DONE}),
    Phase.DELAYED: frozenset({Phase.DONE}),
    Phase.DONE: frozenset(),  # answered once: a second answer is refused
}
BUSY: Final = frozenset({Phase.DECIDING, Phase.DELAYED})
"""Phases in which the connection waits on something other than its client."""


class PhaseError(RuntimeError):
    """A move between phases that the table does not allow: a bug in the server."""


class RequestCycle:
    """One request: what was read of it, its phase, and how its answer ends the connection.

    While it is :attr:`Phase.READING`, the parser's callbacks fill :attr:`url`, :attr:`headers`
    and :attr:`body` (one growing buffer: a body sent in 2-byte chunks costs its size, not an
    object per chunk). ``refusal`` is set for a request the server answers without reading it
    whole (413, 431...): its answer closes the connection.
    """

    __slots__ = (
        "asks_continue",
        "authorization",
        "body",
        "continued",
        "decision",
        "declared",
        "expect_continue",
        "headers",
        "keep_alive",
        "phase",
        "refusal",
        "request",
        "size",
        "url",
        "version",
    )

    def __init__(self, refusal: Answer | None = None) -> None:
        self.phase = READING if refusal is None else QUEUED
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.size = 0  # header bytes so far
        self.body = bytearray()
        self.version = ""  # "1.1", "1.0", as its head said
        # Noted from the head as it arrives (:meth:`note`), so nothing loops over the headers:
        self.authorization: str | None = None  # every Authorization header, joined by ","
        self.declared = 0  # the largest Content-Length declared
        self.asks_continue = False  # an Expect: 100-continue header was among them
        self.expect_continue = False  # ... in its head (not its trailers): it gets a 100
        self.continued = False  # its 100 Continue was written
        self.keep_alive = refusal is None
        self.refusal = refusal
        self.request: Request | None = None
        self.decision: Decision | None = None  # while DELAYED: journaled however it ends

    def to(self, phase: Phase) -> None:
        """Move to ``phase``; a move the table does not list raises :class:`PhaseError`."""
        if phase not in _MOVES[self.phase]:
            raise PhaseError(f"a request cannot go from {self.phase.name} to {phase.name}")
        self.phase = phase

    def note(self, name: bytes, value: bytes) -> None:
        """Note a header that decides how the request is read or answered (``name`` as sent)."""
        lowered = name.lower()
        if lowered == b"authorization":
            text, before = value.decode("latin-1"), self.authorization
            self.authorization = text if before is None else f"{before},{text}"
        elif lowered == b"content-length":
            self.declared = max(self.declared, _length(value))
        elif lowered == b"expect" and value.strip().lower() == b"100-continue":
            self.asks_continue = True

    def complete(self, method: str, version: str, keep_alive: bool) -> Request:
        """The request is read whole: it waits its turn (:attr:`Phase.QUEUED`)."""
        self.to(QUEUED)
        self.keep_alive = keep_alive
        body = self.body
        if body:
            self.body = bytearray()  # the request holds the bytes now: keep them once
        whole = bytes(body) if body else b""
        self.request = Request(method, self.url, self.headers, whole, version)
        return self.request

    @property
    def busy(self) -> bool:
        return self.phase in BUSY


def _length(value: bytes) -> int:
    """A Content-Length value as a number (httptools has checked that it is digits)."""
    try:
        return int(value)
    except ValueError:
        return 0


# --- reading requests ------------------------------------------------------------------

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
_METHODS: Final = {m.encode(): m for m in ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS")}
"""The usual methods' names, decoded once."""


class _Refused(Exception):
    """Raised in a parser callback to stop parsing: nothing more of this connection is read."""


class RequestReader:
    """Feed httptools and build each request's cycle, within the bounds of one request."""

    __slots__ = ("_max_body", "_now", "_room", "_sink", "began", "cycle", "parser")

    def __init__(self, sink: HttpConnection, max_body: int) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.cycle: RequestCycle | None = None  # the request still arriving
        self.began = 0.0  # when it began (loop time)
        self._sink = sink
        self._max_body = max_body
        self._room = 0  # bytes it may still take (MAX_HEAD_BYTES, then its body's share)
        self._now = 0.0

    def feed(self, data: bytes, now: float) -> None:
        """Parse what the client sent (at loop time ``now``)."""
        self._now = now
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

    def _refuse(self, status: int, code: str, message: str) -> None:
        self.cycle = None
        self._sink.refuse(status, code, message)

    def _refuse_raise(self, status: int, code: str, message: str) -> None:
        self._refuse(status, code, message)
        raise _Refused

    # -- httptools callbacks ----------------------------------------------------------------
    def on_message_begin(self) -> None:
        if not self._sink.accepts():  # the connection ends with the answers owed
            raise _Refused
        self.cycle = RequestCycle()
        self._room, self.began = MAX_HEAD_BYTES, self._now

    def on_url(self, url: bytes) -> None:
        cycle = self.cycle
        assert cycle is not None  # httptools calls back within a message only
        cycle.url += url
        if len(cycle.url) > MAX_TARGET_BYTES:
            self._refuse_raise(
                414, "uri_too_long", f"the request target is longer than {MAX_TARGET_BYTES} bytes"
            )

    def on_header(self, name: bytes, value: bytes) -> None:
        cycle = self.cycle
        assert cycle is not None  # httptools calls back within a message only
        cycle.size += len(name) + len(value)
        if cycle.size > MAX_HEADER_BYTES:
            self._refuse_raise(
                431,
                "request_header_fields_too_large",
                f"the request headers hold more than {MAX_HEADER_BYTES} bytes; "
                f"the mock accepts at most {MAX_HEADER_BYTES}",
            )
        cycle.headers.append((name, value))
        cycle.note(name, value)

    def on_headers_complete(self) -> None:
        cycle = self.cycle
        assert cycle is not None  # httptools calls back within a message only
        cycle.version = version = self.parser.get_http_version()
        if version not in _VERSIONS:
            self._refuse_raise(
                400, "bad_request", f"HTTP/{version[:8]} is not served here; send HTTP/1.1"
            )
        max_body = self._max_body
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
            self._sink.expects_continue()

    def on_body(self, body: bytes) -> None:
        cycle = self.cycle
        assert cycle is not None  # httptools calls back within a message only
        if len(cycle.body) + len(body) > self._max_body:
            self._refuse_raise(
                413,
                "request_entity_too_large",
                f"the request body is over {self._max_body} bytes (--max-body)",
            )
        cycle.body += body

    def on_message_complete(self) -> None:
        cycle = self.cycle
        assert cycle is not None  # httptools calls back within a message only
        parser = self.parser
        if self._sink.waiting() >= MAX_PIPELINED:
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
        self._sink.queued(cycle)
        if not keep_alive:
            raise _Refused  # nothing after a closing request is read


# --- answering them in turn -------------------------------------------------------------

log = logging.getLogger("mockserver.server")

_HOT_PREFIX: Final = ENDPOINT_PATH.encode() + b"?"
_HOT_PATH: Final = ENDPOINT_PATH.encode()


class Responder:
    """Answers one connection's requests, one at a time, in the order it starts them."""

    __slots__ = ("_starting", "_timer", "server", "traffic", "turn")

    def __init__(self, server: Host, turn: HttpConnection) -> None:
        self.server = server
        self.turn = turn
        self.traffic = server.state.traffic if server.state is not None else None
        self._timer: asyncio.TimerHandle | None = None  # the scripted delay waited out
        self._starting = False

    def cancel(self) -> None:
        """The connection gave up: a delay under way is not waited out."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def start(self, cycle: RequestCycle) -> None:
        """Begin answering the request at the head of the pipeline."""
        if cycle.refusal is not None:
            cycle.to(DONE)
            data = self.server.heads.answer(cycle.refusal, False, True, False)[0]
            self.turn.flow.linger(data, self.server.drain_seconds)
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
                self.send(cycle, answer, time.perf_counter() - started, vary=False)
        else:
            self._app(cycle, request)

    # -- answering /e on the loop -----------------------------------------------------------
    def _explain(self, cycle: RequestCycle, request: Request, query: bytes) -> None:
        state = self.server.state
        assert state is not None  # the hot path is on for the mock's own app only
        state = state.tenant_of(cycle.authorization)
        if state.shared is None:  # memory answers at once: its round trips run in a loop, no
            self._explain_now(state, cycle, request, query)  # callbacks (11%: bench_instructions)
            return
        cycle.to(DECIDING)
        self._starting = True  # a store that answers at once (memory) answers within start()
        try:
            decider = decide(state, request.method, query, cycle.authorization, request.headers)
            self._decide(cycle, decider, None)
        finally:
            self._starting = False

    def _explain_now(
        self, state: MockState, cycle: RequestCycle, request: Request, query: bytes
    ) -> None:
        try:
            decider = decide(state, request.method, query, cycle.authorization, request.headers)
            decision = run(state, decider)
        except Exception as exc:  # never a 5xx for a request, however it fails
            self.send(cycle, _failure(exc), 0.0)
            return
        if decision.answer.delay:
            self._hold(cycle, decision)
            return
        append, latency = record(state, decision)
        state.store.append(append)
        self.send(cycle, decision.answer, latency)

    def _decide(
        self, cycle: RequestCycle, decider: Decider, reply: StoreReply | bool | Exception | None
    ) -> None:
        """Take the decision on with the store's ``reply``: its next round trip submitted,
        or its answer journaled and sent."""
        if cycle.phase is not DECIDING or not self.turn.flow.writes:
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
        except Exception as exc:  # a store's 503; never a 5xx for a request, however it fails
            answer = unavailable(exc) if isinstance(exc, StateUnavailable) else _failure(exc)
            self._answered(cycle, answer, 0.0)
            return
        state.store.submit(ask, lambda reply: self._decide(cycle, decider, reply))

    def _state(self, cycle: RequestCycle) -> MockState:
        """The state of the request's tenant (its key's; the mock's own without ``--tenants``)."""
        state = self.server.state
        assert state is not None
        return state.tenant_of(cycle.authorization)

    def _hold(self, cycle: RequestCycle, decision: Decision) -> None:
        """Wait out the answer's scripted delay on the loop (sent by ``_delayed``)."""
        cycle.to(DELAYED)
        cycle.decision = decision
        self._timer = self.server.loop.call_later(
            decision.answer.delay, self._delayed, cycle, decision
        )

    def _delayed(self, cycle: RequestCycle, decision: Decision) -> None:
        if cycle.phase is not DELAYED:
            return  # given up: the client left (journaled then)
        # The loop's timers have millisecond grain and may fire a little early: wait it out.
        left = decision.started + decision.answer.delay - time.perf_counter()
        if left > 0:
            self._timer = self.server.loop.call_later(left, self._delayed, cycle, decision)
            return
        self._timer = None
        # A client that closed its side meanwhile (reading was paused: a peek tells) is
        # journaled as disconnected; the answer is still written, in case it only half-closed.
        cycle.decision = None  # journaled here, not again if the client leaves meanwhile
        self._journal(cycle, decision, "disconnected" if self._client_gone() else None)

    def _journal(self, cycle: RequestCycle, decision: Decision, fault: str | None) -> None:
        """Journal the decided request, then send its answer (journaled before the client can
        ask the journal about it). A store that fails to journal it logs so; the answer, its
        steps taken, is sent all the same."""
        state = self._state(cycle)
        append, latency = record(state, decision, fault)
        answer = decision.answer
        state.store.submit(append, lambda _: self._answered(cycle, answer, latency))

    def _answered(self, cycle: RequestCycle, answer: Answer, latency: float) -> None:
        if cycle.phase not in (DECIDING, DELAYED) or not self.turn.flow.writes:
            return  # the server stopped, or the client left, meanwhile
        waited = not self._starting
        if waited:
            self.turn.answer_ready()
        self.send(cycle, answer, latency)
        if waited:
            self.turn.advance()

    def send(self, cycle: RequestCycle, answer: Answer, latency: float, vary: bool = True) -> None:
        """Write an answer to ``/e``, enacting its fault; counted for the metrics with its
        ``latency`` (seconds since its request was decided, as :func:`.explain.record` gives)."""
        request = cycle.request
        assert request is not None
        cycle.to(DONE)  # answered: its bytes go to the transport in this step
        if self.traffic is not None:
            self._state(cycle).traffic.count(answer.reading, latency)
        if answer.fault == "reset":
            self._log(cycle, request, NO_STATUS, 0)
            self.turn.reset()
            return
        close = not cycle.keep_alive or answer.fault == "truncated"
        data, sent = self.server.heads.answer(answer, request.method == "HEAD", close, vary)
        self.turn.flow.transport.write(data)
        if self.server.access_log:
            self._log(cycle, request, status_line(answer.status), sent, latency)
        if close:
            self.turn.close()

    # -- answering through the app ----------------------------------------------------------
    def _app(self, cycle: RequestCycle, request: Request) -> None:
        server = self.server
        try:
            environ = environ_for(
                request, server.address, self.turn.flow.transport.get_extra_info("peername")
            )
        except httptools.HttpParserInvalidURLError:
            cycle.keep_alive = False
            refusal = error_answer(400, "bad_request", "the URL is not valid")
            self.send(cycle, refusal, 0.0, vary=False)
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
        if cycle.phase is not DECIDING or not self.turn.flow.writes:
            return  # the connection is gone
        self.turn.answer_ready()
        request = cycle.request
        assert request is not None
        try:
            reply = done.result()
        except ConnectionResetError:  # the app asked for a reset (faults.FaultMiddleware)
            cycle.to(DONE)
            self.turn.reset()
            return
        except Exception as exc:  # never a 5xx: the app's own handlers answered what they could
            cycle.to(DONE)
            cycle.keep_alive = False
            answer = failure_answer(exc, f"answering {request.method}")
            self.turn.flow.transport.write(self.server.heads.answer(answer, False, True, False)[0])
            self.turn.close()
            return
        cycle.to(DONE)
        data, close = self.server.heads.reply(reply, request.method, cycle.keep_alive)
        self.turn.flow.transport.write(data)
        if close:
            self.turn.close()
        self.turn.advance()

    def _client_gone(self) -> bool:
        flow = self.turn.flow
        return flow.gone or peer_closed(flow.transport)

    def _log(
        self,
        cycle: RequestCycle,
        request: Request,
        status: str,
        size: int,
        took: float | None = None,
    ) -> None:
        if not self.server.access_log:
            return
        peer = self.turn.flow.transport.get_extra_info("peername")
        state = self.server.state
        is_key = state.any_key if state is not None else (lambda _: False)
        user = "-" if state is None else tenant_label(state, cycle.authorization, None)
        trusted = () if state is None else state.settings.forwarded_allow_ips
        forwarded = None
        if trusted:  # the last X-Forwarded-For, as a WSGI environ would hold it
            sent = [v for k, v in request.headers if k.lower() == b"x-forwarded-for"]
            forwarded = b",".join(sent).decode("latin-1") if sent else None
        log_request(
            request.method,
            request.url,
            request.version,
            peer,
            status,
            size,
            is_key,
            user,
            took,
            trusted,
            forwarded,
        )


def _failure(exc: Exception) -> Answer:
    """The answer to a request to ``/e`` that could not be decided (model/answer.py decides)."""
    return failure_answer(exc, f"answering GET {ENDPOINT_PATH}")


# --- the connection -----------------------------------------------------------------------

IDLE_TIMEOUT: Final = 30.0
"""Seconds a connection may sit idle, stuck half-way through a request, or not read its
answers, before it closes (aborted, if its answers are still unsent)."""
DRAIN_SECONDS: Final = 5.0
"""After a refusal, how long what the client still sends is read and discarded (any size)."""


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


def _overloaded(code: str, message: str) -> Answer:
    return error_answer(503, code, message, headers=[("Retry-After", "1")])


class HttpConnection(asyncio.Protocol):
    """One client connection: read requests, answer them in order, within its bounds."""

    flow: FlowControl  # from connection_made on

    def __init__(self, server: Host) -> None:
        self.server = server
        self.reader = RequestReader(self, server.max_body)
        self.responder = Responder(server, self)
        self.transport: asyncio.Transport | None = None
        self.pipeline: deque[RequestCycle] = deque()  # read whole; the first is being answered
        self.counted = False  # holds one of the server's --max-connections
        self.last_active = server.loop.time()

    # -- the transport's side ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.Transport", transport)  # uvloop's is not a subclass
        server = self.server
        self.flow = FlowControl(self.transport, server.loop)
        server.connections.add(self)
        if server.open >= server.max_connections:
            answer = _overloaded(
                "too_many_connections",
                f"the mock holds {server.max_connections} connections already "
                "(--max-connections); retry, or reuse a connection",
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
        self.transport = None

    def eof_received(self) -> bool:
        """The client sent all it will: answer what it asked, then close."""
        self.flow.end()
        return not (self.flow.lingering or not self.pipeline)  # False: the transport closes itself

    def data_received(self, data: bytes) -> None:
        self.last_active = now = self.server.loop.time()
        if self.flow.state is not OPEN:  # lingering: discarded, as ending: no request is read
            return
        self.reader.feed(data, now)

    def pause_writing(self) -> None:  # the client is not reading: stop answering and reading
        self.flow.pause_writing()
        self._flow()

    def resume_writing(self) -> None:
        self.flow.resume_writing()
        self.last_active = self.server.loop.time()
        self.advance()

    # -- what the reader hands over (RequestReader) --------------------------------------------
    def accepts(self) -> bool:
        return self.flow.state is OPEN

    def waiting(self) -> int:
        return len(self.pipeline)

    def queued(self, cycle: RequestCycle) -> None:
        """A request read whole: answered now if its turn has come, else in its turn."""
        if not cycle.keep_alive:
            self.flow.end()
        pipeline = self.pipeline
        if pipeline or not self.flow.answers:
            pipeline.append(cycle)  # answered in its turn
            if len(pipeline) == 1:
                self.advance()
        else:  # its turn has come: the common case, answered here without the queue
            self.responder.start(cycle)
            if cycle.phase is not DONE:  # waiting on a delay or the app
                pipeline.append(cycle)
                self._flow()

    def refuse(self, status: int, code: str, message: str) -> None:
        """Answer a request the server will not read (after those queued before it), linger."""
        self.flow.end()
        self.pipeline.append(RequestCycle(refusal=error_answer(status, code, message)))
        if len(self.pipeline) == 1:
            self.advance()
        else:
            self._flow()

    def expects_continue(self) -> None:
        self._continue()

    # -- the pipeline -----------------------------------------------------------------------
    def advance(self) -> None:
        """Answer the pipeline in order until one request waits (a delay, a worker thread) or
        the client stops reading; then read on, or close if the connection is ending."""
        pipeline = self.pipeline
        flow = self.flow
        while pipeline and flow.answers:
            cycle = pipeline[0]
            if cycle.phase is QUEUED:
                self.responder.start(cycle)
            if cycle.phase is not DONE:
                break
            if pipeline:  # (a cut or a reset emptied it)
                pipeline.popleft()
        if not pipeline and flow.writes:
            if flow.state is ENDING:
                self.close()
                return
            arriving = self.reader.cycle
            if arriving is not None and arriving.expect_continue:
                self._continue()
        self._flow()

    def _continue(self) -> None:
        """Write the 100 Continue of the request still arriving, once its turn has come."""
        cycle = self.reader.cycle
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
        self.responder.cancel()
        for cycle in self.pipeline:
            if cycle.phase is DELAYED and cycle.decision is not None:
                assert self.server.state is not None  # a delay is the hot path's
                state = self.server.state
                append, _ = record(state, cycle.decision, fault="disconnected")
                state.store.submit(append, _ignored)
            if cycle.phase is not DONE:
                cycle.to(DONE)
        self.pipeline.clear()
        self.reader.cycle = None

    # -- the connection ---------------------------------------------------------------------
    def answer_ready(self) -> None:
        """An answer waited on is ready: the idle clock starts now, not when it was asked."""
        self.last_active = self.reader.began = self.server.loop.time()

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
        reader = self.reader
        since = reader.began if reader.cycle is not None else self.last_active
        if now - since > timeout:
            if flow.transport.get_write_buffer_size():
                self.abort()
            else:
                self.close()


def _ignored(_: object) -> None:
    """A journal's reply nobody waits on (its failure is logged by the store)."""
