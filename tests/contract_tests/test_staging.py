"""The suite on a real staging host: dead, hung, throttling, key-echoing, badly answering targets.

Every test runs the real suite in a subprocess against a small local server that misbehaves in
one way, and reads what a pipeline's log would show.
"""

from __future__ import annotations

import re
import ssl
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from xml.etree import ElementTree

import pytest
import trustme
from werkzeug.wrappers import Request, Response

from tests.contract_tests.command import check
from tests.contract_tests.servers import (
    ALWAYS_THROTTLED,
    BROKEN,
    CONFORMING,
    CONTROLLED,
    KEY,
    KEY_ECHO,
    OTHER_KEY,
    PLAIN_HTTP,
    SUITE,
    THROTTLED_RETRY_AT_ONCE,
    Variant,
    dead_port,
    hangs_mid_run,
    hung_server,
    run_suite,
    serve,
    serve_tls,
)
from tests.helpers import running
from verdict_contract.contract_tests.client import ExplainClient, Sent, Throttled
from verdict_contract.core.redact import KeyFinder, Secret
from verdict_contract.mockserver import Settings, create_app

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
        result = pytester.runpytest_inprocess(*SUITE, "--base-url", url, "--verdict-api-key", KEY)
    _stopped_in_one_line(result, f"{url}: connection refused")


def test_a_hung_target_stops_the_run_after_one_timeout(pytester: pytest.Pytester) -> None:
    with hung_server() as hung:
        url = f"http://127.0.0.1:{hung.port}"
        result = pytester.runpytest_inprocess(
            *SUITE, "--base-url", url, "--verdict-api-key", KEY, "--verdict-request-timeout", "1"
        )
    _stopped_in_one_line(result, f"{url}: the connection opened but no answer came within 1 s")
    assert hung.accepted == 1  # one request, one timeout: the run stopped within it


def test_an_unresolvable_host_stops_the_run_in_one_line(pytester: pytest.Pytester) -> None:
    url = "https://verdict-contract-test.invalid"
    result = pytester.runpytest_inprocess(*SUITE, "--base-url", url, "--verdict-api-key", KEY)
    _stopped_in_one_line(result, f"{url}: DNS lookup failed")


def test_a_tls_failure_stops_the_run_in_one_line(pytester: pytest.Pytester) -> None:
    with hung_server(reply=PLAIN_HTTP) as plain:
        url = f"https://127.0.0.1:{plain.port}"
        result = pytester.runpytest_inprocess(*SUITE, "--base-url", url, "--verdict-api-key", KEY)
    _stopped_in_one_line(result, f"{url}: TLS failure")


def test_a_target_that_hangs_mid_run_stops_the_run(pytester: pytest.Pytester) -> None:
    result, running = run_suite(
        pytester, hangs_mid_run(calls=3, seconds=1.5), "--verdict-request-timeout", "0.5"
    )
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output  # a gate reads 1, not pytest's 2
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
            "FAILED (exit 1): no verdict body was verified*throttled: the wait budget ran out: the "
            "target answered 429 (Retry-After: '120'*--verdict-wait-budget*",
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
    ran = [line for line in done.stdout.splitlines() if line.startswith("PASSED ") and "::" in line]
    assert len(ran) >= 20
    assert all("contract_tests/test_" in line for line in ran), ran


@pytest.fixture(scope="module")
def private_ca() -> trustme.CA:
    return trustme.CA()


