"""Reading requests off one connection of the mock's own server, within one request's bounds.

httptools parses; :class:`RequestReader` is its callback object. Each request becomes a
:class:`.cycle.RequestCycle`, handed whole to the connection (:meth:`Sink.queued`), or refused
as it arrives (:meth:`Sink.refuse`): a target over :data:`MAX_TARGET_BYTES` (414), headers over
:data:`.limits.MAX_HEADER_BYTES` or a head still arriving past :data:`MAX_HEAD_BYTES` (431), a
body over ``--max-body`` (413), more than :data:`MAX_PIPELINED` requests waiting (503), anything
httptools cannot parse (400). Nothing after a refusal or a closing request is read.
"""

from __future__ import annotations

import logging
from typing import Final, Protocol

import httptools

from ..web.limits import MAX_HEADER_BYTES
from .cycle import RequestCycle

log = logging.getLogger("mockserver.server")

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


class Sink(Protocol):
    """What the reader hands requests to (:class:`.connection.HttpConnection`)."""

    def accepts(self) -> bool:
        """Whether a further request is read."""
        ...

    def waiting(self) -> int:
        """How many requests wait for their answers."""
        ...

    def queued(self, cycle: RequestCycle) -> None:
        """A request read whole (``cycle.keep_alive`` says whether another may follow)."""
        ...

    def refuse(self, status: int, code: str, message: str) -> None:
        """Answer, after those before it, a request that will not be read further; then close."""
        ...

    def expects_continue(self) -> None:
        """The request arriving asked for ``100 Continue``."""
        ...


class RequestReader:
    """Feed httptools and build each request's cycle, within the bounds of one request."""

    __slots__ = ("_max_body", "_now", "_room", "_sink", "began", "cycle", "parser")

    def __init__(self, sink: Sink, max_body: int) -> None:
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
