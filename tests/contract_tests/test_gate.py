"""The run's outcome as a release gate reads it: exit codes, coverage, JUnit (gate.py, report.py).

Green means every session the run was given was checked and no check failed; anything less ends
non-zero, in its own code, and shows in JUnit XML as a failing test case.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from tests.contract_tests.servers import (
    ALWAYS_THROTTLED,
    BROKEN,
    CONFORMING,
    EVERY_KIND,
    SLOW_LIMIT_REFUSED_BROKEN,
    hangs_mid_run,
    run_suite,
    serve,
)
from verdict_contract.contract_tests.gate import FAILED, INCOMPLETE, PASSED

ONLY_VERDICTS = ("-k", "test_verdicts")
"""The checks of the verdicts alone: the first call then goes to the first fresh session."""


def _junit(path: Path) -> ET.Element:
    return ET.parse(path).getroot().find("testsuite")  # type: ignore[return-value]


def _suite_properties(suite: ET.Element) -> list[tuple[str, str]]:
    return [(p.get("name", ""), p.get("value", "")) for p in suite.findall("properties/property")]


def _outcome_case(suite: ET.Element) -> ET.Element | None:
    return next((c for c in suite.iter("testcase") if c.get("name") == "run_outcome"), None)


def test_exit_codes_are_distinct() -> None:
    assert len({PASSED, FAILED, INCOMPLETE}) == 3
    assert INCOMPLETE not in {int(code) for code in pytest.ExitCode}


def test_a_run_that_checked_some_sessions_is_incomplete_not_green(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """One session per 10 s, a bug in the last (refused) session only: the run cannot pass."""
    junit = tmp_path / "junit.xml"
    result, _ = run_suite(
        pytester,
        SLOW_LIMIT_REFUSED_BROKEN,
        *ONLY_VERDICTS,
        "--verdict-wait-budget",
        "1",
        f"--junitxml={junit}",
    )
    output = result.stdout.str()
    assert result.ret == INCOMPLETE, output
    assert "failed" not in result.parseoutcomes()  # the refused bug was never reached ...
    result.stdout.fnmatch_lines(
        [
            "sessions:*checked 1 of 4",
            "INCOMPLETE (exit 10): checked 1 of 4 sessions (the others stayed throttled)",
            "*--verdict-allow-partial*",
        ]
    )  # ... and the run says so instead of passing
    suite = _junit(junit)
    assert suite.get("failures") == "1", ET.tostring(suite, encoding="unicode")
    case = _outcome_case(suite)
    assert case is not None
    assert "checked 1 of 4 sessions" in (case.find("failure").get("message") or "")  # type: ignore[union-attr]
    assert ("verdict_sessions_checked", "1 of 4") in _suite_properties(suite)
    assert ("verdict_outcome", "incomplete (exit 10)") in _suite_properties(suite)
    names = {name for name, _ in _suite_properties(suite)}
    assert {"verdict_conclusive_seen", "verdict_conclusive_never_seen"} <= names


def test_a_partial_check_passes_only_when_asked(pytester: pytest.Pytester, tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    result, _ = run_suite(
        pytester,
        SLOW_LIMIT_REFUSED_BROKEN,
        *ONLY_VERDICTS,
        "--verdict-wait-budget",
        "1",
        "--verdict-allow-partial",
        f"--junitxml={junit}",
    )
    assert result.ret == PASSED, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["PASSED (exit 0)*", "partial check accepted (--verdict-allow-partial): checked 1 of 4*"]
    )
    assert _outcome_case(_junit(junit)) is None


def test_nothing_verified_exits_1_and_fails_in_junit(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    junit = tmp_path / "junit.xml"
    result, _ = run_suite(pytester, ALWAYS_THROTTLED, f"--junitxml={junit}")
    assert result.ret == FAILED, result.stdout.str()
    suite = _junit(junit)
    assert suite.get("failures") == "1"
    case = _outcome_case(suite)
    assert case is not None
    failure = case.find("failure")
    assert failure is not None
    assert "no verdict body was verified" in (failure.get("message") or "")


def test_an_interrupted_run_exits_1_says_so_and_fails_in_junit(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    junit = tmp_path / "junit.xml"
    report = tmp_path / "report.md"
    result, running = run_suite(
        pytester,
        hangs_mid_run(calls=3, seconds=1.5),
        "--verdict-request-timeout",
        "0.5",
        f"--junitxml={junit}",
        f"--verdict-report={report}",
    )
    assert result.ret == FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "INTERRUPTED (exit 1): the run was interrupted: the target stopped answering: "
            f"{running.base_url}*"
        ]
    )
    assert report.read_text().splitlines()[2].startswith("**INTERRUPTED (exit 1): the run was")
    case = _outcome_case(_junit(junit))
    assert case is not None
    assert case.find("failure") is not None


def test_coverage_names_the_kinds_seen_and_never_seen(pytester: pytest.Pytester) -> None:
    result, _ = run_suite(pytester, CONFORMING["extra fields"])
    assert result.ret == PASSED, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "sessions:*checked 2 of 2",
            "verdict kinds:*seen contradicted, uncontradicted; never seen refused, disputed, "
            "insufficient",
            "conclusive values: seen contradicted=true, uncontradicted=false; never seen "
            "contradicted=false, refused=true, refused=false, disputed=false, insufficient=false",
        ]
    )


def test_a_missing_kind_fails_the_run_when_asked(pytester: pytest.Pytester) -> None:
    result, _ = run_suite(pytester, CONFORMING["extra fields"], "--verdict-require-every-kind")
    assert result.ret == INCOMPLETE, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "INCOMPLETE (exit 10): verdict kind(s) never seen: refused, disputed, insufficient "
            "(--verdict-require-every-kind)"
        ]
    )


def _kind_factory(pytester: pytest.Pytester, ids: dict[str, str], calls: Path) -> None:
    pytester.makepyfile(
        kind_factory=f"""
