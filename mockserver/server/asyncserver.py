"""The mock's own HTTP/1.1 server: one asyncio loop (uvloop where installed), httptools parsing.

As uvicorn's ``httptools_impl.py``: :class:`HttpConnection` is the asyncio protocol and
httptools' callback object. It reads each request within its bounds (the constants below) into
a :class:`RequestCycle` of its pipeline, or refuses it as it arrives, and answers strictly in
turn: ``GET``/``HEAD /e`` on the loop from :func:`.explain.decide`, anything else by the app on
a worker thread, called with the PEP 3333 environ built here. Its flow control is :mod:`.flow`.
:class:`AsyncServer` holds the listener, ``--max-connections``, the idle sweep, and stopping, at
once (``stop()`` from any thread, SIGINT) or gracefully (SIGTERM).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import io
import logging
import os
import signal
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, cast
from urllib.parse import unquote_to_bytes

import httptools

from verdict_contract.core.spec import API_METHODS, ENDPOINT_PATH, is_api_call

from ..explain import Decider, Decision, decide, record, run, wrong_method
from ..model.answer import NO_STATUS, Answer, error_answer, failure_answer, status_line
from ..settings import Settings
from ..state import MockState
from ..store.primitives import Ask
from ..web.accesslog import LoggedAnswer, log_line, tenant_label
from ..web.accesslog import log as access_log
from ..web.app import parts_of
from ..web.metrics import alive
from ..web.middleware import MAX_HEADER_BYTES
from ..web.proxy import ValidatingProxy
from .flow import ENDING, LINGERING, OPEN, FlowControl
from .wire import CONTINUE, Heads, Reply, bound_socket, peer_closed
from .workers import parent_pid

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication, WSGIEnvironment

log = logging.getLogger("mockserver.server")


class Phase(enum.IntEnum):
    """Where a request is between its first byte and the end of its answer (an ``IntEnum``:
    a phase is hashed and compared at every move, on the hot path)."""

    READING = 1  # its head or body is still arriving
    QUEUED = 2  # read whole (or refused): waits for the answers before it to be written
    DECIDING = 3  # the app computes its answer on a worker thread, or a shared state decides it
    DELAYED = 4  # its answer is decided; a scripted delay is waited out on the loop
    DONE = 5  # answered (its bytes handed to the transport), or given up (the client left)


# As module constants: Phase.X costs 50 ns on 3.11, a dozen a request (wrk, GET /e: 38k/s, 44k).
READING, QUEUED, DECIDING, DELAYED, DONE = Phase

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
    """One request: what was read of it (header names and values as sent), its phase, and how
    its answer ends the connection.

    ``body`` is one growing buffer (a body sent in 2-byte chunks costs its size, not an object
    per chunk). ``refusal`` is set for a request answered without being read whole (413,
    431...): it is queued at once, and its answer closes the connection.
    """

    refusal: Answer | None = None
    phase: Phase = READING
    method: str = ""  # set once it is read whole (:meth:`complete`)
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
    decision: Decision | None = None  # while DELAYED: journaled however it ends
    state: MockState | None = None  # its tenant's state, found once (HttpConnection._state)
    asked: float = 0.0  # perf_counter() when a shared store was first asked (a 503's latency)

    def to(self, phase: Phase) -> None:
        """Move to ``phase``; a move the table does not list raises :class:`PhaseError`."""
        if phase not in _MOVES[self.phase]:
            raise PhaseError(f"a request cannot go from {self.phase.name} to {phase.name}")
        self.phase = phase

    def complete(self, method: str, keep_alive: bool) -> None:
        """The request is read whole: it waits its turn (:attr:`Phase.QUEUED`)."""
        self.to(QUEUED)
        self.method, self.keep_alive = method, keep_alive


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
_LIVEZ: Final = b"/_mock/livez"
_FAILED: Final = f"answering GET {ENDPOINT_PATH}"
IDLE_TIMEOUT: Final = 30.0
"""Seconds a connection may sit idle, stuck half-way through a request, or not read its
answers, before it closes (aborted, if its answers are still unsent)."""
MAKE_ROOM_AFTER: Final = 2.0  # seconds idle or arriving: then a place a newcomer may take
ROOM_LOOKED_FOR_EVERY: Final = 0.1  # seconds: at most, while none is found (a scan costs)
MAX_LINGERING: Final = 64  # connections draining after a refusal at once
DRAIN_SECONDS: Final = 5.0
"""After a refusal, how long what the client still sends is read and discarded (any size)."""


class _Refused(Exception):
    """Raised in a parser callback to stop parsing: nothing more of this connection is read."""


def environ_for(
    request: RequestCycle, server: tuple[str, int], peer: tuple[str, int] | None
) -> WSGIEnvironment:
    """The WSGI environ of a request read whole (raises ``httptools.HttpParserInvalidURLError``)."""
    url = httptools.parse_url(request.url)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": request.method,
        "SCRIPT_NAME": "",
        # PEP 3333: the path percent-decoded, its bytes as latin-1 text; the query as sent.
        "PATH_INFO": unquote_to_bytes(url.path or b"/").decode("latin-1"),
        "QUERY_STRING": (url.query or b"").decode("latin-1"),
        "SERVER_NAME": server[0],
        "SERVER_PORT": str(server[1]),
        "SERVER_PROTOCOL": f"HTTP/{request.version}",
        "REMOTE_ADDR": peer[0] if peer else "",
        "REMOTE_PORT": str(peer[1]) if peer else "",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(request.body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "wsgi.input_terminated": True,  # the body is whole: read wsgi.input to its end
    }
    for raw_name, raw_value in request.headers:
        name = raw_name.decode("latin-1")
        if "_" in name:  # X_Forwarded_For would pass for X-Forwarded-For: dropped, as nginx
            continue
        key = name.upper().replace("-", "_")
        if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            key = f"HTTP_{key}"
        value = raw_value.decode("latin-1")
        environ[key] = f"{environ[key]},{value}" if key in environ else value
    if environ.pop("HTTP_TRANSFER_ENCODING", None) is not None or request.body:
        environ["CONTENT_LENGTH"] = str(len(request.body))  # a chunked body arrives whole
    return environ


def call_app(app: WSGIApplication, environ: WSGIEnvironment) -> Reply:
    """Run a WSGI app to the end of its answer."""
    started: list[Any] = []
    chunks: list[bytes] = []

    def start_response(
        status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], object]:
        # PEP 3333: nothing is sent before the app returns, so a second call with exc_info
        # (an error page after all) replaces the headers; a second call without it is a bug.
        if started and exc_info is None:
            raise AssertionError("start_response was called twice without exc_info")
        started[:] = [status, headers]
        return chunks.append

    result: Iterable[bytes] = app(environ, start_response)
    try:
        chunks.extend(result)
    finally:
        if (close := getattr(result, "close", None)) is not None:
            close()
    if not started:
        raise RuntimeError("the WSGI app returned without calling start_response")
    return Reply(started[0], list(started[1]), b"".join(chunks))


class HttpConnection(asyncio.Protocol):
    """One client connection: read its requests within their bounds, answer them in order."""

    flow: FlowControl  # from connection_made on

    def __init__(self, server: AsyncServer) -> None:
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
        if server.open >= server.max_connections and not self._make_room():
            full = f"{server.max_connections} connections are open, none idle (--max-connections)"
            retry = [("Retry-After", "1")]
            self._linger(error_answer(503, "too_many_connections", f"{full}; retry", headers=retry))
            return
        server.open += 1
        self.counted = True

    def _linger(self, refusal: Answer) -> None:
        """Write a refusal, then drain what the client sends: MAX_LINGERING at once, oldest cut."""
        lingering = self.server.lingering
        if len(lingering) >= MAX_LINGERING:  # the one that has had longest to read its answer
            lingering.popitem(last=False)[0].abort()
        lingering[self] = None
        self.flow.linger(self.server.heads.closing(refusal), self.server.drain_seconds)

    def _make_room(self) -> bool:
        """At ``--max-connections``, a newcomer takes the place of the one idle, or still sending
        its request, longest (MAKE_ROOM_AFTER at least): closed, or 408. Whether one gave way."""
        server, now = self.server, self.server.loop.time()
        if now < server.no_room_until:  # none was found a moment ago: not looked for again yet
            return False
        victim = max(server.connections, key=lambda connection: connection._unused(now))
        if victim._unused(now) < MAKE_ROOM_AFTER:
            if now - server.no_room_until > 60:  # the bound reached after a quiet minute: said
                log.warning("--max-connections %d reached, none idle: 503", server.max_connections)
            server.no_room_until = now + ROOM_LOOKED_FOR_EVERY
            return False
        victim.counted, server.open = False, server.open - 1
        if victim.arriving is None:  # its answers given to the transport: dropped if unread
            victim.abort() if victim.flow.transport.get_write_buffer_size() else victim.close()
        else:
            reason = f"the request took over {MAKE_ROOM_AFTER:g}s to arrive (--max-connections)"
            victim._refuse(408, "request_timeout", reason)
        return True

    def _unused(self, now: float) -> float:
        """Seconds it has held its place unused, idle or still sending its request (or -1)."""
        if self.pipeline or not self.counted or self.flow.state is not OPEN:
            return -1.0
        return now - (self.last_active if self.arriving is None else self.began)

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        if self.counted:
            self.server.open -= 1
            self.counted = False
        self.server.lingering.pop(self, None)
        self.flow.lost()
        self._give_up()

    def eof_received(self) -> bool:
        """The client sent all it will: answer what it asked, then close."""
        self.flow.end()
        return self.flow.state is not LINGERING and bool(self.pipeline)  # False: it closes itself

    def data_received(self, data: bytes) -> None:
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
                    too_many = f"the request's head or trailers are over {MAX_HEAD_BYTES} bytes"
                    self._refuse(431, "request_header_fields_too_large", too_many)

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
        self.room = MAX_HEAD_BYTES  # and active again: blank lines before a request are idle
        self.last_active = self.began = self.server.loop.time()

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
            too_many = f"the headers are over {MAX_HEADER_BYTES} bytes"
            raise self._refuse(431, "request_header_fields_too_large", too_many)
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
            too_big = f"the request body is {cycle.declared} bytes, over {max_body} (--max-body)"
            raise self._refuse(413, "request_entity_too_large", too_big)
        if cycle.asks_continue:
            cycle.expect_continue = True
            self._continue()

    def on_body(self, body: bytes) -> None:
        cycle = self.arriving
        assert cycle is not None
        if len(cycle.body) + len(body) > self.server.max_body:
            too_big = f"the request body is over {self.server.max_body} bytes (--max-body)"
            raise self._refuse(413, "request_entity_too_large", too_big)
        cycle.body += body

    def on_message_complete(self) -> None:
        cycle = self.arriving
        assert cycle is not None
        parser = self.parser
        if len(self.pipeline) >= MAX_PIPELINED:
            waiting = f"{MAX_PIPELINED} requests here wait for their answers: read them first"
            raise self._refuse(503, "too_many_pipelined_requests", waiting)
        version = cycle.version
        keep_alive = version == "1.1" and parser.should_keep_alive() and not parser.should_upgrade()
        self.arriving = None
        cycle.complete(parser.get_method().decode("latin-1"), keep_alive)
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
        refused = RequestCycle(error_answer(status, code, message), QUEUED, keep_alive=False)
        self.pipeline.append(refused)
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
            if self.arriving is not None and self.arriving.expect_continue:
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
        busy = bool(self.pipeline) and self.pipeline[0].phase in BUSY
        flow.read(flow.state is OPEN and not flow.write_paused and not busy)

    def _give_up(self) -> None:
        """The connection is gone or cut: no request left in it will be answered."""
        if self.timer is not None:  # a delay under way is not waited out
            self.timer.cancel()
            self.timer = None
        for cycle in self.pipeline:
            if cycle.phase is DELAYED and cycle.decision is not None:
                state = self._state(cycle)  # a delay is the hot path's
                entry, _ = record(state, cycle.decision, fault="disconnected")
                state.store.submit(entry, lambda _: None)  # its failure is logged by the store
            if cycle.phase is not DONE:
                cycle.to(DONE)
        self.pipeline.clear()
        self.arriving = None

    # -- answering, in turn -----------------------------------------------------------------
    def _start(self, cycle: RequestCycle) -> None:
        """Begin answering the request at the head of the pipeline."""
        if cycle.refusal is not None:
            cycle.to(DONE)
            self._linger(cycle.refusal)
            return
        url = cycle.url
        if self.server.hot and (url == _HOT_PATH or url.startswith(_HOT_PREFIX)):
            if cycle.method in API_METHODS:
                # a fragment is not part of the query (a client sends none)
                query = url[len(_HOT_PREFIX) :].partition(b"#")[0]
                self._explain(cycle, query)
            else:  # here, not in the app: its URL parser takes 64 KiB at most
                started, state = time.perf_counter(), self._state(cycle)
                query = url.partition(b"?")[2].partition(b"#")[0]
                answer = wrong_method(state, cycle.method, query, cycle.headers)
                self._send(cycle, answer, time.perf_counter() - started, vary=False)
        elif self.server.hot and url == _LIVEZ and cycle.method in API_METHODS:
            # on the loop: alive while every thread waits (on a store that is down)
            self._send(cycle, alive(), 0.0, vary=False, counted=False)
        else:
            self._app(cycle)

    def _explain(self, cycle: RequestCycle, query: bytes) -> None:
        state = self._state(cycle)  # the hot path is on for the mock's own app only
        if state.shared is None:  # memory answers at once: its round trips run in a loop, no
            try:  # callbacks (11%: bench_instructions)
                decider = decide(state, cycle.method, query, cycle.authorization, cycle.headers)
                decision = run(state, decider)
            except Exception as exc:  # never a 5xx for a request, however it fails
                self._send(cycle, failure_answer(exc, _FAILED), 0.0)
                return
            if decision.answer.delay:
                self._hold(cycle, decision)
                return
            entry, latency = record(state, decision)
            state.store.append(entry)
            self._send(cycle, decision.answer, latency)
            return
        cycle.to(DECIDING)
        cycle.asked = time.perf_counter()
        self.starting = True  # a store that answers at once answers within _start()
        try:
            decider = decide(state, cycle.method, query, cycle.authorization, cycle.headers)
            self._decide(cycle, decider, None)
        finally:
            self.starting = False

    def _decide(
        self, cycle: RequestCycle, decider: Decider, answered: Ask | bool | Exception | None
    ) -> None:
        """Take the decision on once the store ``answered`` its round trip (None: none yet):
        its next round trip submitted, or its answer journaled and sent."""
        if cycle.phase is not DECIDING or not self.flow.writes:
            return  # the server stopped, or the client left, meanwhile
        state = self._state(cycle)
        try:  # a failed round trip told to the decider, which may decide all the same
            ask = decider.throw(answered) if isinstance(answered, Exception) else next(decider)
        except StopIteration as decided:
            decision: Decision = decided.value
            if decision.answer.delay:
                self._hold(cycle, decision)
            else:
                self._journal(cycle, decision, None)
            return
        except Exception as exc:  # a store's 503 (StateUnavailable); never a 5xx, however it fails
            self._answered(cycle, failure_answer(exc, _FAILED), time.perf_counter() - cycle.asked)
            return
        state.store.submit(ask, lambda answered: self._decide(cycle, decider, answered))

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
        entry, latency = record(state, decision, fault)
        state.store.submit(entry, lambda _: self._answered(cycle, decision.answer, latency))

    def _answered(self, cycle: RequestCycle, answer: Answer, latency: float) -> None:
        if cycle.phase not in BUSY or not self.flow.writes:
            return  # the server stopped, or the client left, meanwhile
        waited = not self.starting
        if waited:
            self._answer_ready()
        self._send(cycle, answer, latency)
        if waited:
            self.advance()

    def _send(
        self, cycle: RequestCycle, answer: Answer, latency: float, vary: bool = True,
        counted: bool = True,
    ) -> None:  # fmt: skip
        """Write an answer, enacting its fault; one to ``/e`` counted for the metrics with its
        ``latency`` (seconds since its request was decided, as :func:`.explain.record` gives)."""
        cycle.to(DONE)  # answered: its bytes go to the transport in this step
        if counted and self.server.state is not None:
            self._state(cycle).traffic.count(answer.result, latency)
        if answer.fault == "reset":
            self._log(cycle, NO_STATUS, 0)
            self.reset()
            return
        close = not cycle.keep_alive or answer.fault == "truncated"
        data, sent = self.server.heads.answer(answer, cycle.method == "HEAD", close, vary)
        self.flow.transport.write(data)
        if self.server.access_log:
            self._log(cycle, status_line(answer.status), sent, latency)
        if close:
            self.close()

    def _app(self, cycle: RequestCycle) -> None:
        server = self.server
        try:
            environ = environ_for(
                cycle, server.address, self.flow.transport.get_extra_info("peername")
            )
        except httptools.HttpParserInvalidURLError:
            cycle.keep_alive = False
            refusal = error_answer(400, "bad_request", "the URL is not valid")
            self._send(cycle, refusal, 0.0, vary=False)
            return
        if server.hot and is_api_call(cycle.method, environ["PATH_INFO"]):
            # /e spelled otherwise (absolute-form, /%65): on the loop too, or a delay holds a thread
            self._explain(cycle, environ["QUERY_STRING"].encode("latin-1"))
            return
        pool = server.upstream_pool if environ["PATH_INFO"] == ENDPOINT_PATH else server.pool
        proxied = pool is not server.pool
        if proxied and server.upstream_calls >= server.max_upstream_calls:  # a bound: refused
            busy = f"{server.upstream_calls} calls wait on the upstream already; retry later"
            answer = error_answer(503, "upstream_busy", busy, headers=[("Retry-After", "1")])
            self._send(cycle, answer, 0.0, vary=False)
            return
        server.upstream_calls += proxied
        cycle.to(DECIDING)

        def answered(done: Future[Reply]) -> None:  # on the worker thread
            with contextlib.suppress(RuntimeError):  # the server stopped meanwhile
                server.loop.call_soon_threadsafe(self._app_answered, cycle, done, proxied)

        pool.submit(call_app, server.app, environ).add_done_callback(answered)

    def _app_answered(self, cycle: RequestCycle, done: Future[Reply], proxied: bool) -> None:
        self.server.upstream_calls -= proxied
        if cycle.phase is not DECIDING or not self.flow.writes:
            return  # the connection is gone
        self._answer_ready()
        cycle.to(DONE)
        try:
            reply = done.result()
        except ConnectionResetError:  # the app asked for a reset (middleware.FaultMiddleware)
            self.reset()
            return
        except Exception as exc:  # never a 5xx: the app's own handlers answered what they could
            cycle.keep_alive = False
            answer = failure_answer(exc, f"answering {cycle.method}")
            self.flow.transport.write(self.server.heads.closing(answer))
            self.close()
            return
        data, close = self.server.heads.reply(reply, cycle.method, cycle.keep_alive)
        self.flow.transport.write(data)
        if close:
            self.close()
        self.advance()

    def _log(self, cycle: RequestCycle, status: str, size: int, took: float | None = None) -> None:
        state = self.server.state
        if not self.server.access_log or state is None:
            return
        peer = self.flow.transport.get_extra_info("peername")
        try:
            environ = environ_for(cycle, self.server.address, peer)
        except httptools.HttpParserInvalidURLError:  # its 400: the target logged as sent
            environ = {
                "REQUEST_METHOD": cycle.method,
                "PATH_INFO": cycle.url.decode("latin-1"),
                "SERVER_PROTOCOL": f"HTTP/{cycle.version}",
                "REMOTE_ADDR": peer[0] if peer else "",
                "HTTP_AUTHORIZATION": cycle.authorization or "",
            }
        served = LoggedAnswer(status, size, tenant_label(state, cycle.authorization), took)
        access_log.info("%s", log_line(environ, served, state))

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
            if flow.stalled(now, timeout):
                self.reset()
            return
        if self.pipeline and self.pipeline[0].phase in BUSY:
            return  # waiting on a delay or the app, not on the client
        since = self.began if self.arriving is not None else self.last_active
        if now - since > timeout:  # what it was given and did not take: dropped
            self.abort() if flow.transport.get_write_buffer_size() else self.close()


SWEEP_SECONDS: Final = 0.5
"""How often the answers' Date is brought up to the second and idle connections are swept."""


