"""The bytes the mock's own server writes: answer heads (built once per shape), Date, 100.

Kept apart from the connection (:mod:`.asyncserver`) so that framing (which answers carry a
body, a length, ``Connection: close``) is decided in one place.
"""

from __future__ import annotations

import time
from email.utils import formatdate
from typing import Final

from verdict_contract.mockserver.answer import Answer, explain_headers, status_line
from verdict_contract.mockserver.faults import FAULT_HEADER

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


class Date:
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


def head_start(status: str, headers: list[tuple[str, str]]) -> bytes:
    """The status line and headers of an answer, up to (not including) Date and Server."""
    lines = [f"HTTP/1.1 {status}\r\n"]
    lines.extend(f"{name}: {value}\r\n" for name, value in headers)
    return "".join(lines).encode("latin-1")


class Heads:
    """Answer bytes: the start of a head is the same for every answer of one shape, built once."""

    def __init__(self) -> None:
        self.date = Date()
        self._kept: dict[tuple[int, tuple[tuple[str, str], ...], int, bool], bytes] = {}

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
        end = _CLOSING if close else _KEEPING
        return b"".join((start, self.date(), end, body)), len(body)

    def head(self, status: str, headers: list[tuple[str, str]], close: bool) -> bytes:
        """The head of an app's answer (its headers as given, then Date, Server, Connection)."""
        return head_start(status, headers) + self.date() + (_CLOSING if close else _KEEPING)