IDS = {ids!r}

def fresh(verdict):
    with open({str(calls)!r}, "a") as log:
        log.write(verdict + "\\n")
    return IDS.get(verdict)
"""
    )


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_a_factory_is_asked_for_every_kind_once_per_run(
    pytester: pytest.Pytester, tmp_path: Path, workers: list[str]
) -> None:
    calls = tmp_path / "calls.txt"
    variant = CONFORMING["every verdict kind"]
    with serve(variant) as running:
        kinds = [spec["verdict"] for spec in EVERY_KIND]
        _kind_factory(pytester, dict(zip(kinds, running.session_ids, strict=True)), calls)
        result = pytester.runpytest_subprocess(
            *running.target_args(
                "--verdict-session-factory",
                "kind_factory:fresh",
                "--verdict-require-every-kind",
                *workers,
            )
        )
    assert result.ret == PASSED, result.stdout.str()
    assert sorted(calls.read_text().split()) == sorted(kinds)  # once per kind, not per worker
    result.stdout.fnmatch_lines(
        [
            "sessions:*checked 5 of 5",
            "verdict kinds:*seen contradicted, refused, disputed, uncontradicted, insufficient; "
            "never seen none",
        ]
    )


def test_a_factory_without_a_kind_leaves_it_never_seen(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.txt"
    with serve(CONFORMING["every verdict kind"]) as running:
        kinds = [spec["verdict"] for spec in EVERY_KIND]
        ids = dict(zip(kinds, running.session_ids, strict=True))
        del ids["insufficient"]  # the factory has none of that kind: it answers None
        _kind_factory(pytester, ids, calls)
        result = pytester.runpytest_subprocess(
            *running.target_args(
                "--verdict-session-factory", "kind_factory:fresh", "--verdict-require-every-kind"
            )
        )
    assert result.ret == INCOMPLETE, result.stdout.str()
    result.stdout.fnmatch_lines(["*never seen insufficient*", "INCOMPLETE (exit 10)*insufficient*"])


def test_junit_has_each_failure_s_curl_lines_and_no_repeated_property(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    junit = tmp_path / "junit.xml"
    result, running = run_suite(pytester, BROKEN["careless key comparison"], f"--junitxml={junit}")
    assert result.ret == FAILED
    suite = _junit(junit)
    cases = list(suite.iter("testcase"))
    for case in cases:
        properties = [(p.get("name"), p.get("value")) for p in case.iter("property")]
        assert len(properties) == len(set(properties)), properties
        assert Counter(n for n, _ in properties)["spec_clause"] == 1
    failing = [c for c in cases if c.find("failure") is not None]
    assert failing
    for case in failing:
        curls = [
            p.get("value", "") for p in case.iter("property") if p.get("name") == "verdict_curl"
        ]
        assert curls, ET.tostring(case, encoding="unicode")
        assert all(c.startswith("curl -i ") for c in curls)
    (one_more,) = [c for c in failing if "one character more" in (c.get("name") or "")]
    assert any("${VERDICT_API_KEY}0" in (p.get("value") or "") for p in one_more.iter("property"))
    # The run's facts once, on the suite: not on every test case.
    run = _suite_properties(suite)
    assert run.count(("verdict_target", running.base_url)) == 1
    assert all(p.get("name") != "verdict_target" for c in cases for p in c.iter("property"))


def test_the_check_command_passes_the_exit_code_on(tmp_path: Path) -> None:
    """`verdict-contract check` exits as the suite does: 10 for an incomplete run."""
    with serve(SLOW_LIMIT_REFUSED_BROKEN) as running:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "verdict_contract.cli",
                "check",
                running.base_url,
                "--verdict-api-key",
                running.key,
                *running.session_args(),
                *ONLY_VERDICTS,
                "--verdict-wait-budget",
                "1",
                "-p",
                "no:cacheprovider",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == INCOMPLETE, done.stdout + done.stderr
    assert "INCOMPLETE (exit 10)" in done.stdout


def test_a_failing_test_beside_the_suite_keeps_the_run_failed(pytester: pytest.Pytester) -> None:
    """The gate decides for the suite; it never turns another test's failure green."""
    pytester.makepyfile(test_own="def test_own_code():\n    assert 1 + 1 == 3\n")
    with serve(CONFORMING["extra fields"]) as running:
        result = pytester.runpytest_subprocess(*running.suite_args("test_own.py"))
    assert result.ret == FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "PASSED (exit 0)*",
            "other tests of this run failed: the run exits 1",
            "FAILED test_own.py::test_own_code*",
        ]
    )