UPSTREAM_CALLS_PER_THREAD: Final = 4
"""Proxied calls waiting or under way, per thread: past them a call is a 503 at once (a slow
upstream would otherwise queue every client's call, and each client's request, behind it)."""


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
        self.lingering: OrderedDict[HttpConnection, None] = OrderedDict()  # draining, oldest first
        self.no_room_until = 0.0  # loop time: _make_room found none, and looks again then
        self.sock = bound_socket(host, port, reuse_port=settings.workers > 1, listen=True)
        self.address: tuple[str, int] = self.sock.getsockname()[:2]
        self._proxy: ValidatingProxy | None = parts.proxy if parts else None
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="verdict-mock-app")
        # a proxied /e waits on the upstream: on threads of its own, so the probes never do
        self.upstream_pool = ThreadPoolExecutor(threads) if self._proxy else self.pool
        self.upstream_calls, self.max_upstream_calls = 0, threads * UPSTREAM_CALLS_PER_THREAD
        try:  # uvloop where it is installed (the [server] extra, not on Windows)
            import uvloop

            self.loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        except ImportError:  # a plain install (the plugin's fixtures), or Windows
            self.loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()  # stop now
        self._finish = asyncio.Event()  # SIGTERM: finish the requests under way first
        self._sweeper: asyncio.TimerHandle | None = None
        self.parent_pid = parent_pid()  # a --workers worker's: it never serves on alone

    @property
    def effective_port(self) -> int:
        return self.address[1]

    def run(self) -> None:
        """Serve on this thread until :meth:`stop` (or a signal, on the main thread)."""
        asyncio.set_event_loop(self.loop)
        main = threading.current_thread() is threading.main_thread()
        # Windows' loops take no signal handler: Ctrl-C is a KeyboardInterrupt there (serve_forever)
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
            for pool in {self.pool, self.upstream_pool}:
                pool.shutdown(wait=True, cancel_futures=True)
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
        for pool in {self.pool, self.upstream_pool}:
            pool.shutdown(wait=False)
        if not self.loop.is_closed():
            self.loop.close()

    def _sweep(self) -> None:
        """Twice a second (or each idle timeout, if shorter): the Date of the answers, the
        connections idle, stuck or not reading for too long, and a worker's parent (killed: a
        worker never serves on alone, it stops as on SIGTERM)."""
        if self.parent_pid not in (None, os.getppid()) and not self._finish.is_set():
            log.warning("the --workers parent (pid %s) is gone: stopping", self.parent_pid)
            self.stop_gracefully()
        self.heads.tick()
        now = self.loop.time()
        for connection in list(self.connections):
            connection.sweep(now, self.idle_timeout)
        self._sweeper = self.loop.call_later(min(SWEEP_SECONDS, self.idle_timeout), self._sweep)


_SPARE_FILES = 64 + MAX_LINGERING  # listener, logs, worker sockets, upstream calls, refusals


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
