"""Calling the mock in-process, for the transports of :mod:`.testing` (respx, responses).

``GET``/``HEAD /e`` is answered by :func:`..explain.handle`, as on every server, without Flask;
any other request goes to the Flask app, built on first use around the same state.
"""

from __future__ import annotations

import threading
import time
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import httpx

from verdict_contract.core.spec import is_api_call
from verdict_contract.mockserver.explain import ClientLeft, handle
from verdict_contract.mockserver.model.answer import explain_headers, failure_answer
from verdict_contract.mockserver.model.steps import FAULT_HEADER
from verdict_contract.mockserver.settings import Settings
from verdict_contract.mockserver.state import MockState
from verdict_contract.mockserver.store.journal import SentRequest

if TYPE_CHECKING:
    from flask import Flask


@dataclass(frozen=True)
class Reply:
    """What the client gets: an answer, or a fault for its adapter to raise the client's error
    for (``reset``, ``truncated``, ``timeout``, ``cancelled``)."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    fault: str | None = None


class _ScriptedTimeout(ClientLeft):
    fault = "timeout"  # a scripted delay at least as long as the client's read timeout


class _ClientCancelled(ClientLeft):
    fault = "cancelled"  # by an async client, while a scripted delay held the answer


def _split_fault(headers: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], str | None]:
    """An answer's headers less the fault mark, and the fault it names (None: a plain answer)."""
    fault = next((value for name, value in headers if name == FAULT_HEADER), None)
    return [(name, value) for name, value in headers if name != FAULT_HEADER], fault


class InProcessApp:
    """The mock behind a function call; scripted delays honour the caller's timeout."""

    def __init__(self, settings: Settings) -> None:
        self.state = MockState(settings)
        self._read_timeout: ContextVar[float | None] = ContextVar("read_timeout", default=None)
        self._cancel: ContextVar[threading.Event | None] = ContextVar("cancel", default=None)
        self.state.delay = self._delay

    def close(self) -> None:
        """Close its connections to a shared state (``state=redis://...``), once it is done."""
        self.state.close()

    @cached_property
    def app(self) -> Flask:
        from verdict_contract.mockserver.web.app import create_app

        return create_app(self.state.settings, state=self.state)

    def _delay(self, seconds: float) -> None:
        timeout = self._read_timeout.get()
        if timeout is not None and seconds >= timeout:
            raise _ScriptedTimeout
        cancel = self._cancel.get()  # shorter than the timeout: wait for real (async: a thread)
        if cancel is None:
            time.sleep(seconds)
        elif cancel.wait(seconds):  # the async client cancelled its call meanwhile
            raise _ClientCancelled

    def call(
        self,
        method: str,
        url: str,
        prefix: str,
        headers: list[tuple[str, str]],
        body: bytes = b"",
        read_timeout: float | None = None,
        cancel: threading.Event | None = None,
    ) -> Reply:
        """One request to ``url`` (less the base URL's path ``prefix``); ``cancel``, set when an
        async client cancels, ends a scripted delay early (journaled as ``cancelled``); a delay
        at least as long as ``read_timeout`` is the fault ``timeout`` at once."""
        self._read_timeout.set(read_timeout)
        self._cancel.set(cancel)
        parsed = httpx.URL(url)
        path, query = parsed.path[len(prefix) :] or "/", parsed.query
        if not is_api_call(method, path):
            from werkzeug.test import EnvironBuilder
            from werkzeug.wrappers import Response

            environ = EnvironBuilder(
                method=method,
                path=path,
                query_string=query.decode("latin-1"),
                headers=headers,
                data=body,
            ).get_environ()
            got = Response.from_app(self.app.wsgi_app, environ)
            kept, fault = _split_fault(list(got.headers.items()))
            return Reply(got.status_code, kept, got.get_data(), fault)
        authorization = next((v for k, v in headers if k.lower() == "authorization"), None)
        sent = SentRequest(method, url, tuple(headers), body)
        try:
            answer = handle(self.state, method, query, authorization, headers, sent)
        except ClientLeft as left:  # journaled so by handle()
            return Reply(0, [], b"", left.fault)
        except Exception as exc:  # never a 5xx of the mock's own, as on every server
            answer = failure_answer(exc, f"answering {method} {path}")
        kept, fault = _split_fault(explain_headers(answer))
        return Reply(answer.status, kept, b"" if method == "HEAD" else answer.body, fault)
