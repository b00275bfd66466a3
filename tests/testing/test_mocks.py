"""verdict_contract.testing: the same mock for every client (live HTTP, httpx via respx,
requests via responses), its journal checks, its clock and scripted answers."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import cast

import httpx
import pytest
import redis
import requests

from tests.helpers import KEY, wait_until
from tests.redisserver import RedisServer, redis_server
from verdict_contract import SpecError, VerificationError
from verdict_contract.core.rates import RateLimit
from verdict_contract.mockserver import Settings
from verdict_contract.mockserver.model.sessions import ScriptStep, Step, parse_step
from verdict_contract.mockserver.store.backend import StateURL
from verdict_contract.testing.mocks import (
    VerdictMock,
    live_mock,
    reply,
    responses_mock,
    respx_mock,
)

Transport = Callable[..., AbstractContextManager[VerdictMock]]


def _live(settings: Settings | None = None) -> AbstractContextManager[VerdictMock]:
    return live_mock(settings or Settings(port=0))


def _get_httpx(mock: VerdictMock, n: str, timeout: float = 5.0) -> tuple[int | None, str]:
    try:
        answer = httpx.get(mock.url(n), headers=mock.headers, timeout=timeout)
    except httpx.ReadTimeout:
        return None, "timeout"
    except (httpx.ReadError, httpx.RemoteProtocolError):
        return None, "fault"
    return answer.status_code, answer.text


def _get_requests(mock: VerdictMock, n: str, timeout: float = 5.0) -> tuple[int | None, str]:
    try:
        answer = requests.get(mock.url(n), headers=mock.headers, timeout=timeout)
    except requests.exceptions.ReadTimeout:
        return None, "timeout"
    except (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError):
        return None, "fault"
    return answer.status_code, answer.text


TRANSPORTS = [
    pytest.param(_live, _get_httpx, id="live-httpx"),
    pytest.param(_live, _get_requests, id="live-requests"),
    pytest.param(lambda s=None: respx_mock(settings=s), _get_httpx, id="respx"),
    pytest.param(lambda s=None: responses_mock(settings=s), _get_requests, id="responses"),
]


@pytest.mark.parametrize(("transport", "get"), TRANSPORTS)
def test_every_transport_gives_the_same_answers_and_journal(
    transport: Transport, get: Callable[..., tuple[int | None, str]]
) -> None:
    with transport(Settings(port=0, api_keys=(KEY,), rate_limit=RateLimit.parse("3/60"))) as mock:
        assert mock.api_key == KEY
        n = mock.mint(verdict="refused", script=[reply(503, retry_after=7), "reset"])
        assert get(mock, n)[0] == 503
        assert get(mock, n) == (None, "fault")
        status, body = get(mock, n)
        assert status == 200
        assert '"verdict":"refused"' in body
        assert get(mock, n)[0] == 429  # the settings' rate limit, in every transport
        got = [(e.status, e.fault) for e in mock.journal]
        assert got == [(503, None), (None, "reset"), (200, None), (429, None)]
        mock.assert_called(n, times=4)
        assert KEY not in repr(mock.journal)


@pytest.mark.parametrize(("transport", "get"), TRANSPORTS[2:])
def test_in_process_timeouts_are_journaled_as_timeouts(
    transport: Transport, get: Callable[..., tuple[int | None, str]]
) -> None:
    with transport() as mock:
        n = mock.mint(script=[{"delay_ms": 5000}, "truncated", {"delay_ms": 20}])
        assert get(mock, n, timeout=1.0) == (None, "timeout")  # at once, not after 5 s
        assert get(mock, n, timeout=1.0) == (None, "fault")
        assert get(mock, n, timeout=1.0)[0] == 200
        assert [(e.status, e.fault) for e in mock.journal] == [
            (None, "timeout"),
            (200, "truncated"),
            (200, None),
        ]


def test_a_request_in_flight_at_reset_never_reaches_the_next_tests_journal() -> None:
    with live_mock() as mock:
        n = mock.mint(script=[{"delay_ms": 400}])
        arrived, next_step = threading.Event(), mock.state.memory.scripts.next_step

        def step(session_id: str) -> Step | None:
            arrived.set()  # the request took its delay step: it is answering now
            return next_step(session_id)

        mock.state.memory.scripts.next_step = step  # type: ignore[method-assign]
        thread = threading.Thread(target=_get_httpx, args=(mock, n))
        thread.start()
        assert arrived.wait(timeout=5)
        mock.reset()  # the next test begins while the delayed request is still answering
        thread.join(timeout=10)
        assert mock.journal == []


def test_verification_helpers_count_and_explain() -> None:
    with respx_mock() as mock:
        once, never = mock.mint(verdict="disputed"), mock.mint()
        httpx.get(mock.url(once), headers=mock.headers)
        mock.assert_called_once(once)
        mock.assert_not_called(never)
        assert mock.call_count(once) == 1
        assert mock.last_request(once).status == 200
        assert mock.last_request().n == once
        httpx.get(mock.url(once), headers={"Authorization": "Bearer wrong-key-0000000000"})
        with pytest.raises(VerificationError) as failure:
            mock.assert_called_once(once)
        message = str(failure.value)
        assert "expected exactly 1 request(s)" in message
        assert "received 2" in message
        assert "-> 401 (unauthorized; Bearer …0000)" in message
        assert "wrong-key" not in message
        mock.reset()
        with pytest.raises(VerificationError, match="received no request at all"):
            mock.last_request()


@pytest.mark.parametrize(("transport", "get"), [TRANSPORTS[0], TRANSPORTS[2]])
def test_advance_and_expire_need_no_sleep(
    transport: Transport, get: Callable[..., tuple[int | None, str]]
) -> None:
    with transport(Settings(port=0, rate_limit=RateLimit.parse("2/60"))) as mock:
        aging, expired = mock.mint(verdict="refused"), mock.mint(verdict="refused")
        assert [get(mock, aging)[0] for _ in range(3)] == [200, 200, 429]
        mock.advance(60)  # the window passed
        assert get(mock, aging)[0] == 200
        mock.advance(15 * 60)  # and the session's lifetime (§3)
        assert get(mock, aging)[0] == 404
        mock.reset()
        mock.expire(expired)
        assert get(mock, expired)[0] == 404
        assert get(mock, aging)[0] == 200  # reset put the clock back
        assert mock.journal[-2].outcome == "expired"
        with pytest.raises(ValueError, match="seconds >= 0"):
            mock.advance(-1)


def test_scripted_steps_set_any_status_and_headers() -> None:
    when = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)
    with live_mock() as mock:
        n = mock.mint(
            script=[
                reply(429, retry_after=when),
                reply(503, retry_after=120, headers={"X-Trace": "abc"}),
                reply(418),
                reply(200, headers={"X-Served-By": "edge-1"}),
            ]
        )
        first = httpx.get(mock.url(n), headers=mock.headers)
        assert first.status_code == 429
        assert parsedate_to_datetime(first.headers["Retry-After"]) == when
        second = httpx.get(mock.url(n), headers=mock.headers)
        assert (second.headers["Retry-After"], second.headers["X-Trace"]) == ("120", "abc")
        teapot = httpx.get(mock.url(n), headers=mock.headers)
        assert teapot.status_code == 418
        assert teapot.json()["error"]["code"] == "i'm_a_teapot"
        ok = httpx.get(mock.url(n), headers=mock.headers)
        assert ok.headers["X-Served-By"] == "edge-1"
        assert ok.json()["schema"] == 7
    assert parse_step(429, "s").headers is None  # the short form keeps its default Retry-After


@pytest.mark.parametrize(
    "bad",
    [
        {"status": 99},
        {"status": 600},
        {"status": True},
        {"status": 429, "headers": {"Bad Name": "x"}},
        {"status": 429, "headers": {"Retry-After": "1\r\nSet-Cookie: a=b"}},
        {"status": 429, "headers": {f"X-{i}": "1" for i in range(17)}},
        {"status": 429, "extra": 1},
    ],
)
def test_impossible_steps_are_refused_at_mint(bad: dict[str, object]) -> None:
    with respx_mock() as mock, pytest.raises(SpecError):
        mock.mint(script=[cast(ScriptStep, bad)])  # ill-typed on purpose: refused at run time


def test_a_delay_does_not_block_an_async_clients_event_loop() -> None:
    async def scenario(mock: VerdictMock, n: str) -> tuple[int, int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            for _ in range(20):
                await asyncio.sleep(0.01)
                ticks += 1

        async with httpx.AsyncClient() as client:
            answer, _ = await asyncio.gather(client.get(mock.url(n), headers=mock.headers), tick())
        return answer.status_code, ticks

    with respx_mock() as mock:
        n = mock.mint(script=[{"delay_ms": 400}])
        started = time.monotonic()
        status, ticks = asyncio.run(scenario(mock, n))
        assert status == 200
        assert ticks == 20  # the loop kept running while the answer waited
        assert time.monotonic() - started >= 0.4


def test_mint_by_kind_gives_the_same_body_on_every_run_and_a_seed_reproduces_one() -> None:
    def bodies(settings: Settings, **mint: object) -> list[dict[str, object]]:
        with respx_mock(settings=settings) as mock:
            ids = [mock.mint(verdict="contradicted", **mint) for _ in range(2)]  # type: ignore[call-overload]
            return [httpx.get(mock.url(n), headers=mock.headers).json() for n in ids]

    first, again = bodies(Settings()), bodies(Settings())
    assert first == again  # a new mock, the same bodies: no flaky tests
    assert first[0] != first[1]  # yet two mints in one test differ
    assert first[0]["conclusive"] is True  # the documented default for contradicted
    assert bodies(Settings(seed="other")) != first  # --verdict-seed explores other bodies
    pinned = bodies(Settings(), seed="case-7")
    assert pinned[0] == pinned[1] == bodies(Settings(), seed="case-7")[0]
    assert pinned[0] != bodies(Settings(), seed="case-8")[0]


def test_reprs_never_show_a_key() -> None:
    secret_settings = Settings(api_keys=(KEY, "second-key-0123456789"), secret="sign-me-please")
    with respx_mock(settings=secret_settings) as mock:
        shown = repr(mock) + repr(mock.state) + repr(secret_settings) + str(mock.requests)
    for secret in (KEY, "second-key-0123456789", "sign-me-please"):
        assert secret not in shown
    assert "…cdef" in shown


@pytest.fixture
def responses_requests() -> Iterator[VerdictMock]:
    with responses_mock() as mock:
        yield mock


def test_responses_leaves_nothing_to_the_network(responses_requests: VerdictMock) -> None:
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get("https://elsewhere.invalid/", timeout=1)
    answer = requests.get(
        responses_requests.url("demo-refused"), headers=responses_requests.headers
    )
    assert answer.json()["verdict"] == "refused"


Seen = tuple[int, list[str], list[str]]
"""A status, then every Content-Type and every Cache-Control line of the answer."""


def _content_types_httpx(mock: VerdictMock, n: str) -> Seen:
    answer = httpx.get(mock.url(n), headers=mock.headers, timeout=5.0)
    lines = answer.headers
    return answer.status_code, lines.get_list("content-type"), lines.get_list("cache-control")


def _content_types_requests(mock: VerdictMock, n: str) -> Seen:
    answer = requests.get(mock.url(n), headers=mock.headers, timeout=5.0)
    # the raw header lines: requests' own mapping would join two into one "a, b"
    lines = answer.raw.headers
    return answer.status_code, lines.getlist("content-type"), lines.getlist("cache-control")


@pytest.mark.parametrize(
    ("transport", "content_types"),
    [
        pytest.param(_live, _content_types_httpx, id="async-httpx"),
        pytest.param(_live, _content_types_requests, id="async-requests"),
        pytest.param(lambda: respx_mock(), _content_types_httpx, id="respx"),
        pytest.param(lambda: responses_mock(), _content_types_requests, id="responses"),
    ],
)
def test_a_scripted_content_type_replaces_the_default_one(
    transport: Callable[[], AbstractContextManager[VerdictMock]],
    content_types: Callable[[VerdictMock, str], Seen],
) -> None:
    """Exactly one Content-Type, the script's, whatever the case of its name.

    The same for Cache-Control: a scripted header replaces the default of that name.
    """
    with transport() as mock:
        n = mock.mint(
            script=[
                reply(200, headers={"Content-Type": "application/vnd.verdict+json"}),
                reply(503, headers={"content-type": "text/plain", "cache-control": "max-age=5"}),
                reply(429, retry_after=3),
            ]
        )
        seen = [content_types(mock, n) for _ in range(4)]
    assert seen == [
        (200, ["application/vnd.verdict+json"], ["no-store"]),
        (503, ["text/plain"], ["max-age=5"]),
        (429, ["application/json"], ["no-store"]),
        (200, ["application/json"], ["private, max-age=86400, immutable"]),
    ]


@pytest.mark.parametrize("transport", ["respx", "responses"])
def test_an_in_process_entry_holds_the_request_as_the_client_sent_it(transport: str) -> None:
    """Method, URL, headers (the key too) and body, as sent; the key masked in its repr."""
    settings = Settings(api_keys=(KEY,))
    context = (
        respx_mock(settings=settings) if transport == "respx" else responses_mock(settings=settings)
    )
    with context as mock:
        n = mock.mint(verdict="refused")
        headers = {"Authorization": f"Bearer {KEY}", "X-Trace": "t-1"}
        if transport == "respx":
            httpx.get(mock.url(n), headers=headers, timeout=5)
        else:
            requests.get(mock.url(n), headers=headers, timeout=5)
        (entry,) = mock.journal
    sent = entry.request
    assert sent is not None
    assert (sent.method, sent.url, sent.body) == ("GET", mock.url(n), b"")
    assert sent.header("authorization") == f"Bearer {KEY}"
    assert sent.header("X-Trace") == "t-1"
    assert KEY[:8] not in repr(entry)
    assert KEY[-4:] in repr(sent)
    assert "request" not in entry.to_json()  # what the control API shows keeps no key


def test_an_entry_over_http_holds_no_request() -> None:
    with _live(Settings(api_keys=(KEY,), port=0)) as mock:
        n = mock.mint(verdict="refused")
        httpx.get(mock.url(n), headers={"Authorization": f"Bearer {KEY}"}, timeout=5)
        (entry,) = mock.journal
    assert entry.request is None


def _connected(server: RedisServer) -> int:
    """Clients connected to ``server``, less the one asking."""
    with redis.Redis(port=server.port) as asking:
        return len(asking.client_list()) - 1


@pytest.mark.parametrize("transport", [live_mock, respx_mock, responses_mock])
def test_a_mock_on_a_shared_state_closes_its_connections_when_it_ends(
    transport: Callable[..., AbstractContextManager[VerdictMock]],
) -> None:
    """Left to the garbage collector, its Redis connections stayed open after the block (and
    a ResourceWarning came when, and where, it ran)."""
    with redis_server() as server:
        state = StateURL.parse(server.url)
        settings = Settings(port=0, state=state, secret=transport.__name__, api_keys=(KEY,))
        with transport(settings=settings) as mock:
            mock.advance(1)  # a call to the shared state
            assert _connected(server) > 0
        assert wait_until(lambda: _connected(server) == 0, timeout=10), "still connected"
