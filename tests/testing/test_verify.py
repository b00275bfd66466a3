"""Journal checks (verify.py) on every transport: what they count, match and say when they fail."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import httpx
import pytest
import requests

from tests.helpers import KEY
from verdict_contract import VerificationError
from verdict_contract.mockserver import Settings
from verdict_contract.mockserver.store.journal import CUT, MAX_PATH_CHARS
from verdict_contract.testing.mocks import (
    VerdictMock,
    live_mock,
    reply,
    responses_mock,
    respx_mock,
)
from verdict_contract.testing.verify import short_id

Send = Callable[[str, str, dict[str, str]], int]
"""Send ``method`` to ``url`` with ``headers``; return the status."""


def _httpx(method: str, url: str, headers: dict[str, str]) -> int:
    return httpx.request(method, url, headers=headers, timeout=10).status_code


def _requests(method: str, url: str, headers: dict[str, str]) -> int:
    return requests.request(method, url, headers=headers, timeout=10).status_code


@contextmanager
def _live(server: str) -> Iterator[VerdictMock]:
    with live_mock(Settings(port=0, api_keys=(KEY,), server=server)) as mock:
        yield mock


def _in_process(kind: str) -> AbstractContextManager[VerdictMock]:
    settings = Settings(api_keys=(KEY,))
    return respx_mock(settings=settings) if kind == "respx" else responses_mock(settings=settings)


TRANSPORTS = [
    pytest.param(lambda: _live("async"), _httpx, id="async-server"),
    pytest.param(lambda: _in_process("respx"), _httpx, id="respx"),
    pytest.param(lambda: _in_process("responses"), _requests, id="responses"),
]
Transport = Callable[[], AbstractContextManager[VerdictMock]]


@pytest.mark.parametrize(("transport", "send"), TRANSPORTS)
def test_a_wrong_path_or_method_is_journaled_and_named_by_a_failed_check(
    transport: Transport, send: Send
) -> None:
    with transport() as mock:
        n = mock.mint(verdict="refused")
        assert send("POST", mock.url(n), mock.headers) == 405
        wrong_path = mock.url(n).replace("/e?", "/explain?")
        assert send("GET", wrong_path, mock.headers) == 404
        journaled = [(e.method, e.path, e.n, e.status) for e in mock.journal]
        assert journaled == [("POST", "/e", n, 405), ("GET", "/explain", n, 404)]
        assert mock.calls(n) == []  # not calls of the session: the API is GET /e
        with pytest.raises(VerificationError) as failure:
            mock.assert_called_once(n)
        message = str(failure.value)
        assert "received no request at all" not in message
        assert f"POST /e?n={short_id(n)} -> 405 (method_not_allowed; Bearer …" in message
        assert f"GET /explain?n={short_id(n)} -> 404 (not_found; Bearer …" in message
        assert KEY not in message
        assert send("GET", mock.url(n), mock.headers) == 200
        mock.assert_called_once(n)  # the same check passes once the right request came


@pytest.mark.parametrize(("transport", "send"), [TRANSPORTS[0], TRANSPORTS[2]])
def test_a_wrong_path_costs_a_bounded_entry(transport: Transport, send: Send) -> None:
    with transport() as mock:
        assert send("GET", f"{mock.base_url}/{'x' * 4000}", mock.headers) == 404
        (entry,) = mock.journal
        assert entry.path == "/" + "x" * (MAX_PATH_CHARS - 1) + CUT


def test_ids_minted_together_show_apart_in_messages() -> None:
    with respx_mock() as mock:
        first, second = mock.mint(verdict="refused"), mock.mint(verdict="refused")
        assert short_id(first) != short_id(second)  # minted tokens show their differing end
        shared = "eyJ0IjoxNzk1NDY1NzEwLjAzLCJ2Ijoi"  # ids alike for their first 32 characters
        assert short_id(shared + "cmVmdXNlZCJ9.A1") != short_id(shared + "cmVmdXNlZCJ9.B2")
        assert short_id("demo-refused") == "demo-refused"
        httpx.get(mock.url(first), headers=mock.headers)
        httpx.get(mock.url(first), headers=mock.headers)
        with pytest.raises(VerificationError) as failure:
            mock.assert_called_once(second)
        message = str(failure.value)
        assert f"for session n={short_id(second)}, received 0" in message
        assert message.count(f"GET /e?n={short_id(first)} -> 200") == 2  # each request once


def test_header_and_parameter_matchers_count_what_was_sent() -> None:
    with respx_mock(settings=Settings(api_keys=(KEY,))) as mock:
        n = mock.mint()
        traced = {**mock.headers, "X-Request-Id": "abc-1"}
        httpx.get(mock.url(n), headers=traced, params={"n": n, "lang": "en"})
        httpx.get(mock.url(n), headers={"Authorization": "Bearer other-key-0123456789"})
        assert mock.call_count(n) == 2
        assert mock.call_count(n, headers={"x-request-id": "abc-1"}) == 1  # any case of name
        assert mock.call_count(n, headers={"X-Request-Id": "abc-2"}) == 0
        assert mock.call_count(n, headers={"Authorization": f"Bearer {KEY}"}) == 1
        assert mock.call_count(n, params={"lang": "en"}) == 1
        assert mock.call_count(n, params={"lang": "fr"}) == 0
        mock.assert_called_once(
            n, headers={"Authorization": f"Bearer {KEY}"}, params={"lang": "en"}
        )
        assert mock.last_request(headers={"X-Request-Id": "abc-1"}).status == 200
        with pytest.raises(VerificationError) as failure:
            mock.assert_called(n, times=2, headers={"Authorization": f"Bearer {KEY}"})
        message = str(failure.value)
        assert "with headers {Authorization: Bearer …" in message
        assert "received 1 (2 without the header and parameter matchers)" in message
        assert KEY not in message
        assert "other-key" not in message
        assert KEY not in repr(mock.journal) + str(mock.requests)


def test_no_requests_passes_on_silence_and_fails_on_any_request() -> None:
    with respx_mock() as mock:
        mock.mint(verdict="refused")
        mock.assert_no_requests()
        httpx.delete(f"{mock.base_url}/somewhere")
        with pytest.raises(
            VerificationError, match="expected no request at all; the test sent 1 request"
        ):
            mock.assert_no_requests()


@pytest.mark.parametrize(("transport", "send"), TRANSPORTS)
def test_every_scripted_step_must_be_used(transport: Transport, send: Send) -> None:
    with transport() as mock:
        n = mock.mint(script=[429, 429, 429])
        done = mock.mint(script=["reset"])
        assert send("GET", mock.url(n), mock.headers) == 429
        with pytest.raises(VerificationError) as failure:
            mock.assert_all_scripts_used()
        message = str(failure.value)
        assert f"session n={short_id(n)}: 2 step(s) left: 429, 429" in message
        assert short_id(done) in message
        for _ in range(2):
            assert send("GET", mock.url(n), mock.headers) == 429
        with pytest.raises(VerificationError) as failure:
            mock.assert_all_scripts_used()
        assert f"session n={short_id(n)}:" not in str(failure.value)  # used up; the reset is left
        mock.reset()
        mock.assert_all_scripts_used()


def test_a_scenarios_named_scripts_are_not_the_tests_own() -> None:
    with respx_mock() as mock:  # the demo sessions carry scripts of their own
        mock.assert_all_scripts_used()


@pytest.mark.parametrize(("transport", "send"), TRANSPORTS)
def test_reply_sends_only_the_headers_it_names(transport: Transport, send: Send) -> None:
    with transport() as mock:
        n = mock.mint(script=[reply(429), 429, reply(503, headers={"X-Why": "deploy"})])
        bare = httpx.get if send is _httpx else requests.get
        first = bare(mock.url(n), headers=mock.headers)
        assert first.status_code == 429
        assert "Retry-After" not in first.headers  # reply(429): exactly what it names
        second = bare(mock.url(n), headers=mock.headers)
        assert second.headers["Retry-After"] == "1"  # a bare 429 keeps the service's default
        third = bare(mock.url(n), headers=mock.headers)
        assert (third.status_code, third.headers["X-Why"]) == (503, "deploy")
        assert "Retry-After" not in third.headers


def test_a_request_without_n_lists_its_path_alone() -> None:
    with respx_mock() as mock:
        httpx.get(f"{mock.base_url}/e")
        httpx.get(f"{mock.base_url}/health")
        with pytest.raises(VerificationError) as failure:
            mock.assert_no_requests()
        message = str(failure.value)
        assert "GET /e -> 401 (unauthorized; no Authorization)" in message
        assert "GET /health -> 404 (not_found; no Authorization)" in message


def test_a_misspelt_matcher_is_a_type_error_not_a_check_that_passes() -> None:
    with _in_process("respx") as mock:
        n = mock.mint()
        for check in (mock.calls, mock.call_count, mock.assert_not_called):
            with pytest.raises(TypeError, match=r"\['header'\]"):
                check(n, header={"x-trace": "t-1"})  # type: ignore[call-arg]


def test_a_key_given_where_a_session_id_goes_is_masked_in_the_failure() -> None:
    """Arguments swapped (``assert_called(mock.api_key)``): the message names no part of it."""
    with (
        respx_mock(settings=Settings(api_keys=(KEY,))) as mock,
        pytest.raises(VerificationError) as failure,
    ):
        mock.assert_called(KEY)
    message = str(failure.value)
    assert f"session n=…{KEY[-4:]}" in message
    assert [KEY[i : i + 8] for i in range(len(KEY) - 7) if KEY[i : i + 8] in message] == []
