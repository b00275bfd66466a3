"""The suite on a real staging host: dead, hung, throttling, key-echoing, badly answering targets.

Every test runs the real suite in a subprocess against a small local server that misbehaves in
one way, and reads what a pipeline's log would show.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.contract_tests.servers import (
    ALWAYS_THROTTLED,
    BROKEN,
    CONFORMING,
    KEY,
    KEY_ECHO,
    PLAIN_HTTP,
    SUITE,
    dead_port,
    hangs_mid_run,
    hung_server,
    run_suite,
    serve,
)

ROOT = Path(__file__).resolve().parents[2]


def _stopped_in_one_line(result: pytest.RunResult, expected: str) -> None:
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output
    assert not result.stdout.str().strip()  # no check ran
    (line,) = [line for line in result.stderr.str().splitlines() if line.strip()]
    assert line.startswith("ERROR: cannot reach the target ")
    assert expected in line, line


def test_a_dead_target_stops_the_run_in_one_line(pytester: pytest.Pytester) -> None:
    with dead_port() as port:
        url = f"http://127.0.0.1:{port}"
        result = pytester.runpytest_subprocess(*SUITE, "--base-url", url, "--verdict-api-key", KEY)
    _stopped_in_one_line(result, f"{url}: connection refused")


def test_a_hung_target_stops_the_run_after_one_timeout(pytester: pytest.Pytester) -> None:
    with hung_server() as hung:
        url = f"http://127.0.0.1:{hung.port}"
        result = pytester.runpytest_subprocess(
            *SUITE, "--base-url", url, "--verdict-api-key", KEY, "--verdict-request-timeout", "1"
        )
    _stopped_in_one_line(result, f"{url}: the connection opened but no answer came within 1 s")
    assert hung.accepted == 1  # one request, one timeout: the run stopped within it


def test_an_unresolvable_host_stops_the_run_in_one_line(pytester: pytest.Pytester) -> None:
    url = "https://verdict-contract-test.invalid"
    result = pytester.runpytest_subprocess(*SUITE, "--base-url", url, "--verdict-api-key", KEY)
    _stopped_in_one_line(result, f"{url}: DNS lookup failed")


def test_a_tls_failure_stops_the_run_in_one_line(pytester: pytest.Pytester) -> None:
    with hung_server(reply=PLAIN_HTTP) as plain:
        url = f"https://127.0.0.1:{plain.port}"
        result = pytester.runpytest_subprocess(*SUITE, "--base-url", url, "--verdict-api-key", KEY)
    _stopped_in_one_line(result, f"{url}: TLS failure")


def test_a_target_that_hangs_mid_run_stops_the_run(pytester: pytest.Pytester) -> None:
    result, running = run_suite(
        pytester, hangs_mid_run(calls=3, seconds=1.5), "--verdict-request-timeout", "0.5"
    )
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, output
    assert "Traceback" not in output
    assert result.parseoutcomes().get("failed") == 1  # the check that met the hang, then stop
    result.stdout.fnmatch_lines(
        [
            f"*the target stopped answering: {running.base_url}: the connection opened but no "
            "answer came within 0.5 s*"
        ]
    )


def test_a_throttling_target_is_never_a_contract_failure(pytester: pytest.Pytester) -> None:
    """Every call throttled past the budget: throttled checks, no failed one, and a failed run."""
    result, _ = run_suite(pytester, ALWAYS_THROTTLED)
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output  # nothing was verified ...
    outcomes = result.parseoutcomes()
    assert "failed" not in outcomes, output  # ... yet no contract check failed
    assert outcomes["throttled"] >= 20
    result.stdout.fnmatch_lines(
        [
            "*spec clause*passed*failed*throttled*skipped",
            "FAILED: no verdict body was verified*throttled: the target answered 429 "
            "(Retry-After: '120')*--verdict-wait-budget*",
        ]
    )


@pytest.mark.parametrize("key", [KEY, "k3y", "z"])
def test_a_key_echoed_by_the_target_is_masked(
    pytester: pytest.Pytester, tmp_path: Path, key: str
) -> None:
    """A key of any length, echoed into a body the suite quotes, is masked everywhere."""
    report = tmp_path / "report.md"
    junit = tmp_path / "junit.xml"
    result, _ = run_suite(
        pytester,
        KEY_ECHO,
        "-rA",
        "--tb=long",
        f"--junitxml={junit}",
        f"--verdict-report={report}",
        key=key,
    )
    outputs = result.stdout.str() + result.stderr.str() + junit.read_text() + report.read_text()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "received 'oops Bearer …" in outputs  # the echo is quoted, masked
    for word in outputs.replace("'", " ").replace('"', " ").split():
        assert word.strip(".,:;()[]<>") != key
    assert "$VERDICT_API_KEY" in outputs  # the replay names the variable instead


def test_each_failure_prints_a_curl_line(pytester: pytest.Pytester) -> None:
    result, running = run_suite(pytester, BROKEN["careless key comparison"])
    result.stdout.fnmatch_lines(
        [
            "*replay (export VERDICT_API_KEY first)*",
            "curl -i -H 'Authorization: Bearer '\"${VERDICT_API_KEY}0\" "
            f"'{running.base_url}/e?n=*'",
        ]
    )
    assert KEY not in result.stdout.str()


def test_one_bad_body_is_reported_once_and_the_others_still_checked(
    pytester: pytest.Pytester,
) -> None:
    variant = BROKEN["a body with a byte order mark, another breaking a rule"]
    result, running = run_suite(pytester, variant, "-rf")
    output = result.stdout.str()
    bom, rule = running.session_ids
    details = [line for line in output.splitlines() if not line.startswith("FAILED ")]
    assert sum("byte order mark" in line for line in details) == 1  # said once
    result.stdout.fnmatch_lines([f"session {bom!r}: the body starts with a byte order mark*"])
    # The other session is checked in full: its blank summary is caught.
    result.stdout.fnmatch_lines([f"*session {rule!r}*", "*summary is blank*"])


def test_a_null_is_one_violation(pytester: pytest.Pytester) -> None:
    result, _ = run_suite(pytester, BROKEN["null verdict in one session"])
    output = result.stdout.str()
    assert "/verdict: None is not of type 'string'" in output
    for unrelated in ("/contradicting_families", "/conclusive", "/signals"):
        assert unrelated not in output


def test_the_report_has_a_row_per_clause(pytester: pytest.Pytester, tmp_path: Path) -> None:
    report = tmp_path / "contract.md"
    _, running = run_suite(
        pytester, BROKEN["careless key comparison"], f"--verdict-report={report}"
    )
    text = report.read_text()
    assert f"- target: {running.base_url}" in text
    rows = [line for line in text.splitlines() if line.startswith("| §")]
    assert len(rows) == len({row.split(" | ")[0] for row in rows}) >= 8
    (auth,) = [row for row in rows if row.startswith("| §5.3 |")]
    assert "| **failed** |" in auth
    assert "test_near_miss_key_is_401[clause_5_3-one character more]: " in auth
    assert "${VERDICT_API_KEY}0" in auth
    assert KEY not in text


def _run_from_the_checkout(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "command",
    [
        ["-m", "pytest", "--pyargs", "verdict_contract.contract_tests", "--base-url"],
        ["-m", "verdict_contract.cli", "check"],
    ],
)
def test_the_staging_command_runs_only_the_suite(command: list[str]) -> None:
    """From a checkout, whose own pytest configuration also collects the project's tests."""
    with serve(CONFORMING["extra fields"]) as running:
        done = _run_from_the_checkout(
            *command,
            running.base_url,
            "--verdict-api-key",
            running.key,
            *running.session_args(),
            "-p",
            "no:cacheprovider",
            "-rA",
        )
    assert done.returncode == 0, done.stdout + done.stderr
    ran = [line for line in done.stdout.splitlines() if line.startswith("PASSED ")]
    assert len(ran) >= 20
    assert all("contract_tests/test_" in line for line in ran), ran
