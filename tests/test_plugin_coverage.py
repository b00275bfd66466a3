"""``pytest --verdict-coverage``: the answers a consumer's tests met, and their client's habits.

A pytester project uses every verdict fixture; run serially and under ``-n 2``, it reports the
same behaviours (each with its tests) and the same habits, in the table and in the JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from verdict_contract.mockserver.coverage import BEHAVIOURS

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
    assert report["modules"]["test_consumer.py"]["requests"]["served"] == ["auth.missing"]
    assert "auth.missing" not in report["modules"]["test_consumer.py"]["requests"]["never"]
    assert "notfound.unknown" in report["modules"]["test_consumer.py"]["httpx"]["never"]
    assert "fault.timeout" in report["modules"]["test_consumer.py"]["httpx"]["never"]
    assert "fault.timeout" not in report["modules"]["test_consumer.py"]["http"]["never"]
    assert report["modules"]["test_consumer.py"]["http"]["served"] == [
        "notfound.unknown",
        "ratelimit.retry_after",
    ]
    text = result.stdout.str()
    assert "5 of 21 behaviours of the spec served" in text
    result.stdout.re_match_lines(
        [
            r"verdict\.contradicted\.conclusive +2 +test_consumer\.py::test_caches_nothing$",
            r"auth\.wrong +0 +-$",
            r"never served \(16\): verdict\.contradicted\.inconclusive, .*fields\.extra$",
            r"  test_consumer\.py \(http\): 17: verdict\.contradicted\.conclusive, .*$",
            r"  refetch +test_consumer\.py::test_caches_nothing +session …\S+: fetched again .*$",
        ],
        consecutive=False,
    )


def test_a_required_behaviour_never_met_fails_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_consumer=CONSUMER_TESTS)
    args = ("-p", "no:cacheprovider", "--verdict-require-coverage=auth.missing,fault.reset,slow")
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=5)
    assert result.ret == 1
    assert "never served (16)" in result.stdout.str()  # the table, without --verdict-coverage
    last = result.stdout.lines[-1]
    assert last == (
        "FAILED (exit 1): verdict coverage: required behaviour(s) never served: fault.reset, "
        "slow (--verdict-require-coverage)"
    )


EVERY_CORRECT_ANSWER = """
import httpx
import pytest
from verdict_contract.testing import reply

@pytest.mark.parametrize("kind", ["contradicted", "refused"])
@pytest.mark.parametrize("conclusive", [True, False])
def test_rows(verdict_respx, kind, conclusive):
    n = verdict_respx.mint(verdict=kind, conclusive=conclusive)
    assert httpx.get(verdict_respx.url(n), headers=verdict_respx.headers).status_code == 200

@pytest.mark.parametrize("kind", ["disputed", "uncontradicted", "insufficient"])
def test_other_verdicts(verdict_respx, kind):
    n = verdict_respx.mint(verdict=kind)
    assert httpx.get(verdict_respx.url(n), headers=verdict_respx.headers).status_code == 200

