"""One client connection of the mock's own server: the pipeline, answers in turn, closing.

:class:`.reader.RequestReader` reads each request (within one request's bounds) into a
:class:`.cycle.RequestCycle` in the connection's pipeline, answered strictly in turn:
``GET``/``HEAD /e`` on the loop (a scripted delay with ``call_later``), anything else by the app
on a worker thread. :class:`.flow.FlowControl` holds the reading, the client's reading and the
closing state: nothing is answered while the client is not reading (``pause_writing``), nothing
is read while an answer is waited on, and a refusal is written, then what the client still
sends is discarded for up to :data:`DRAIN_SECONDS`, whatever its size, before closing
(RFC 9112 §9.6). The idle timeout closes a connection idle, stuck half-way through a request,
or not reading what it was sent (then reset).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Final, Protocol, cast

from ..explain import record
from ..model.answer import Answer, error_answer
from .cycle import DELAYED, DONE, QUEUED, RequestCycle
from .flow import ENDING, OPEN, FlowControl
from .reader import MAX_HEAD_BYTES as MAX_HEAD_BYTES
from .reader import MAX_PIPELINED as MAX_PIPELINED
from .reader import MAX_TARGET_BYTES as MAX_TARGET_BYTES
from .reader import RequestReader
from .respond import Responder, Server
from .wire import CONTINUE

IDLE_TIMEOUT: Final = 30.0
"""Seconds a connection may sit idle, stuck half-way through a request, or not read its
answers, before it closes (aborted, if its answers are still unsent)."""
DRAIN_SECONDS: Final = 5.0
"""After a refusal, how long what the client still sends is read and discarded (any size)."""


class Host(Server, Protocol):
    """What a connection needs of its server (:class:`.asyncserver.AsyncServer`)."""

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

    # -- what the reader hands over (reader.Sink) --------------------------------------------
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
