"""The bytes the mock's own server writes (answer heads built once per shape, 100 Continue, an
app's reply framed: body, length and ``Connection: close`` decided here, in one place), and
what it does to a socket (a reset on close, a peek for a client that left, binding).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
import time
from dataclasses import dataclass
from email.utils import formatdate
from typing import Final

from ..model.answer import Answer, explain_headers, status_line
from ..model.steps import FAULT_HEADER

CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"
NO_BODY: Final = frozenset({204, 304})
"""Statuses that carry no body (a scripted 204 or 304 keeps its connection usable)."""
BODILESS: Final = frozenset({"100", "101", "102", "103", "204", "304"})
"""Status codes (as the app's status line starts) that carry no body nor a length of one."""
HOP_BY_HOP: Final = frozenset({"connection", "keep-alive", "transfer-encoding", "date", "server"})
"""Headers of an app's answer the server owns (they frame the connection): the app's are dropped."""
_CLOSING: Final = b"Connection: close\r\n\r\n"
_KEEPING: Final = b"\r\n"
_HEADS_KEPT: Final = 1024  # heads of distinct shapes remembered (then forgotten all at once)


@dataclass(frozen=True, slots=True)
class Reply:
    """What the app answered: its status line, headers and whole body."""

    status: str
    headers: list[tuple[str, str]]
    body: bytes

    def declared_length(self) -> int | None:
        """The Content-Length the app set, if it set one."""
        for name, value in self.headers:
            if name.lower() == "content-length" and value.strip().isdigit():
                return int(value)
        return None


def head_start(status: str, headers: list[tuple[str, str]]) -> bytes:
    """The status line and headers of an answer, up to (not including) Date and Server."""
    lines = [f"HTTP/1.1 {status}\r\n"]
    lines.extend(f"{name}: {value}\r\n" for name, value in headers)
    # A header an app set outside latin-1 (RFC 9110's field values) is sent with "?" in place of
    # what it cannot encode: raising here, in a loop callback, left the client hanging.
    return "".join(lines).encode("latin-1", errors="replace")


class Heads:
    """Answer bytes: the start of a head is the same for every answer of one shape, built once
    (26% of a GET /e: bench_instructions); every head ends with Date and Server, formatted
    again by :meth:`tick` (the server's sweep, twice a second, as uvicorn's main loop refreshes
    its Date)."""

    def __init__(self) -> None:
        self._kept: dict[tuple[int, tuple[tuple[str, str], ...], int, bool], bytes] = {}
        self._second = -1
        self._date = b""
        self.tick()

    def tick(self) -> None:
        """Format the Date and Server lines again if the second has changed."""
        now = int(time.time())
        if now != self._second:
            date = formatdate(now, usegmt=True)
            self._second, self._date = now, f"Date: {date}\r\nServer: verdict-mock\r\n".encode()

    def answer(self, answer: Answer, head_only: bool, close: bool, vary: bool) -> tuple[bytes, int]:
        """The whole answer as bytes, and the length of the body in it."""
        key = (answer.status, tuple(answer.headers), len(answer.body), vary)
        start = self._kept.get(key)
        if start is None:
            if len(self._kept) >= _HEADS_KEPT:
                self._kept.clear()
            headers = [h for h in explain_headers(answer, vary) if h[0] != FAULT_HEADER]
            if answer.status in NO_BODY:  # RFC 9110: no body, so no length of one
                headers = [(k, v) for k, v in headers if k != "Content-Length"]
            start = head_start(status_line(answer.status), headers)
            self._kept[key] = start
        body = b"" if head_only or answer.status in NO_BODY else answer.body
        return b"".join((start, self._date, _CLOSING if close else _KEEPING, body)), len(body)

    def closing(self, answer: Answer) -> bytes:
        """An answer the connection closes after (a refusal, a failure), head and body."""
        return self.answer(answer, head_only=False, close=True, vary=False)[0]

    def reply(self, reply: Reply, method: str, keep_alive: bool) -> tuple[bytes, bool]:
        """An app's reply as bytes, and whether the connection must close after it."""
        # 1xx, 204 and 304 have no body, nor a Content-Length made up for one (RFC 9110 8.6).
        head_only = method == "HEAD" or reply.status[:3] in BODILESS
        declared = reply.declared_length()
        headers = [(k, v) for k, v in reply.headers if k.lower() not in HOP_BY_HOP]
        if declared is None and not head_only:
            headers.append(("Content-Length", str(len(reply.body))))
        # An app body shorter than its Content-Length (a scripted cut) ends the connection.
        cut = not head_only and declared is not None and declared != len(reply.body)
        close = not keep_alive or cut
        head = head_start(reply.status, headers) + self._date + (_CLOSING if close else _KEEPING)
        return (head if head_only else head + reply.body), close


def reset_on_close(transport: asyncio.BaseTransport) -> None:
    """Make closing the transport's socket a TCP reset (``SO_LINGER`` 0): unsent bytes dropped."""
    if (sock := transport.get_extra_info("socket")) is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def unsent(transport: asyncio.WriteTransport) -> int:
    """Bytes written the client has not taken: the transport's and the kernel's (``SIOCOUTQ``)."""
    size, sock = transport.get_write_buffer_size(), transport.get_extra_info("socket")
    with contextlib.suppress(OSError, AttributeError, ImportError):  # no socket; not POSIX
        from fcntl import ioctl
        from termios import TIOCOUTQ

        size += struct.unpack("i", ioctl(sock.fileno(), TIOCOUTQ, b"\0" * 4))[0]
    return size


def peer_closed(transport: asyncio.BaseTransport) -> bool:
    """Whether the client closed its side, by a peek (reading may be paused: no event says it)."""
    if (sock := transport.get_extra_info("socket")) is None:
        return True
    if not hasattr(socket, "MSG_DONTWAIT"):  # Windows: no peek that cannot block; taken as open
        return False
    try:
        with socket.socket(fileno=os.dup(sock.fileno())) as peek:
            return peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False  # open, nothing sent meanwhile
    except OSError:
        return True  # reset


def bound_socket(
    host: str, port: int, reuse_port: bool = False, listen: bool = False
) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (OSError if taken), ``listen``-ing (non-blocking)
    if asked; ``reuse_port``: the kernel spreads connections among processes (``--workers``)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        if listen:
            sock.listen(1024)
            sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock
