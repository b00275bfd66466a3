"""How one request of the mock's own server is answered, once its turn has come.

:class:`Responder` answers the request at the head of a connection's pipeline
(:mod:`.connection`): a refusal (then the connection lingers), ``GET``/``HEAD /e`` on the loop
from :func:`.explain.decide` (a scripted delay waited out with ``call_later``, a fault enacted:
a TCP reset, a cut body), ``/e`` with another method as the app's 405, and anything else by the
app on a worker thread. When an answer waited on is written, the connection takes its next turn
(:meth:`Turn.advance`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Final, Protocol

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
from ..web.accesslog import log_request
from .cycle import DECIDING, DELAYED, DONE, RequestCycle
from .flow import FlowControl
from .wire import Heads, peer_closed
from .wsgibridge import call_app, environ_for

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication

    from .wsgibridge import Reply, Request

log = logging.getLogger("mockserver.server")

_HOT_PREFIX: Final = ENDPOINT_PATH.encode() + b"?"
_HOT_PATH: Final = ENDPOINT_PATH.encode()


class Server(Protocol):
    """What answering needs of the server (:class:`.asyncserver.AsyncServer`)."""

    app: WSGIApplication
    state: MockState | None
    hot: bool  # /e answered on the loop
    drain_seconds: float
    access_log: bool
    heads: Heads
    address: tuple[str, int]
    pool: ThreadPoolExecutor
    loop: asyncio.AbstractEventLoop


class Turn(Protocol):
    """What answering needs of the connection whose turn it is."""

    flow: FlowControl

    def answer_ready(self) -> None:
        """An answer waited on is ready: the idle clock starts again."""
        ...

    def advance(self) -> None:
        """An answer waited on is written: answer the next request."""
        ...

    def close(self) -> None: ...

    def reset(self) -> None: ...


class Responder:
    """Answers one connection's requests, one at a time, in the order it starts them."""

    __slots__ = ("_starting", "_timer", "server", "traffic", "turn")

    def __init__(self, server: Server, turn: Turn) -> None:
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
        if state.shared is None:  # memory answers at once: its round trips run in a loop
            self._explain_now(state, cycle, request, query)  # (bench_connection: 2x faster)
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
        state = self.server.state
        assert state is not None
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
        state = self.server.state
        assert state is not None
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
            self.traffic.count(answer.reading, latency)
        if answer.fault == "reset":
            self._log(request, NO_STATUS, 0)
            self.turn.reset()
            return
        close = not cycle.keep_alive or answer.fault == "truncated"
        data, sent = self.server.heads.answer(answer, request.method == "HEAD", close, vary)
        self.turn.flow.transport.write(data)
        if self.server.access_log:
            self._log(request, status_line(answer.status), sent)
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

    def _log(self, request: Request, status: str, size: int) -> None:
        if not self.server.access_log:
            return
        peer = self.turn.flow.transport.get_extra_info("peername")
        state = self.server.state
        is_key = state.key_ok if state is not None else (lambda _: False)
        log_request(request.method, request.url, request.version, peer, status, size, is_key)


def _failure(exc: Exception) -> Answer:
    """The answer to a request to ``/e`` that could not be decided (model/answer.py decides)."""
    return failure_answer(exc, f"answering GET {ENDPOINT_PATH}")
