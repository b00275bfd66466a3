"""The in-process mocks on a 2026 stack: httpx2 beside httpx, anyio on asyncio and trio, a call
the client cancels journaled as such, and a base URL of the test's choosing, path included."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
import pytest
import requests

from verdict_contract.core.errors import SettingsError
from verdict_contract.mockserver import Settings
from verdict_contract.testing.mocks import (
    RespxVerdictMock,
    responses_mock,
    respx_mock,
)

httpx2 = pytest.importorskip("httpx2", reason="httpx2 is not installed (the test extra has it)")

KEY = "client-stack-key-0001"
CLIENTS = {"httpx": httpx, "httpx2": httpx2}


@pytest.mark.parametrize("name", CLIENTS)
def test_sync_clients_of_both_libraries_get_answers_and_their_own_errors(name: str) -> None:
    client: Any = CLIENTS[name]
    with respx_mock(settings=Settings(api_keys=(KEY,))) as mock:
        n = mock.mint(verdict="refused", script=["reset", "truncated", {"delay_ms": 5000}])
        with pytest.raises(client.ReadError):
            client.get(mock.url(n), headers=mock.headers)
        with pytest.raises(client.RemoteProtocolError):
            client.get(mock.url(n), headers=mock.headers)
        with pytest.raises(client.ReadTimeout):  # at once: the delay outlasts the timeout
            client.get(mock.url(n), headers=mock.headers, timeout=1)
        assert client.get(mock.url(n), headers=mock.headers).json()["verdict"] == "refused"
        read = [(e.status, e.fault, e.verdict) for e in mock.journal]
    assert read == [
        (None, "reset", None),
        (200, "truncated", None),
        (None, "timeout", None),
        (200, None, "refused"),
    ]


def _run(backend: str, call: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(call, backend=backend)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("name", CLIENTS)
def test_async_clients_work_under_anyio_on_asyncio_and_trio(backend: str, name: str) -> None:
    client: Any = CLIENTS[name]
    with respx_mock(settings=Settings(api_keys=(KEY,))) as mock:
        n = mock.mint(verdict="disputed", script=[{"delay_ms": 20}, "reset"])

        async def calls() -> list[object]:
            got: list[object] = []
            async with client.AsyncClient(headers=mock.headers) as session:
                got.append((await session.get(mock.url(n))).json()["verdict"])  # after 20 ms
                try:
                    await session.get(mock.url(n))
                except client.ReadError as error:
                    got.append(type(error).__module__.split(".")[0])
            return got

        assert _run(backend, calls) == ["disputed", name]
        assert [(e.delay_ms, e.fault) for e in mock.journal] == [(20, None), (None, "reset")]


def _cancelled_by(kind: str, mock: RespxVerdictMock, client: Any, n: str) -> None:
    """One call the client cancels while the mock holds its answer (a 60 s scripted delay; no
    read timeout: only the cancellation ends the wait)."""

    async def with_anyio() -> None:
        async with client.AsyncClient(headers=mock.headers, timeout=None) as session:
            with anyio.fail_after(0.2):
                await session.get(mock.url(n))

    async def with_asyncio() -> None:
        async with client.AsyncClient(headers=mock.headers, timeout=None) as session:
            async with asyncio.timeout(0.2):
                await session.get(mock.url(n))

    def cancelled() -> None:
        if kind == "asyncio.timeout":
            asyncio.run(with_asyncio())
        else:
            _run(kind.removeprefix("anyio.fail_after on "), with_anyio)

    with pytest.raises(TimeoutError):
        cancelled()


@pytest.mark.parametrize(
    "kind", ["asyncio.timeout", "anyio.fail_after on asyncio", "anyio.fail_after on trio"]
)
@pytest.mark.parametrize("name", CLIENTS)
def test_a_call_the_client_cancels_is_journaled_as_cancelled(kind: str, name: str) -> None:
    with respx_mock(settings=Settings(api_keys=(KEY,))) as mock:
        n = mock.mint(verdict="refused", script=[{"delay_ms": 60_000}])
        _cancelled_by(kind, mock, CLIENTS[name], n)
        (entry,) = mock.journal  # written before the client's TimeoutError reached it
        assert (entry.status, entry.fault, entry.n) == (None, "cancelled", n)
        again = httpx.get(mock.url(n), headers=mock.headers)  # the step was used by that call
    assert again.json()["verdict"] == "refused"


@pytest.mark.parametrize("kind", ["asyncio", "trio"])
def test_a_call_cancelled_before_it_starts_is_cancelled_at_once(kind: str) -> None:
    """No thread ever ran it: nothing to wait for (it hung, waiting on a call never made)."""
    with respx_mock(settings=Settings(api_keys=(KEY,))) as mock:
        n = mock.mint()

        async def call() -> str:
            async with httpx.AsyncClient(headers=mock.headers) as session:
                with anyio.CancelScope() as scope:
                    scope.cancel()
                    await session.get(mock.url(n))
                    return "answered"
            return "cancelled"

        outcome: list[str] = []
        thread = threading.Thread(target=lambda: outcome.append(_run(kind, call)), daemon=True)
        thread.start()
        thread.join(60)  # a generous deadline: a hang is what this test is about
        assert outcome == ["cancelled"]
        assert list(mock.journal) == []  # never reached the mock


def test_a_call_that_is_not_cancelled_is_answered() -> None:
    with respx_mock(settings=Settings(api_keys=(KEY,))) as mock:
        n = mock.mint(script=[{"delay_ms": 10}])

        async def call() -> int:
            async with httpx.AsyncClient(headers=mock.headers) as session:
                with anyio.fail_after(60):
                    return (await session.get(mock.url(n))).status_code

        assert _run("trio", call) == 200
        assert [(e.status, e.fault) for e in mock.journal] == [(200, None)]


@pytest.mark.parametrize("base", ["https://api.example/v2", "https://api.example/v2/"])
def test_respx_answers_under_a_base_url_with_a_path(base: str) -> None:
    from respx.models import AllMockedAssertionError

    with respx_mock(base, settings=Settings(api_keys=(KEY,))) as mock:
        assert mock.base_url == "https://api.example/v2"
        n = mock.mint(verdict="insufficient")
        assert mock.url(n).startswith("https://api.example/v2/e?n=")
        for client in CLIENTS.values():
            answer: Any = client.get(mock.url(n), headers=mock.headers)
            assert answer.json()["verdict"] == "insufficient"
        with pytest.raises(AllMockedAssertionError):  # the host's root is not the API
            httpx.get(f"https://api.example/e?n={n}", headers=mock.headers)
        with pytest.raises(AllMockedAssertionError):
            httpx.get(f"https://api.example/v2x/e?n={n}", headers=mock.headers)
        assert [(e.path, e.status) for e in mock.journal] == [("/e", 200), ("/e", 200)]


def test_responses_answers_under_a_base_url_with_a_path() -> None:
    with responses_mock("http://api.example:8443/v2", settings=Settings(api_keys=(KEY,))) as mock:
        n = mock.mint(verdict="uncontradicted")
        answer = requests.get(mock.url(n), headers=mock.headers, timeout=5)
        assert answer.json()["verdict"] == "uncontradicted"
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.get(f"http://api.example:8443/e?n={n}", headers=mock.headers, timeout=5)
        assert [(e.path, e.status) for e in mock.journal] == [("/e", 200)]


@pytest.mark.parametrize(
    "bad", ["api.example/v2", "ftp://api.example", "https://", "https://a.example/v2?x=1"]
)
def test_a_base_url_that_is_no_http_url_is_refused_in_one_line(bad: str) -> None:
    for mock in (respx_mock, responses_mock):
        with pytest.raises(SettingsError, match="base_url") as caught, mock(bad):
            pass
        assert "\n" not in str(caught.value)
