"""``pytest --verdict-coverage``: the answers a consumer's tests met, and their client's habits.

A pytester project uses every verdict fixture; run serially and under ``-n 2``, it reports the
same behaviours (each with its tests) and the same habits, in the table and in the JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from verdict_contract.mockserver.store.behaviours import BEHAVIOURS

CONSUMER_TESTS = """
import httpx
import pytest
import requests


def test_caches_nothing(verdict_respx):
    n = verdict_respx.mint(verdict="contradicted", conclusive=True)
    for _ in range(2):
        httpx.get(verdict_respx.url(n), headers=verdict_respx.headers)


def test_backs_off(verdict_respx):
    n = verdict_respx.mint(verdict="refused", script=[429])
    assert httpx.get(verdict_respx.url(n), headers=verdict_respx.headers).status_code == 429
    verdict_respx.advance(1)
    assert httpx.get(verdict_respx.url(n), headers=verdict_respx.headers).status_code == 200


def test_without_a_key(verdict_responses):
    n = verdict_responses.mint(verdict="disputed")
    assert requests.get(verdict_responses.url(n)).status_code == 401


@pytest.mark.verdict_mock(rate_limit="1/60")
def test_over_real_http(verdict_mock):
    with httpx.Client(headers=verdict_mock.headers) as client:
        assert client.get(verdict_mock.url("no-such-session")).status_code == 404
        assert client.get(verdict_mock.url("no-such-session")).status_code == 429


def test_no_fixture_counts_nothing():
    assert True
"""

MET = {
    "verdict.contradicted.conclusive": ("test_consumer.py::test_caches_nothing",),
    "verdict.refused.inconclusive": ("test_consumer.py::test_backs_off",),
    "ratelimit.retry_after": (
        "test_consumer.py::test_backs_off",
        "test_consumer.py::test_over_real_http",
    ),
    "auth.missing": ("test_consumer.py::test_without_a_key",),
    "notfound.unknown": ("test_consumer.py::test_over_real_http",),
}
COUNTS = {"verdict.contradicted.conclusive": 2}


def _run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    pytester.makepyfile(test_consumer=CONSUMER_TESTS)
    out = pytester.path / "coverage.json"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--verdict-coverage", f"--verdict-coverage-json={out}", *args
    )
    return result, json.loads(Path(out).read_text())


@pytest.mark.parametrize(
    "workers",
    [(), ("-n", "2", "--verdict-require-coverage=auth.missing")],
    ids=["serial", "xdist, a met behaviour required"],
)
def test_the_table_and_the_json_name_what_the_tests_met(
    pytester: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    """Under xdist, a required behaviour the tests met leaves the run passed (exit 0)."""
    result, report = _run(pytester, *workers)
    result.assert_outcomes(passed=5)
    assert result.ret == 0
    met = {b: tuple(v["tests"]) for b, v in report["behaviours"].items() if v["exercised"]}
    assert met == MET
    assert report["behaviours"]["verdict.contradicted.conclusive"]["exercised"] == 2
    assert set(report["behaviours"]) == set(BEHAVIOURS)
    assert report["never"] == [b for b in BEHAVIOURS if b not in MET]
    habits = [(h["id"], h["test"]) for h in report["habits"]]
    assert habits == [("refetch", "test_consumer.py::test_caches_nothing")]
    assert "…" in report["habits"][0]["detail"]  # the session, masked
    text = result.stdout.str()
    assert "5 of 21 behaviours of the spec met" in text
    result.stdout.re_match_lines(
        [
            r"verdict\.contradicted\.conclusive +2 +test_consumer\.py::test_caches_nothing$",
            r"auth\.wrong +0 +-$",
            r"never met \(16\): verdict\.contradicted\.inconclusive, .*fields\.extra$",
            r"  refetch +test_consumer\.py::test_caches_nothing +session …\S+: fetched again .*$",
        ],
        consecutive=False,
    )


def test_a_required_behaviour_never_met_fails_the_run(pytester: pytest.Pytester) -> None:
    result, _ = _run(pytester, "--verdict-require-coverage=auth.missing,fault.reset,slow")
    result.assert_outcomes(passed=5)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["verdict coverage: required behaviour(s) never met: fault.reset, slow"]
    )


def test_an_unknown_behaviour_id_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--verdict-require-coverage=auth.misssing")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown behaviour id(s) auth.misssing*"])


def test_without_the_options_no_hook_of_coverage_joins_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_consumer=CONSUMER_TESTS,
        test_inert="def test_inert(pytestconfig):\n"
        "    assert pytestconfig.pluginmanager.get_plugin('verdict-coverage') is None\n",
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)
    assert "verdict coverage" not in result.stdout.str()
