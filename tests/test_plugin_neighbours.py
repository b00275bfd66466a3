"""The plugin beside what integrators already use: responses' own mock, pytest-httpserver.

And how its failures read in pytest's own output: the plugin's frames hidden, each request once,
the opt-in check of unused scripts at teardown.
"""

from __future__ import annotations

import pytest

BESIDE_RESPONSES = """
import pytest
import requests
import responses


@responses.activate
def test_activate_after_the_fixture(verdict_responses):
    responses.add(responses.GET, "https://api.example/ping", json={"ok": True})
    n = verdict_responses.mint(verdict="refused")
    answer = requests.get(verdict_responses.url(n), headers=verdict_responses.headers)
    assert answer.json()["verdict"] == "refused"
    assert requests.get("https://api.example/ping").json() == {"ok": True}
    verdict_responses.assert_called_once(n)
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get("https://elsewhere.example/")


@pytest.fixture
def started_first():
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add(responses.GET, "https://api.example/ping", json={"ok": 1})
        yield mock


def test_default_mock_started_before_the_fixture(started_first, verdict_responses):
    n = verdict_responses.mint(verdict="disputed")
    answer = requests.get(verdict_responses.url(n), headers=verdict_responses.headers)
    assert answer.json()["verdict"] == "disputed"
    assert requests.get("https://api.example/ping").json() == {"ok": 1}


def test_nothing_left_registered_on_the_default_mock_afterwards():
    assert responses.mock.registered() == []
"""


def test_verdict_responses_works_beside_responses_own_mock(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_beside=BESIDE_RESPONSES)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


BESIDE_HTTPSERVER = """
import httpx
import pytest
from respx.models import AllMockedAssertionError


def test_respx_lets_this_machine_through(verdict_respx, httpserver):
    httpserver.expect_request("/health").respond_with_json({"up": True})
    n = verdict_respx.mint(verdict="refused")
    assert httpx.get(verdict_respx.url(n), headers=verdict_respx.headers).status_code == 200
    assert httpx.get(httpserver.url_for("/health")).json() == {"up": True}
    with pytest.raises(AllMockedAssertionError):
        httpx.get("https://elsewhere.example/")


def test_a_route_of_the_test_still_wins_over_the_pass_through(verdict_respx, httpserver):
    route = verdict_respx.router.get(httpserver.url_for("/health")).respond(json={"mocked": 1})
    assert httpx.get(httpserver.url_for("/health")).json() == {"mocked": 1}
    assert route.called
"""


def test_verdict_respx_works_beside_pytest_httpserver(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_beside=BESIDE_HTTPSERVER)
    # the plugin, left out of the runs tests start (the root conftest), asked for again
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "pytest_httpserver")
    result.assert_outcomes(passed=2)


FAILING_CHECKS = """
import httpx
import pytest


def test_called_once(verdict_respx):
    n = verdict_respx.mint(verdict="refused")
    httpx.post(verdict_respx.url(n), headers=verdict_respx.headers)
    httpx.get(verdict_respx.url(n), headers=verdict_respx.headers)
    httpx.get(verdict_respx.url(n), headers=verdict_respx.headers)
    verdict_respx.assert_called_once(n)


@pytest.mark.verdict_mock(assert_all_scripts_used=True)
def test_unused_steps_fail_at_teardown(verdict_respx):
    n = verdict_respx.mint(script=[429, 429, 429])
    assert httpx.get(verdict_respx.url(n), headers=verdict_respx.headers).status_code == 429


@pytest.mark.verdict_mock(assert_all_scripts_used=True)
def test_used_steps_pass_at_teardown(verdict_mock):
    n = verdict_mock.mint(script=[429])
    assert httpx.get(verdict_mock.url(n), headers=verdict_mock.headers).status_code == 429


def test_unused_steps_are_fine_without_the_marker(verdict_responses):
    verdict_responses.mint(script=[429, 429, 429])
"""


def test_failures_hide_the_plugins_frames_and_list_each_request_once(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_checks=FAILING_CHECKS)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=1, errors=1)
    output = result.stdout.str()
    assert "verify.py" not in output
    assert "plugin.py" not in output
    failure = output[output.index("_ test_called_once _") : output.index("short test summary")]
    assert failure.count("POST /e?n=") == 1
    assert failure.count("-> 200 (verdict;") == 2
    assert "expected exactly 1 request(s)" in failure
    assert "received 2" in failure
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_unused_steps_fail_at_teardown*",
            "*session n=*: 2 step(s) left: 429, 429*",
        ]
    )
