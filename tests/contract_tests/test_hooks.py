"""The pytest plugin and the suite's configuration, through pytester."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from tests.contract_tests.servers import BROKEN, CONFORMING, KEY, SUITE, run_suite, serve
from tests.helpers import read_line, stop_process
from verdict_contract.contract_tests.hooks import clause_id
from verdict_contract.core.redact import KeyFinder


def _one_line_usage_error(result: pytest.RunResult, expected: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "Traceback" not in err + result.stdout.str()
    (line,) = [line for line in err.splitlines() if line.strip()]
    assert line.startswith("ERROR: ")
    assert expected in line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--base-url", "ftp://example.com", "--verdict-api-key", KEY], "is not an http(s) URL"),
        (["--base-url", "https://exa mple.com:99999", "--verdict-api-key", KEY], "not a valid URL"),
        (
            ["--base-url", "http://127.0.0.1:9/?x=1", "--verdict-api-key", KEY],
            "must not carry a query",
        ),
        (["--base-url", "http://127.0.0.1:9"], "cannot reach the target http://127.0.0.1:9: conn"),
        (
            ["--base-url", "http://10.0.0.1", "--verdict-api-key", KEY],
            "refusing to send the API key",
        ),
        # decided by the address: a *.localhost name may be looked up in the DNS
        (
            ["--base-url", "http://staging.localhost:9", "--verdict-api-key", KEY],
            "refusing to send the API key over plain http to staging.localhost (a name is "
            "looked up, and a DNS answer may send it elsewhere: 127.0.0.1 is this machine)",
        ),
        (
            ["--base-url", "http://localhost:9", "--verdict-api-key", KEY],
            "cannot reach the target http://localhost:9",
        ),
        (
            ["--base-url", "http://[::1]:9", "--verdict-api-key", KEY],
            "cannot reach the target http://[::1]:9",
        ),
        (["--verdict-session-factory", "no_such_module_x:f"], "ModuleNotFoundError"),
        (["--verdict-session-factory", "os.path"], "must look like module:callable"),
        (["--verdict-request-timeout", "soon"], "is not a number"),
        # Read as the mock reads --threads and --idle-timeout (core/parsing.py): the same words.
        (
            ["--verdict-probe-rate-limit", "0"],
            "--verdict-probe-rate-limit: '0': must be at least 1",
        ),
        (["--verdict-request-timeout", "0"], "'0': must be a positive number of seconds"),
    ],
)
def test_configuration_mistake_is_one_line(
    pytester: pytest.Pytester, args: list[str], expected: str
) -> None:
    result = pytester.runpytest_inprocess(*SUITE, *args)
    _one_line_usage_error(result, expected)
    assert KEY not in result.stdout.str() + result.stderr.str()


def test_api_key_from_the_environment(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERDICT_API_KEY", KEY)
    result = pytester.runpytest_inprocess(*SUITE, "--base-url", "http://10.0.0.1")
    _one_line_usage_error(result, "refusing to send the API key")  # got past "needs a key"


def test_live_target_without_a_key_is_one_line(pytester: pytest.Pytester) -> None:
    with serve(CONFORMING["extra fields"]) as running:
        result = pytester.runpytest_inprocess(*SUITE, "--base-url", running.base_url)
    _one_line_usage_error(result, "needs an API key: pass --verdict-api-key or set VERDICT_API_KEY")


def test_live_target_without_sessions_fails_saying_what_to_pass(
    pytester: pytest.Pytester,
) -> None:
    """Nothing verified is not a pass: the skips say which option, the run fails."""
    with serve(BROKEN["schema 8"]) as running:
        result = pytester.runpytest_subprocess(*running.target_args("-rs"))
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["FAILED (exit 1): no verdict body was verified*needs a fresh session id: pass --verdict-*"]
    )
    for reason in (
        "needs a fresh session id: pass --verdict-session-id",
        "needs an expired session id: pass --verdict-expired-session-id",
        "opt-in: pass --verdict-probe-rate-limit",
    ):
        result.stdout.fnmatch_lines([f"SKIPPED *{reason}*"])


def test_session_factory_provides_the_sessions(pytester: pytest.Pytester) -> None:
    with serve(CONFORMING["extra fields"]) as running:
        pytester.makepyfile(my_factory=f"def fresh():\n    return {running.session_ids[0]!r}\n")
        result = pytester.runpytest_subprocess(
            *running.target_args("--verdict-session-factory", "my_factory:fresh")
        )
    outcomes = result.parseoutcomes()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert outcomes["passed"] >= 15


FAILING_FACTORY = (
    "def fresh():\n"
    "    raise RuntimeError('staging said: bad key ' + {key!r}.upper() + ' \\x1b]0;pwned\\x07')\n"
)
"""A factory that fails quoting what its service said: the key, in capitals, and escapes."""


def test_a_session_factory_that_fails_stops_the_run_in_one_line(
    pytester: pytest.Pytester,
) -> None:
    with serve(CONFORMING["extra fields"]) as running:
        pytester.makepyfile(my_factory=FAILING_FACTORY.format(key=running.key))
        result = pytester.runpytest_subprocess(
            *running.target_args("--verdict-session-factory", "my_factory:fresh")
        )
    output = result.stdout.str() + result.stderr.str()
    assert '--verdict-session-factory failed: "RuntimeError: staging said: bad key ' in output
    assert "Traceback" not in output
    assert "\x1b" not in output
    assert output.count("ERROR at setup of") == 1, output  # the run stopped there
    assert not KeyFinder.of([running.key.encode()]).finds(output)


@pytest.mark.parametrize("key", [KEY, "abc+def/ghi=jkl&SECRET mid:9876"])
def test_the_key_never_reaches_any_output(
    pytester: pytest.Pytester, tmp_path: Path, key: str
) -> None:
    """Run a failing suite with every output turned up and search all of it for the key."""
    junit = tmp_path / "report.xml"
    result, _ = run_suite(
        pytester,
        BROKEN["key in query authorises"],
        "-v",
        "-rA",
        "--showlocals",
        "--tb=long",
        "--log-level=DEBUG",
        "-o",
        "log_cli=true",
        "--log-cli-level=DEBUG",
        f"--junitxml={junit}",
        key=key,
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    outputs = result.stdout.str() + result.stderr.str() + junit.read_text()
    assert "test_key_in_the_query_does_not_authorise" in outputs  # the failure is reported ...
    assert "api_key=" in outputs  # ... with the request logs and the query in view ...
    for form in (key, quote(key, safe=""), quote_plus(key)):
        assert form not in outputs  # ... and the key nowhere, in no encoding
    assert f"…{key[-4:]}" in outputs  # its last 4 characters are what identifies it


def test_junit_xml_carries_each_clause_without_warnings(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    junit = tmp_path / "report.xml"
    result, _ = run_suite(
        pytester,
        CONFORMING["charset in the content type"],
        f"--junitxml={junit}",
        "-W",
        "error::pytest.PytestWarning",
        fresh_process=True,
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    xml = junit.read_text()
    assert '<property name="spec_clause" value="§5.3" />' in xml
    assert '<property name="spec_clause" value="§9.1, §9.3" />' in xml
    assert "warnings summary" not in result.stdout.str()


def test_summary_names_target_build_schema_and_clauses(pytester: pytest.Pytester) -> None:
    result, running = run_suite(pytester, BROKEN["schema 8"])
    result.stdout.fnmatch_lines(
        [
            "*Explain API contract*",
            f"target: *{running.base_url}",
            "provenance.build: *svs-*",
            "schema: *8*",
            "spec clause*passed*failed*skipped",
        ]
    )
    result.stdout.re_match_lines([r"§9\.1, §9\.3 +0 +1 +0"])


def test_xdist_workers_target_the_ini_base_url(pytester: pytest.Pytester) -> None:
    with serve(CONFORMING["extra fields"]) as running:
        pytester.makeini(f"[pytest]\nbase_url = {running.base_url}\n")
        result = pytester.runpytest_subprocess(
            *SUITE, "--verdict-api-key", running.key, *running.session_args(), "-n", "2"
        )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines([f"target: *{running.base_url}"])


def test_plugin_is_inert_in_unrelated_runs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing_of_ours():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    assert "Explain API contract" not in result.stdout.str()
    assert "verdict-mock" not in result.stdout.str()


def test_suite_against_a_separately_started_verdict_mock(pytester: pytest.Pytester) -> None:
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "verdict_contract.mockserver",
            "--port",
            "0",
            "--log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        # Printed once the port is bound; a generous deadline, for a loaded machine.
        banner = read_line(server)
        assert banner is not None, "verdict-mock printed no banner within 120 s"
        match = re.search(r"on (http://127\.0\.0\.1:\d+)$", banner.strip())
        assert match is not None, banner
        base_url = match.group(1)
        result = pytester.runpytest_subprocess(*SUITE, "--base-url", base_url, "-rs")
    finally:
        stop_process(server)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    # Minted through the control API: the session and expiry checks run instead of skipping.
    result.stdout.fnmatch_lines([f"target: *{base_url}"])
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] >= 24
    assert outcomes.get("skipped", 0) == 1  # only the opt-in rate-limit probe


def test_added_fields_stay_warnings_where_warnings_are_errors(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nfilterwarnings = error\n")
    result, _ = run_suite(pytester, CONFORMING["extra fields"], "-W", "error", fresh_process=True)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["undocumented fields: */risk_score*"])


def test_a_project_folder_named_contract_tests_is_not_the_suite(pytester: pytest.Pytester) -> None:
    shop = pytester.path / "tests" / "contract_tests"
    shop.mkdir(parents=True)
    (shop / "test_shop.py").write_text("def test_shop():\n    assert True\n")
    result = pytester.runpytest_subprocess("tests/contract_tests", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1)
    assert "Explain API contract" not in result.stdout.str()  # the suite's plugin stayed out
    unknown = pytester.runpytest_subprocess("tests/contract_tests", "--verdict-api-key", "k")
    assert "unrecognized arguments: --verdict-api-key" in unknown.stderr.str()


@pytest.mark.parametrize(
    ("clause", "expected"),
    [
        ("§5.3", "clause_5_3"),
        ("§5.1, §5.3", "clause_5_1+clause_5_3"),
        ("§2.2-§2.4", "clause_2_2+clause_2_3+clause_2_4"),
        ("§4 rule 2, §7", "clause_4+clause_7"),
        ("§3, §3", "clause_3"),
        ("appendix B", "appendix_B"),
    ],
)
def test_a_clause_in_a_test_id_is_in_the_markers_words(clause: str, expected: str) -> None:
    assert clause_id(clause) == expected


def _collected(
    pytester: pytest.Pytester, *selection: str, suite: str = "verdict_contract.contract_tests"
) -> list[str]:
    """The node ids of the checks in ``suite`` that ``selection`` keeps (``--collect-only``)."""
    args = ("--pyargs", suite, "-p", "no:cacheprovider", "--collect-only", "-q")
    result = pytester.runpytest_inprocess(*args, *selection)
    ids = [line for line in result.stdout.lines if "::" in line]
    assert ids, result.stdout.str() + result.stderr.str()
    return ids


def _clause_part(node_id: str) -> str:
    """``…::test_x[clause_5_1+clause_5_3-no header]`` -> ``clause_5_1+clause_5_3``."""
    return node_id.partition("[")[2].rstrip("]").partition("-")[0]


AUTH = {
    "test_missing_or_invalid_key_is_401",
    "test_near_miss_key_is_401",
    "test_auth_comes_before_lookup",
    "test_the_header_name_is_read_in_any_case",
    "test_key_in_the_query_does_not_authorise",
    "test_key_in_another_header_does_not_authorise",
    "test_credential_is_never_reflected",
    "test_no_verdict_without_a_valid_key",
}


SELECTIONS: list[tuple[list[str], set[str]]] = [
    (
        ["-m", "clause_5_3"],
        {
            "test_missing_or_invalid_key_is_401",
            "test_near_miss_key_is_401",
            "test_auth_comes_before_lookup",
            "test_no_verdict_without_a_valid_key",
        },
    ),
    (["-m", "clause_5"], AUTH | {"test_no_cross_origin_invitation"}),
    (["-m", "clause_9"], {"test_schema_version"}),
    (
        ["-m", "clause_7 and not clause_8"],
        {"test_unknown_session_is_404", "test_success_is_a_json_object"},
    ),
    (["-k", "clause_2_3"], {"test_verdicts_keep_the_contract"}),  # inside §2.2-§2.4
    (
        ["-k", "clause_8"],
        {
            "test_expired_session_is_404",
            "test_session_expires_during_the_run",
            "test_rate_limit_answers_429_then_recovers",
            "test_verdict_is_immutable",
            "test_verdict_never_changes_during_the_run",
        },
    ),
    (
        ["-k", "clause_1 or clause_9_1"],
        {"test_no_cross_origin_invitation", "test_schema_version"},
    ),
    (["-k", "auth"], AUTH),
]


@pytest.mark.parametrize(
    ("selection", "expected"), SELECTIONS, ids=[" ".join(s) for s, _ in SELECTIONS]
)
def test_checks_are_selected_by_clause(
    pytester: pytest.Pytester, selection: list[str], expected: set[str]
) -> None:
    ids = _collected(pytester, *selection)
    assert {i.partition("::")[2].partition("[")[0] for i in ids} == expected
    word = selection[1]
    if " " not in word and word.startswith("clause_"):  # what was asked for is what ids show
        assert all(word in _clause_part(i) for i in ids), ids


def test_each_check_id_shows_its_clause_and_selects_it(pytester: pytest.Pytester) -> None:
    ids = _collected(pytester)
    assert len(ids) >= 30
    assert [
        i
        for i in ids
        if not re.fullmatch(r"clause_\d+(_\d+)?(\+clause_\d+(_\d+)?)*", _clause_part(i))
    ] == []
    for expected in (
        "test_auth.py::test_auth_comes_before_lookup[clause_5_3]",
        "test_auth.py::test_near_miss_key_is_401[clause_5_3-case swapped]",
        "test_verdicts.py::test_verdicts_keep_the_contract[clause_2_2+clause_2_3+clause_2_4]",
        "test_server_side.py::test_no_cross_origin_invitation[clause_1+clause_5_4]",
    ):
        assert any(i.endswith(f"/{expected}") or i == expected for i in ids), (expected, ids)
    # The id as shown selects that one check again.
    shown = "test_near_miss_key_is_401[clause_5_3-key twice]"
    (again,) = _collected(pytester, suite=f"verdict_contract.contract_tests.test_auth::{shown}")
    assert again.endswith(f"::{shown}")


def test_the_suite_page_lists_every_clause_marker(pytester: pytest.Pytester) -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "suite.md").read_text(encoding="utf-8")
    listed = re.search(r"The markers: (.*?)\.\n\n", readme, flags=re.DOTALL)
    assert listed is not None
    documented = set(re.findall(r"`(clause_\w+)`", listed.group(1)))
    shown = set()
    for node_id in _collected(pytester):
        for leaf in _clause_part(node_id).split("+"):
            shown |= {leaf, "_".join(leaf.split("_")[:2])}  # clause_5_3 implies clause_5
    assert documented == shown
