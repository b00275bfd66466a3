"""What one call of the suite may cost: the answer's size after decoding, and its time in all.

A hostile or broken target must not exhaust the run: an 8 GiB ``Content-Length``, an endless
chunked stream, a gzip bomb or a body dripped one byte at a time each fail the call that met
them, in one line, and the run goes on to write its report. The size is counted after
decoding, while decoding (zlib with ``max_length``), so nothing larger than the cap is ever held.
The time is a deadline across the whole call: every connect, TLS handshake, write and read of
the socket is given at most what is left of it, headers included (a read timeout alone lets a
drip run forever).
"""

from __future__ import annotations

import functools
import os
import ssl
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import httpcore
import httpx

MAX_ANSWER_BYTES = 1 << 20
"""The most an answer's body may hold after decoding: 1 MiB, as the mock's proxy caps upstream."""
DEFAULT_CALL_TIMEOUT = 30.0
"""The most one call takes in all unless configured (and never less than a request timeout)."""
WIRE_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})
"""Headers of the wire, not of the decoded body that is kept."""
_WIRE_BYTES = frozenset(name.encode() for name in WIRE_HEADERS)
ACCEPTED_ENCODINGS = "gzip, deflate"
"""The content codings the suite decodes under its cap (and so asks for)."""


class CallFailed(Exception):
    """The target's answer could not be taken: too large, too slow, or not decodable."""


class AnswerTooLarge(CallFailed):
    """The answer's body is over the cap."""


class CallTooSlow(CallFailed):
    """The call's deadline passed before the whole answer came."""


def human_size(size: int) -> str:
    """``1048576`` -> ``1 MiB``; sizes that are no whole MiB or KiB are said in bytes."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} bytes"


@dataclass
class Deadline:
    """When the current call must be over (on ``clock``); None between calls."""

    seconds: float
    clock: Callable[[], float] = time.monotonic
    at: float | None = None

    def start(self) -> None:
        self.at = self.clock() + self.seconds

    def stop(self) -> None:
        self.at = None

    def too_slow(self) -> CallTooSlow:
        return CallTooSlow(f"the call took longer than {self.seconds:g} s in all")

    def limit(self, timeout: float | None) -> tuple[float | None, bool]:
        """(the timeout to give one socket operation, whether the deadline set it)."""
        if self.at is None:
            return timeout, False
        left = self.at - self.clock()
        if left <= 0:
            raise self.too_slow()
        if timeout is None or left < timeout:
            return left, True
        return timeout, False


class _Stream(httpcore.NetworkStream):
    """A socket whose every operation ends by the deadline."""

    def __init__(self, inner: httpcore.NetworkStream, deadline: Deadline) -> None:
        self._inner = inner
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        limit, capped = self._deadline.limit(timeout)
        try:
            return self._inner.read(max_bytes, limit)
        except httpcore.TimeoutException:
            if capped:
                raise self._deadline.too_slow() from None
            raise

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        limit, capped = self._deadline.limit(timeout)
        try:
            self._inner.write(buffer, limit)
        except httpcore.TimeoutException:
            if capped:
                raise self._deadline.too_slow() from None
            raise

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        limit, capped = self._deadline.limit(timeout)
        try:
            inner = self._inner.start_tls(ssl_context, server_hostname, limit)
        except httpcore.TimeoutException:
            if capped:
                raise self._deadline.too_slow() from None
            raise
        return _Stream(inner, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


@dataclass
class _Backend(httpcore.NetworkBackend):
    """httpcore's own sockets, each wrapped in :class:`_Stream`."""

    deadline: Deadline
    inner: httpcore.NetworkBackend = field(default_factory=httpcore.SyncBackend)

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        limit, capped = self.deadline.limit(timeout)
        try:
            stream = self.inner.connect_tcp(host, port, limit, local_address, socket_options)
        except httpcore.TimeoutException:
            if capped:
                raise self.deadline.too_slow() from None
            raise
        return _Stream(stream, self.deadline)

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


class TrustSource(NamedTuple):
    """What decides which CAs verify https: the suite's ``--verdict-ca-bundle`` if given, else
    httpx's own reading of ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` (certifi's CAs without them)."""

    ca_bundle: str | None
    cert_file: str | None
    cert_dir: str | None


def tls_context(ca_bundle: str | None) -> ssl.SSLContext:
    """What https is verified with (:class:`TrustSource`).

    Made once per process for each source (:func:`_tls_context`): loading a CA bundle costs
    about 18 ms of CPU, and a run makes a client for its first reach, its preflight and its
    checks (each of the hundreds of suite runs of this project's tests paid it six times). The
    clients of a process share it, as Python's ssl allows; httpcore sets the same ALPN
    (http/1.1) on it for each connection.
    """
    return _tls_context(
        TrustSource(
            os.path.abspath(ca_bundle) if ca_bundle else None,
            os.environ.get("SSL_CERT_FILE"),
            os.environ.get("SSL_CERT_DIR"),
        )
    )