def test_a_private_ca_is_explained_then_trusted(
    pytester: pytest.Pytester,
    tmp_path: Path,
    private_ca: trustme.CA,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A TLS failure says how to trust a private CA; both ways it names then work."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    private_ca.issue_cert("127.0.0.1").configure_cert(context)
    bundle = tmp_path / "ca.pem"
    private_ca.cert_pem.write_to_path(str(bundle))
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with serve_tls(CONFORMING["extra fields"], context) as running:
        untrusted = pytester.runpytest_subprocess(*running.suite_args())
        with_option = pytester.runpytest_subprocess(
            *running.suite_args("--verdict-ca-bundle", str(bundle))
        )
        monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
        with_variable = pytester.runpytest_subprocess(*running.suite_args())
    _stopped_in_one_line(untrusted, f"{running.base_url}: TLS failure: the certificate is not")
    untrusted.stderr.fnmatch_lines(
        ["*--verdict-ca-bundle PATH*SSL_CERT_FILE=PATH*does not read REQUESTS_CA_BUNDLE*"]
    )
    assert with_option.ret == pytest.ExitCode.OK, with_option.stdout.str()
    assert with_variable.ret == pytest.ExitCode.OK, with_variable.stdout.str()


def test_a_ca_bundle_that_is_not_a_file_is_one_line(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess(*SUITE, "--verdict-ca-bundle", "no-such.pem")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --verdict-ca-bundle 'no-such.pem' is not a file"])


def _one_usage_line(done: subprocess.CompletedProcess[str]) -> str:
    """A configuration mistake: exit 4, one ``ERROR:`` line, no check run, no breach."""
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert "breach" not in done.stdout + done.stderr
    assert not done.stdout.strip()  # no check ran
    (line,) = [line for line in done.stderr.splitlines() if line.strip()]
    assert line.startswith("ERROR: "), line
    return line.removeprefix("ERROR: ")


@pytest.mark.parametrize("option", ["--verdict-report", "--verdict-html-report"])
def test_a_report_goes_to_a_folder_made_for_it_or_is_refused_before_the_run(
    tmp_path: Path, option: str
) -> None:
    """A report path in a folder not made yet gets its folder (as ``--junitxml``); one that is a
    folder, or under a file, is one line before any check runs: not a traceback after them."""
    (tmp_path / "a-file").write_text("not a folder")
    written = tmp_path / "reports" / "today" / "contract.out"
    with serve(CONFORMING["extra fields"]) as running:
        args = (running.base_url, *running.session_args())
        done = check(*args, f"{option}={written}", cwd=tmp_path, VERDICT_API_KEY=running.key)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Explain API contract report" in written.read_text(encoding="utf-8")
        for wrong, said in [
            (tmp_path, "is a folder"),
            (tmp_path / "a-file" / "r", "cannot be made"),
        ]:
            done = check(*args, f"{option}={wrong}", cwd=tmp_path, VERDICT_API_KEY=running.key)
            assert said in _one_usage_line(done)


def test_a_mock_with_a_control_token_is_checked_with_it_or_named_in_one_line(
    tmp_path: Path,
) -> None:
    """A verdict-mock started with ``--control-token``: told as a mock all the same; without
    its token (or with another) one line says which option gives it; with it, checked whole,
    the token shown nowhere."""
    token = "QzCtl-0123456789-abcdef"
    app = create_app(Settings(port=0, control_token=Secret(token)))
    with running(app) as server:
        base = server.base_url
        without = _one_usage_line(check(base, cwd=tmp_path))
        wrong = _one_usage_line(check(base, cwd=tmp_path, VERDICT_MOCK_CONTROL_TOKEN="QzCtl-wr0n"))
        done = check(base, "-q", cwd=tmp_path, VERDICT_MOCK_CONTROL_TOKEN=token)
    assert without == (
        f"the verdict-mock at {base} asks for its control token (its "
        "--control-token): pass --verdict-control-token or set VERDICT_MOCK_CONTROL_TOKEN"
    )
    assert "refused the control token given" in wrong
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASSED (exit 0): every given session was checked" in done.stdout
    assert not KeyFinder.of([token.encode()]).finds(done.stdout + done.stderr)


def _mint_refused_quoting_the_token(request: Request) -> Response | None:
    """A control API that refuses to mint, quoting the token it was sent and terminal escapes."""
    if request.path == "/_mock/sessions":
        sent = request.headers.get("X-Mock-Token", "")
        return Response(f"token was {sent}x\n\x1b[31m::error::forged", status=500)
    return None


def test_a_mock_refusing_to_mint_is_quoted_on_one_line_without_the_token(
    tmp_path: Path,
) -> None:
    token = "QzCtl-0123456789-ghijkl"
    with serve(Variant(before=_mint_refused_quoting_the_token, control=True)) as running:
        done = check(running.base_url, cwd=tmp_path, VERDICT_MOCK_CONTROL_TOKEN=token)
    output = done.stdout + done.stderr
    assert "the mock refused to mint {}: 500 " in output
    assert output.count("ERROR at setup of") == 1, output  # the run stopped at the first
    assert "Traceback" not in output
    assert "RuntimeError" not in output
    assert not KeyFinder.of([token.encode()]).finds(output)
    assert "\x1b" not in output
    assert not [line for line in output.splitlines() if line.startswith("::error::forged")]


@pytest.mark.parametrize("kind", ["auto", "mock"])
def test_a_wrong_key_for_a_mock_says_the_key_is_rejected(tmp_path: Path, kind: str) -> None:
    """A staging key left exported, run against a verdict-mock: a mistake too, not breaches."""
    with serve(CONTROLLED) as running:
        args = (*running.session_args(), "--verdict-target-kind", kind)
        done = check(running.base_url, *args, cwd=tmp_path, VERDICT_API_KEY="a-staging-key-0000")
    line = _one_usage_line(done)
    assert line == ("the target refused the API key (401 on every call): check VERDICT_API_KEY")


@pytest.mark.parametrize(
    ("limit", "probe", "fix"),
    [("20/60", "20", "pass more than 20, or start"), ("off", "50", "pass start")],
)
def test_a_probe_that_cannot_meet_the_mocks_429_is_one_line(
    tmp_path: Path, limit: str, probe: str, fix: str
) -> None:
    """A mock allowing as many calls as the probe sends, or more: the option's mistake."""
    with serve(replace(CONTROLLED, rate_limit=limit)) as running:
        args = (*running.session_args(), "--verdict-probe-rate-limit", probe)
        done = check(running.base_url, *args, cwd=tmp_path, VERDICT_API_KEY=KEY)
    line = _one_usage_line(done)
    assert line == (
        f"--verdict-probe-rate-limit {probe} cannot meet a 429 from this verdict-mock, whose "
        f"rate limit is {limit}: {fix} the mock with a smaller --rate-limit (such as 10/60)"
    )


def test_a_probe_that_can_meet_the_mocks_429_runs(tmp_path: Path) -> None:
    """One call more than the mock's budget: the probe runs and meets the 429 (an hour's window:
    the recovery is not awaited)."""
    with serve(replace(CONTROLLED, rate_limit="20/3600")) as running:
        args = (*running.session_args(), "--verdict-probe-rate-limit", "21", "-k", "rate_limit")
        done = check(running.base_url, *args, "-rs", cwd=tmp_path, VERDICT_API_KEY=KEY)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"the service asks to wait 3[56]\d\d s", done.stdout)  # its 429, met


def test_a_wrong_key_says_the_key_is_rejected(tmp_path: Path) -> None:
    """Every session answering 401 is the key, not ten breaches of the contract."""
    wrong = "not-the-service-key-0000"
    with serve(OTHER_KEY) as running:
        done = check(running.base_url, *running.session_args(), cwd=tmp_path, VERDICT_API_KEY=wrong)
    line = _one_usage_line(done)
    assert line == ("the target refused the API key (401 on every call): check VERDICT_API_KEY")
    assert wrong[:-4] not in done.stdout + done.stderr


NOT_THE_API = {
    "a web page answering 200 everywhere": Variant(
        before=lambda request: Response(
            "<html><body>Welcome</body></html>", 200, mimetype="text/html"
        )
    ),
    "a host without /e (404 on every path)": Variant(
        before=lambda request: Response("Not Found", 404, mimetype="text/plain")
    ),
}


@pytest.mark.parametrize("name", list(NOT_THE_API))
def test_a_target_that_is_not_the_explain_api_is_a_usage_error(tmp_path: Path, name: str) -> None:
    with serve(NOT_THE_API[name]) as running:
        done = check(
            running.base_url, *running.session_args(), cwd=tmp_path, VERDICT_API_KEY=running.key
        )
    line = _one_usage_line(done)
    assert line.startswith("the target does not answer like the Explain API: GET /e answers "), line
    assert f"is {running.base_url} the API's base URL" in line


def test_the_report_opens_with_the_outcome_and_shows_each_failure_whole(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    report = tmp_path / "report.md"
    result, running = run_suite(
        pytester, BROKEN["verdict re-evaluated on every call"], f"--verdict-report={report}"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    lines = report.read_text().splitlines()
    assert lines[0] == "# Explain API contract report"
    # Back to back, and over the whole run (test_verdict_never_changes_during_the_run):
    assert lines[2] == "**FAILED (exit 1): 2 check(s) found a breach of the contract**"
    head = "\n".join(lines[:12])
    for item in ("- date: 20", "- duration: ", f"- target: {running.base_url}", "- options: "):
        assert item in head, head
    assert "`sessions given: 2`" in head
    text = "\n".join(lines)
    section = text.split("### test_verdict_is_immutable[clause_3+clause_8] (§3, §8)")[1]
    for n in running.session_ids:  # each session: its diff and its own two calls
        assert f"session {n!r}: the verdict changed between two calls" in section
        assert (
            "replay, first call: curl -i -H 'Authorization: Bearer '\"$VERDICT_API_KEY\" "
            in section
        )
        assert "replay, second call: curl -i " in section
        assert f"/e?n={n}'" in section
    assert '-    "reporting": ' in section
    assert '+    "reporting": ' in section
    assert "```bash\ncurl -i " in section  # the replay lines again, ready to paste


def test_a_throttled_check_names_what_ran_out() -> None:
    with serve(THROTTLED_RETRY_AT_ONCE) as running:
        client = ExplainClient(running.base_url, Secret(KEY), timeout=2, wait_budget=5)
        with pytest.raises(Throttled, match=r"the retry cap ran out: still 429 after 6 retries"):
            client.explain(running.session_ids[0])
        client.close()
    with serve(ALWAYS_THROTTLED) as running:
        client = ExplainClient(running.base_url, Secret(KEY), timeout=2, wait_budget=5)
        with pytest.raises(Throttled, match=r"the wait budget ran out: .*Retry-After: '120'"):
            client.explain(running.session_ids[0])
        client.close()


def test_advisories_have_their_own_section_and_fail_only_when_asked(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    report = tmp_path / "report.md"
    junit = tmp_path / "junit.xml"
    variant = CONFORMING["a stack trace and an internal address in 404 bodies"]
    result, _ = run_suite(pytester, variant, f"--verdict-report={report}", f"--junitxml={junit}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    trace = "a 404 answer's body shows a stack trace"
    address = "a 404 answer's body names an internal address ('10.2.3.4')"
    result.stdout.fnmatch_lines(
        ["advisories (not breaches of the spec*", f"  - {trace}*", f"  - {address}"]
    )
    text = report.read_text()
    assert "## Advisories" in text
    assert f"- {address}" in text
    assert f'<property name="verdict_advisory" value="{address}' in junit.read_text().replace(
        "&#x27;", "'"
    ).replace("&apos;", "'")
    strict, _ = run_suite(pytester, variant, "--verdict-fail-on-advisory")
    assert strict.ret == pytest.ExitCode.TESTS_FAILED, strict.stdout.str()
    strict.stdout.fnmatch_lines(
        ["FAILED (exit 1): 2 advisory(ies) and --verdict-fail-on-advisory was given"]
    )


@pytest.mark.parametrize(
    ("name", "advisory"),
    [
        ("the probe meets a 429 without Retry-After", "a 429 came without Retry-After*"),
        # on the mock's clock, moved by the suite's waits: 1 s, then polls of 0.25 s to 2 s
        (
            "the probe meets a Retry-After that lies",
            "Retry-After lied: announced '1', the service recovered 3.8 s later*",
        ),
    ],
)
def test_the_probe_makes_advisories_not_failures(
    pytester: pytest.Pytester, name: str, advisory: str
) -> None:
    result, _ = run_suite(pytester, CONFORMING[name])
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["advisories (not breaches of the spec*", f"  - {advisory}"])


@pytest.mark.parametrize("key", [KEY, "k-0123456789abcdef"])
@pytest.mark.parametrize(
    "name", ["401 quotes the token it was sent", "a debugging header with part of the key"]
)
def test_a_reflected_key_is_a_breach_reported_masked(
    pytester: pytest.Pytester, tmp_path: Path, key: str, name: str
) -> None:
    report = tmp_path / "report.md"
    junit = tmp_path / "junit.xml"
    result, _ = run_suite(
        pytester, BROKEN[name], "-rA", f"--verdict-report={report}", f"--junitxml={junit}", key=key
    )
    outputs = result.stdout.str() + result.stderr.str() + report.read_text() + junit.read_text()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*reflects the caller's credential (*characters of the key*"])
    for start in range(len(key) - 7):  # not 8 characters of it in a row, anywhere
        assert key[start : start + 8] not in outputs


def test_the_user_says_which_target_it_is(pytester: pytest.Pytester) -> None:
    """The mock with its control API is told by its signature; --verdict-target-kind wins."""
    with serve(CONTROLLED) as running:
        auto = pytester.runpytest_subprocess(*running.target_args("-rs"))
        live = pytester.runpytest_subprocess(
            *running.suite_args("-rs", "--verdict-target-kind", "live")
        )
    assert auto.ret == pytest.ExitCode.OK, auto.stdout.str()
    assert "needs a mock target" not in auto.stdout.str()  # minted its own sessions
    assert live.ret == pytest.ExitCode.OK, live.stdout.str()
    live.stdout.fnmatch_lines(["SKIPPED *needs a mock target that can mint a session*"])


def _junit_cases(path: Path) -> list[tuple[str, str]]:
    cases = ElementTree.parse(path).getroot().iter("testcase")
    return sorted((case.get("classname", ""), case.get("name", "")) for case in cases)


def test_junit_names_do_not_depend_on_where_the_run_starts(tmp_path: Path) -> None:
    """Test cases are named by the suite's module, wherever the run starts, under xdist too."""
    project = tmp_path / "project"
    project.mkdir()
    runs = {
        "a project folder": (project, ()),
        "the root folder": (Path("/"), ()),
        "a project folder, under xdist": (project, ("-n", "2")),
    }
    cases: dict[str, list[tuple[str, str]]] = {}
    with serve(CONFORMING["extra fields"]) as running:
        for where, (cwd, extra) in runs.items():
            junit = tmp_path / f"{len(cases)}.xml"
            done = check(
                running.base_url,
                *running.session_args(),
                "-k",
                "test_auth",
                f"--junitxml={junit}",
                *extra,
                cwd=cwd,
                VERDICT_API_KEY=running.key,
            )
            assert done.returncode == 0, done.stdout + done.stderr
            cases[where] = _junit_cases(junit)
    first = cases["a project folder"]
    assert len(first) >= 10
    assert {classname for classname, _ in first} == {"verdict_contract.contract_tests.test_auth"}
    assert (
        "verdict_contract.contract_tests.test_auth",
        "test_auth_comes_before_lookup[clause_5_3]",
    ) in first
    assert cases["the root folder"] == first
    assert cases["a project folder, under xdist"] == first


def test_a_replay_line_works_pasted_into_bash_against_a_private_ca(
    tmp_path: Path, private_ca: trustme.CA
) -> None:
    """The run trusted a private CA with --verdict-ca-bundle: its replay lines do too."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    private_ca.issue_cert("127.0.0.1").configure_cert(context)
    bundle = tmp_path / "ca.pem"
    private_ca.cert_pem.write_to_path(str(bundle))
    with serve_tls(BROKEN["careless key comparison"], context) as running:
        done = check(
            running.base_url,
            *running.session_args(),
            "--verdict-ca-bundle",
            "ca.pem",  # relative to where the run starts; the replay works from anywhere
            "-k",
            "test_near_miss_key_is_401",
            cwd=tmp_path,
            VERDICT_API_KEY=running.key,
        )
        assert done.returncode == 1, done.stdout + done.stderr
        (line, *_) = [x for x in done.stdout.splitlines() if x.startswith("curl -i ")]
        assert f"--cacert {bundle}" in line
        assert running.key not in done.stdout
        env = {"PATH": "/usr/bin:/bin", "VERDICT_API_KEY": running.key, "HOME": str(tmp_path)}
        replay = subprocess.run(
            ["bash", "-c", line], env=env, cwd="/", capture_output=True, text=True, timeout=60
        )
    assert replay.returncode == 0, replay.stderr
    assert replay.stdout.startswith("HTTP/1.1 200"), replay.stdout  # the careless service let it in


def test_a_long_value_is_cut_in_the_middle_of_a_replay_line() -> None:
    shown = "Bearer \x00$VERDICT_API_KEY\x00"  # how a call records the key
    sent = Sent("GET", "https://x.example/e?n=" + "a" * 5000, (("Authorization", shown),))
    line = sent.curl()
    assert len(line) < 400
    assert "'https://x.example/e?n=aaa" in line
    assert "…" in line
    assert line.endswith(
        "# cut in the middle: values of 5022 characters (the line sends them shorter)"
    )
    assert '"$VERDICT_API_KEY"' in line