def test_errors(verdict_respx):
    url = verdict_respx.url
    assert httpx.get(url("x"), headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.get(url("x"), headers=verdict_respx.headers).status_code == 404
    n = verdict_respx.mint(verdict="refused")
    verdict_respx.expire(n)
    assert httpx.get(url(n), headers=verdict_respx.headers).status_code == 404
    SCRIPT
    n = verdict_respx.mint(verdict="refused", script=steps, schema=8, extra={"new": 1})
    for _ in steps:
        try:
            httpx.get(url(n), headers=verdict_respx.headers, timeout=0.5)
        except httpx.HTTPError:
            pass
    httpx.get(url(n), headers=verdict_respx.headers)
"""
SCRIPT = (
    'steps = [429, reply(429), "reset", "truncated", "malformed", {"delay_ms": 900}, '
    '{"delay_ms": 10}, 503]'
)


@pytest.mark.parametrize("per", ["run", "client", "module"])
@pytest.mark.parametrize(
    "script", [SCRIPT, SCRIPT.replace(', "truncated"', "")], ids=["all", "one missing"]
)
def test_all_is_every_answer_a_correct_client_can_meet(
    pytester: pytest.Pytester, script: str, per: str
) -> None:
    """A suite that never sends a request without a key passes ``all`` (of the run, of its one
    client, of its one module); one answer short, the gate fails and its last line names it."""
    pytester.makepyfile(test_client=EVERY_CORRECT_ANSWER.replace("SCRIPT", script))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--verdict-require-coverage=all",
        f"--verdict-require-coverage-per={per}",
    )  # fmt: skip
    result.assert_outcomes(passed=8)
    if "truncated" in script:
        assert result.ret == 0, result.stdout.str()
        result.stdout.fnmatch_lines(
            [
                "*= verdict coverage =*",
                "every behaviour --verdict-require-coverage requires was served (20)",
            ]
        )
        return
    assert result.ret == 1
    scope = {"run": "", "client": "httpx: ", "module": "test_client.py (httpx): "}[per]
    assert result.stdout.lines[-1].startswith(
        f"FAILED (exit 1): verdict coverage: required behaviour(s) never served: {scope}"
        "fault.truncated"
    )


ONE_REQUESTS_CALL = """
import requests

def test_requests_client(verdict_responses):
    n = verdict_responses.mint(verdict="refused")
    assert requests.get(verdict_responses.url(n), headers=verdict_responses.headers).ok
"""


@pytest.mark.parametrize("per", ["run", "client", "module"])
def test_the_gate_asks_each_client_what_per_says(pytester: pytest.Pytester, per: str) -> None:
    """Every answer served to the httpx client, one to the requests client: the run as a whole
    passes, saying each client was not; per client or per module, the gate fails on it."""
    pytester.makepyfile(
        test_client=EVERY_CORRECT_ANSWER.replace("SCRIPT", SCRIPT), test_other=ONE_REQUESTS_CALL
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--verdict-require-coverage=all",
        f"--verdict-require-coverage-per={per}",
    )  # fmt: skip
    result.assert_outcomes(passed=9)
    last = result.stdout.lines[-1]
    if per == "run":
        assert result.ret == 0
        result.stdout.fnmatch_lines(
            [
                "every behaviour --verdict-require-coverage requires was served (20) to the run "
                "as a whole, not to each client (requests not every one): "
                "--verdict-require-coverage-per=client asks it of each"
            ]
        )
        return
    assert result.ret == 1
    scope = "requests" if per == "client" else "test_other.py (requests)"
    assert last.startswith(
        f"FAILED (exit 1): verdict coverage: required behaviour(s) never served: {scope}: "
        "verdict.contradicted.conclusive, "
    )
    assert last.endswith(f"(--verdict-require-coverage, per {per})")
    assert "httpx" not in last  # served every one


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--verdict-coverage-json="], "--verdict-coverage-json: received an empty value"),
        (["--verdict-require-coverage="], "--verdict-require-coverage: received an empty value"),
        (["--verdict-require-coverage=,"], "--verdict-require-coverage: received an empty value"),
        (["--verdict-require-coverage-per=client"], "needs --verdict-require-coverage"),
        (["--verdict-coverage-json=a-file/x.json"], "--verdict-coverage-json: "),
    ],
)
def test_a_coverage_option_given_wrong_is_a_usage_error(
    pytester: pytest.Pytester, args: list[str], said: str
) -> None:
    pytester.makefile(".txt", **{"a-file": "not a folder"})  # a-file.txt
    (pytester.path / "a-file.txt").rename(pytester.path / "a-file")
    pytester.makepyfile(test_consumer=CONSUMER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert said in result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_the_json_goes_to_a_folder_made_for_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_consumer=CONSUMER_TESTS)
    out = pytester.path / "reports" / "coverage" / "verdict.json"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--verdict-coverage-json={out}"
    )
    result.assert_outcomes(passed=5)
    assert json.loads(out.read_text())["behaviours"]["auth.missing"]["exercised"] == 1


OVER_HTTP = """
import httpx

def test_over_http(verdict_mock):
    assert httpx.get(verdict_mock.url("x"), headers=verdict_mock.headers).status_code == 404
"""
IN_PROCESS = """
import httpx

def test_in_process(verdict_respx):
    assert httpx.get(verdict_respx.url("x"), headers=verdict_respx.headers).status_code == 404
"""


@pytest.mark.parametrize(
    ("modules", "require", "timeout_required"),
    [
        ({"test_http": OVER_HTTP}, "all", False),
        ({"test_http": OVER_HTTP}, "all,fault.timeout", True),
        ({"test_http": OVER_HTTP, "test_inprocess": IN_PROCESS}, "all", True),
    ],
)
def test_all_asks_no_timeout_of_a_run_over_http_only(
    pytester: pytest.Pytester, modules: dict[str, str], require: str, timeout_required: bool
) -> None:
    """Over real HTTP the mock cannot know a client gave up: ``all`` does not require
    ``fault.timeout`` of a run whose tests all used ``verdict_mock``, nor lists it for them."""
    pytester.makepyfile(**modules)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--verdict-require-coverage={require}"
    )
    assert result.ret == 1
    last = result.stdout.lines[-1]
    assert "notfound.expired" in last  # the gate fails on what was never served
    assert ("fault.timeout" in last) is timeout_required
    per_module = {
        line.split(":")[0].strip(): line for line in result.stdout.lines if ".py (" in line
    }
    if len(modules) > 1:  # listed per module and client: what each could meet and did not
        assert "fault.timeout" not in per_module["test_http.py (http)"]
        assert "fault.timeout" in per_module["test_inprocess.py (httpx)"]


def test_an_unknown_behaviour_id_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--verdict-require-coverage=auth.misssing")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*unknown behaviour id(s) auth.misssing (did you mean auth.missing?)*"]
    )


def test_without_the_options_no_hook_of_coverage_joins_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_consumer=CONSUMER_TESTS,
        test_inert="def test_inert(pytestconfig):\n"
        "    assert pytestconfig.pluginmanager.get_plugin('verdict-coverage') is None\n",
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)
    assert "verdict coverage" not in result.stdout.str()