@functools.cache
def _tls_context(source: TrustSource) -> ssl.SSLContext:
    if source.ca_bundle:
        return ssl.create_default_context(cafile=source.ca_bundle)
    # httpx reads the variables itself (source.cert_file and .cert_dir only key the cache)
    return httpx.create_ssl_context()


def bounded_client(
    base_url: str, timeout: float, ca_bundle: str | None, deadline: Deadline
) -> httpx.Client:
    """An httpx client whose sockets obey ``deadline`` and that asks only for what it decodes;
    https is verified with :func:`tls_context`."""
    context = tls_context(ca_bundle)
    transport = httpx.HTTPTransport(verify=context)
    # httpx takes no network backend; its pool is rebuilt with ours (same TLS context).
    transport._pool = httpcore.ConnectionPool(
        ssl_context=context, network_backend=_Backend(deadline)
    )
    return httpx.Client(
        base_url=base_url,
        timeout=timeout,
        follow_redirects=False,
        transport=transport,
        headers={"Accept-Encoding": ACCEPTED_ENCODINGS},
    )


class _Inflate:
    """A zlib stream read at most ``room`` bytes at a time: a bomb is stopped while decoding."""

    def __init__(self, coding: str) -> None:
        self._coding = coding
        wbits = zlib.MAX_WBITS | 16 if coding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self._zlib = zlib.decompressobj(wbits)
        self._first = coding == "deflate"  # "deflate" is zlib-wrapped, or raw from some servers

    def decode(self, data: bytes, room: int) -> bytes:
        try:
            out = self._zlib.decompress(data, room)
        except zlib.error:
            if not self._first:
                raise
            self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
            out = self._zlib.decompress(data, room)
        self._first = False
        return out

    def flush(self, room: int) -> bytes:
        return self._zlib.flush(room) if room > 0 else b""


def _decoders(content_encoding: str) -> list[_Inflate]:
    """The codings to undo, last applied first; unknown ones are kept as they are (as httpx)."""
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
    return [_Inflate(c) for c in reversed(codings) if c in ("gzip", "x-gzip", "deflate")]


def read_bounded(response: httpx.Response, limit: int) -> bytes:
    """The decoded body of a streamed ``response``, or :class:`AnswerTooLarge` past ``limit``.

    Never more than ``limit + 1`` decoded bytes are held (each coding gives at most what is
    left of the cap), whatever the raw chunks or the compression ratio.
    """
    too_large = AnswerTooLarge(f"the answer exceeded {human_size(limit)} after decoding")
    declared = response.headers.get("content-length", "")
    encoded = "content-encoding" in response.headers
    if not encoded and declared.isdigit() and int(declared) > limit:
        raise AnswerTooLarge(
            f"the answer announced {int(declared)} bytes (Content-Length), over the "
            f"{human_size(limit)} cap"
        )
    decoders = _decoders(response.headers.get("content-encoding", ""))
    body = bytearray()

    def take(chunk: bytes, through: list[_Inflate]) -> None:
        # A layer that fills what is left of the cap holds more: over it, whatever follows.
        for decoder in through:
            chunk = decoder.decode(chunk, limit + 1 - len(body))
            if len(chunk) > limit - len(body):
                raise too_large
        body.extend(chunk)
        if len(body) > limit:
            raise too_large

    try:
        for raw in response.iter_raw():
            take(raw[: limit + 1 - len(body)] if not decoders else raw, decoders)
        for at, decoder in enumerate(decoders):
            take(decoder.flush(limit + 1 - len(body)), decoders[at + 1 :])
    except zlib.error as exc:
        raise CallFailed(f"the answer's body could not be decoded: {exc}") from None
    return bytes(body)


def with_decoded_body(response: httpx.Response, body: bytes) -> httpx.Response:
    """``response`` with its decoded ``body``: headers, status and reason phrase kept."""
    # as received, bytes: a name or value that is not ASCII (Server: café) is kept, not re-encoded
    headers = [(n, v) for n, v in response.headers.raw if n.lower() not in _WIRE_BYTES]
    extensions: dict[str, Any] = {
        name: response.extensions[name]
        for name in ("http_version", "reason_phrase")
        if name in response.extensions
    }
    return httpx.Response(
        response.status_code,
        headers=headers,
        content=body,
        request=response.request,
        extensions=extensions,
    )


def fetch(
    http: httpx.Client, request: httpx.Request, deadline: Deadline, limit: int
) -> httpx.Response:
    """Send ``request`` and read its whole answer within ``deadline`` and ``limit`` bytes."""
    deadline.start()
    try:
        response = http.send(request, stream=True)
        try:
            body = read_bounded(response, limit)
        finally:
            response.close()  # a cut-off answer closes its connection, never back to the pool
        return with_decoded_body(response, body)
    finally:
        deadline.stop()
