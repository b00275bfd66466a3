"""Throttling on every run: the probe is never paced, and the summary, the report and
JUnit say how many 429s the run met, how long it waited on them and of what budget.

Every run is the real suite against a local service that counts what it answered.
"""

from __future__ import annotations

import re
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.contract_tests.servers import CONFORMING, LIMITED, serve
from verdict_contract.contract_tests.throttling import RunThrottling, Throttling

THROTTLED_TWICE = CONFORMING["throttled twice, Retry-After in seconds"]
LINE = re.compile(
    r"^throttling: +(\d+) answer\(s\) of 429, ([\d.]+) s waited on them of the 60 s"
    r"(?: per process)? wait budget",
    flags=re.MULTILINE,
)


def _suite_properties(junit: Path) -> dict[str, str]:
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert suite is not None
    return {p.get("name", ""): p.get("value", "") for p in suite.iter("property")}


def test_the_probe_is_not_paced_by_the_max_rate(pytester: pytest.Pytester) -> None:
    """10 requests per second for the key, the run paced to 8/1: paced, the probe would never
    meet the 429 it looks for (a false red on a correct service); unpaced, it does."""
    with serve(LIMITED) as running:
        result = pytester.runpytest_subprocess(
            *running.suite_args(
                "-k",
                "rate_limit",
                "--verdict-probe-rate-limit",
                "30",
                "--verdict-max-rate",
                "8/1",
            )
        )
        assert running.traffic is not None
        refused = running.traffic.statuses[429]
    assert result.ret == 0, result.stdout.str()
    assert result.parseoutcomes()["passed"] == 1
    assert refused >= 1  # the probe went past the limit the pace keeps the rest under


def test_a_green_run_says_how_many_429s_it_met_and_waited(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    report, junit = tmp_path / "report.md", tmp_path / "junit.xml"
    with serve(THROTTLED_TWICE) as running:
        result = pytester.runpytest_subprocess(
            *running.suite_args(f"--verdict-report={report}", f"--junitxml={junit}")
        )
        assert running.traffic is not None
        refused = running.traffic.statuses[429]
    output = result.stdout.str()
    assert result.ret == 0, output  # waited out: green, and it says what that cost
    match = LINE.search(output)
    assert match is not None, output
    met, waited = int(match[1]), float(match[2])
    assert 1 <= met <= refused  # the preflight's own 429 is no check's
    assert waited >= met  # each said Retry-After: 1
    assert f"- throttling: {met} answer(s) of 429, {waited:.1f} s waited" in report.read_text()
    properties = _suite_properties(junit)
    assert properties["verdict_throttling_429s"] == str(met)
    assert properties["verdict_throttling_waited_seconds"] == f"{waited:.1f}"
    assert properties["verdict_throttling_wait_budget"] == "60 s"


def test_a_run_without_429s_says_so_too(pytester: pytest.Pytester) -> None:
    with serve(CONFORMING["extra fields"]) as running:
        result = pytester.runpytest_subprocess(*running.suite_args("--verdict-wait-budget", "30"))
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "throttling: * 0 answer(s) of 429, 0.0 s waited on them of the 30 s wait budget "
            "(0% spent)"
        ]
    )


def test_workers_add_up_their_throttling(pytester: pytest.Pytester) -> None:
    with serve(THROTTLED_TWICE) as running:
        result = pytester.runpytest_subprocess(*running.suite_args("-n", "2"))
        assert running.traffic is not None
        refused = running.traffic.statuses[429]
    output = result.stdout.str()
    assert result.ret == 0, output
    match = LINE.search(output)
    assert match is not None, output
    met, waited = int(match[1]), float(match[2])
    assert 1 <= met <= refused  # both workers' 429s, the preflight's not among them
    assert waited >= met  # each said Retry-After: 1
    result.stdout.fnmatch_lines(
        [
            "throttling: * answer(s) of 429, * s waited on them of the 60 s per process wait budget"
            " (*% spent at most, by one of 2 processes)"
        ]
    )


def test_each_process_counts_once_its_latest_record() -> None:
    run = RunThrottling()
    run.add(Throttling("1", 1, 1.0, 10, 0.0))
    run.add(Throttling("1", 3, 4.0, 10, 0.5))  # the same process, later
    run.add(Throttling("1", 2, 2.0, 10, 0.0))  # an earlier record arriving late
    run.add(Throttling("2", 1, 1.0, 10, 0.0))
    assert (run.answered_429, run.waited, run.paced) == (4, 5.0, 0.5)
    assert run.line() == (
        "4 answer(s) of 429, 5.0 s waited on them of the 10 s per process wait budget "
        "(40% spent at most, by one of 2 processes); 0.5 s paced by --verdict-max-rate"
    )
    assert RunThrottling().line() is None
