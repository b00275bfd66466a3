"""The plugin's fixtures, run in a pytester project as an integrator would use them."""

from __future__ import annotations

import pytest

INTEGRATOR_TESTS = """
import asyncio
import httpx
import pytest
from respx.models import AllMockedAssertionError


def test_live_mock(verdict_mock):
    n = verdict_mock.mint(verdict="refused", conclusive=True)
    answer = httpx.get(verdict_mock.url(n),
                       headers={"Authorization": f"Bearer {verdict_mock.api_key}"})
    assert answer.status_code == 200
    assert answer.json()["verdict"] == "refused"
    assert [r["n"] for r in verdict_mock.requests] == [n]


def test_journal_is_cleared_between_tests(verdict_mock):
    assert verdict_mock.requests == []


def test_respx_sync_and_async(verdict_respx):
    n = verdict_respx.mint(verdict="disputed", script=[429])
    headers = {"Authorization": f"Bearer {verdict_respx.api_key}"}
    assert httpx.get(verdict_respx.url(n), headers=headers).status_code == 429

    async def call():
        async with httpx.AsyncClient() as client:
            return await client.get(verdict_respx.url(n), headers=headers)

    answer = asyncio.run(call())
    assert answer.json()["verdict"] == "disputed"
    assert verdict_respx.router.calls.call_count == 2


def test_respx_leaves_other_hosts_to_respx_defaults(verdict_respx):
    with pytest.raises(AllMockedAssertionError):
        httpx.get("https://elsewhere.invalid/")


def test_make_verdict(make_verdict):
    assert make_verdict("insufficient")["conclusive"] is False


def test_once_per_kind(verdict_kind, verdict_mock):
    n = verdict_mock.mint(verdict=verdict_kind)
    assert verdict_mock.state.lookup(n) is not None
"""


def test_fixtures_work_in_an_integrator_project(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_integration=INTEGRATOR_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=10)
    result.stdout.fnmatch_lines(
        [
            "*test_once_per_kind[[]contradicted[]] PASSED*",
            "*test_once_per_kind[[]insufficient[]] PASSED*",
        ]
    )


def test_fixtures_work_under_xdist(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_integration=INTEGRATOR_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=10)


def test_settings_fixture_can_be_overridden(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
import pytest
from verdict_contract.mockserver import Settings

@pytest.fixture(scope="session")
def verdict_mock_settings():
    return Settings(port=0, api_keys=("team-key-0123456789",), demo_sessions=False)
""")
    pytester.makepyfile("""
def test_key(verdict_mock):
    assert verdict_mock.api_key == "team-key-0123456789"
    assert "demo-refused" not in verdict_mock.state.named
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_respx_scripted_delay_past_the_timeout_is_a_read_timeout() -> None:
    import httpx
    from verdict_contract.mockserver.testing import respx_mock

    with respx_mock() as mock:
        n = mock.mint(script=[{"delay_ms": 5000}, {"delay_ms": 20}])
        headers = {"Authorization": f"Bearer {mock.api_key}"}
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(mock.url(n), headers=headers, timeout=1.0)
        assert httpx.get(mock.url(n), headers=headers, timeout=1.0).status_code == 200
        # The journal holds answered requests; the timed-out one never got its answer.
        assert [r["status"] for r in mock.requests] == [200]
