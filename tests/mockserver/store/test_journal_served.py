"""The journal knows what it served: verdict, ``conclusive``, ``schema``, who decided, the fault.

One script of answers runs through every transport (the async server, the Flask app and its
WSGI fast path, respx and responses in-process) and both stores (memory, Redis); each
must journal the same named fields.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any

import httpx
import pytest
import requests

from tests.redisserver import redis_server
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.model.answer import Answer, served
from verdict_contract.mockserver.store.backend import StateURL
from verdict_contract.mockserver.web.answers import state_of
from verdict_contract.testing.mocks import (
    ScriptStep,
    VerdictMock,
    live_mock,
    reply,
    responses_mock,
    respx_mock,
)

KEY = "served-fields-key-0001"
Get = Callable[[str, dict[str, str]], None]

FIELDS = ("status", "fault", "decided_by", "verdict", "conclusive", "schema", "retry_after")
EXPECTED = [
    (429, None, "script", None, None, None, "1"),  # a bare 429 step: Retry-After 1
    (None, "reset", "script", None, None, None, None),
    (203, None, "script", "refused", True, 7, None),  # a scripted 2xx serves the body
    (429, None, "script", None, None, None, None),  # reply(429): no Retry-After
    (200, None, "logic", "refused", True, 7, None),
    (401, None, "logic", None, None, None, None),
]


def _httpx_get(url: str, headers: dict[str, str]) -> None:
    with suppress(httpx.TransportError):  # the scripted reset
        httpx.get(url, headers=headers, timeout=10)


def _requests_get(url: str, headers: dict[str, str]) -> None:
    with suppress(requests.exceptions.ConnectionError):
        requests.get(url, headers=headers, timeout=10)


def _settings(**changes: Any) -> Settings:
    return Settings(port=0, api_keys=(KEY,), **changes)


@contextmanager
def _flask() -> Iterator[tuple[VerdictMock, Get]]:
    """The Flask app's own test client: no server, the app's middleware and views."""
    app = create_app(_settings())
    client = app.test_client()

    def get(url: str, headers: dict[str, str]) -> None:
        path = url.removeprefix("http://flask.test")
        with suppress(ConnectionResetError):
            client.get(path, headers=headers)

    yield VerdictMock(state_of(app), "http://flask.test"), get


@contextmanager
def _live(**changes: Any) -> Iterator[tuple[VerdictMock, Get]]:
    with live_mock(_settings(**changes)) as mock:
        yield mock, _httpx_get


@contextmanager
def _redis() -> Iterator[tuple[VerdictMock, Get]]:
    with redis_server() as server, _live(state=StateURL.parse(server.url)) as made:
        yield made


@contextmanager
def _respx() -> Iterator[tuple[VerdictMock, Get]]:
    with respx_mock(settings=_settings()) as mock:
        yield mock, _httpx_get


@contextmanager
def _responses() -> Iterator[tuple[VerdictMock, Get]]:
    with responses_mock(settings=_settings()) as mock:
        yield mock, _requests_get


TRANSPORTS: dict[str, Callable[[], AbstractContextManager[tuple[VerdictMock, Get]]]] = {
    "async": _live,
    "flask": _flask,
    "respx": _respx,
    "responses": _responses,
    "async+redis": _redis,
}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_transport_journals_what_it_served_and_who_decided(transport: str) -> None:
    with TRANSPORTS[transport]() as (mock, get):
        mock.reset()
        script: list[ScriptStep] = [429, "reset", reply(203), reply(429)]
        n = mock.mint(verdict="refused", conclusive=True, script=script)
        for _ in range(5):
            get(mock.url(n), mock.headers)
        get(mock.url(n), {})
        journal = mock.journal
    assert [tuple(getattr(e, f) for f in FIELDS) for e in journal] == EXPECTED


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_transport_and_store_journals_a_delay_and_a_delayed_status(transport: str) -> None:
    with TRANSPORTS[transport]() as (mock, get):
        mock.reset()
        script: list[ScriptStep] = [{"delay_ms": 20}, reply(503, delay_ms=30), "reset"]
        n = mock.mint(verdict="disputed", script=script)
        old = mock.mint(verdict="refused", age_seconds=901, script=[{"delay_ms": 25}])
        for _ in range(4):
            get(mock.url(n), mock.headers)
        get(mock.url(old), mock.headers)
        journal = mock.journal
    read = [(e.status, e.decided_by, e.delay_ms, e.outcome) for e in journal]
    assert read == [
        (200, "logic", 20, "verdict"),  # the session's own answer, late
        (503, "script", 30, "scripted"),  # a scripted status, after its delay
        (None, "script", None, "scripted"),  # no delay: none journaled
        (200, "logic", None, "verdict"),
        (404, "logic", 25, "expired"),  # a delay step before the logic's 404
    ]


def test_a_delay_before_a_scripted_status_outlasts_a_clients_timeout() -> None:
    with _respx() as (mock, _):
        n = mock.mint(script=[reply(503, delay_ms=5000), reply(503, delay_ms=0)])
        with pytest.raises(httpx.ReadTimeout):  # at once: the mock knows the client's timeout
            httpx.get(mock.url(n), headers=mock.headers, timeout=1)
        assert httpx.get(mock.url(n), headers=mock.headers, timeout=1).status_code == 503
        read = [(e.status, e.fault, e.delay_ms) for e in mock.journal]
    assert read == [(None, "timeout", None), (503, None, None)]


def test_a_delay_step_is_the_logics_answer_late() -> None:
    with _respx() as (mock, get):
        n = mock.mint(verdict="disputed", script=[{"delay_ms": 20}])
        get(mock.url(n), mock.headers)
        get(mock.url(n), mock.headers)
        first, second = mock.journal
    assert (first.decided_by, first.delay_ms, first.verdict) == ("logic", 20, "disputed")
    assert (second.decided_by, second.delay_ms) == ("logic", None)


def test_a_body_with_fields_the_spec_does_not_list_is_journaled_so() -> None:
    with _respx() as (mock, get):
        n = mock.mint(verdict="uncontradicted", allow_invalid=True, schema=8, debug="x")
        get(mock.url(n), mock.headers)
        (entry,) = mock.journal
    assert (entry.schema, entry.extra_fields) == (8, ("debug",))


def test_the_reading_is_built_once_per_answer_object() -> None:
    answer = Answer(200, b'{"verdict": "refused", "conclusive": false, "schema": 7}')
    assert answer.result is answer.result
    assert answer.result.served == served(answer.body)


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b'{"schema": true, "verdict": 3}'])
def test_a_body_that_is_no_verdict_object_serves_no_verdict(body: bytes) -> None:
    facts = served(body)
    assert facts is None or (facts.verdict, facts.schema) == (None, None)


def test_the_journal_keeps_the_answers_reading_not_a_copy() -> None:
    with _respx() as (mock, get):
        n = mock.mint(verdict="refused")
        get(mock.url(n), mock.headers)
        kept = mock.state.memory.journal.entries()
    assert isinstance(kept[0].result.served, tuple)
    assert kept[0].decided_by == "logic"
