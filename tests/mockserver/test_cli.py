"""mockserver.cli: settings from defaults, environment and flags; the banner; a real start."""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from tests.helpers import (
    KEY,
    bearer,
    clean_environ,
    free_port,
    read_line,
    running,
    stop_process,
    wait_until,
)
from verdict_contract.core.rates import RateLimit
from verdict_contract.core.redact import Secret
from verdict_contract.mockserver import DEFAULT_API_KEY, Settings, create_app
from verdict_contract.mockserver.cli import (
    SESSION_PLACEHOLDER,
    banner,
    build_parser,
    main,
    settings_from,
)
from verdict_contract.mockserver.model.scenario import DEMO_SESSIONS

URL = "http://127.0.0.1:8080"


def settings_for(argv: list[str], environ: dict[str, str] | None = None) -> Settings:
    return settings_from(build_parser().parse_args(argv), environ or {})


@pytest.fixture
def no_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    """main() must stop before serving in these tests; if it ever got that far, fail instead."""

    def bind(app: object, host: str, port: int, threads: int) -> SimpleNamespace:
        return SimpleNamespace(effective_port=port)  # nothing is bound in these tests

    def refuse(*args: object) -> None:
        raise AssertionError("main() went on to serve")

    monkeypatch.setattr("verdict_contract.mockserver.cli.AsyncServer", bind)
    monkeypatch.setattr("verdict_contract.mockserver.cli.serve_forever", refuse)
    monkeypatch.setattr(logging, "basicConfig", lambda **kwargs: None)  # keep pytest's logging
    for name in list(os.environ):
        if name.startswith("VERDICT_MOCK_"):
            monkeypatch.delenv(name)


# --- settings_from ----------------------------------------------------------------------------


def test_defaults() -> None:
    assert settings_for([]) == Settings()


def test_environment_overrides_defaults() -> None:
    settings = settings_for(
        [],
        {
            "VERDICT_MOCK_HOST": "127.0.0.2",
            "VERDICT_MOCK_PORT": "9000",
            "VERDICT_MOCK_THREADS": "2",
            "VERDICT_MOCK_API_KEYS": " key-a, key-b ,",
            "VERDICT_MOCK_SEED": "env-seed",
            "VERDICT_MOCK_SECRET": "env-secret",
            "VERDICT_MOCK_SCENARIO": "team.yaml",
            "VERDICT_MOCK_RATE_LIMIT": "10/5",
            "VERDICT_MOCK_SESSION_LIFETIME": "60",
            "VERDICT_MOCK_LOG_LEVEL": "debug",
            "VERDICT_MOCK_ACCEPT_ANY_SESSION": "yes",
            "VERDICT_MOCK_CONTROL": "0",
            "VERDICT_MOCK_DEMO_SESSIONS": "false",
            "VERDICT_MOCK_JOURNAL_SIZE": "5",
        },
    )
    assert settings == Settings(
        host="127.0.0.2",
        port=9000,
        threads=2,
        api_keys=("key-a", "key-b"),
        seed="env-seed",
        secret="env-secret",
        scenario=Path("team.yaml"),
        rate_limit=RateLimit(10, 5.0),
        session_lifetime=60.0,
        log_level="debug",
        accept_any_session=True,
        control=False,
        demo_sessions=False,
        journal_size=5,
    )


def test_flags_override_the_environment() -> None:
    environ = {
        "VERDICT_MOCK_PORT": "9000",
        "VERDICT_MOCK_API_KEYS": "env-key",
        "VERDICT_MOCK_RATE_LIMIT": "10/5",
        "VERDICT_MOCK_ACCEPT_ANY_SESSION": "0",
        "VERDICT_MOCK_CONTROL": "1",
        "VERDICT_MOCK_SEED": "env-seed",
    }
    settings = settings_for(
        [
            "--port",
            "9100",
            "--api-key",
            "flag-key-1",
            "--api-key",
            "flag-key-2",
            "--rate-limit",
            "off",
            "--accept-any-session",
            "--no-control",
        ],
        environ,
    )
    assert settings.port == 9100
    assert settings.api_keys == ("flag-key-1", "flag-key-2")
    assert settings.rate_limit == RateLimit(0, 1.0)
    assert settings.accept_any_session is True
    assert settings.control is False
    assert settings.seed == "env-seed"  # no --seed: the environment's value stays


def test_empty_environment_values_are_ignored() -> None:
    assert settings_for([], {"VERDICT_MOCK_PORT": "", "VERDICT_MOCK_SEED": ""}) == Settings()


def test_other_environment_variables_are_ignored() -> None:
    assert settings_for([], {"PORT": "1", "VERDICT_PORT": "2", "verdict_mock_port": "3"}) == (
        Settings()
    )


# --- errors -----------------------------------------------------------------------------------


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = err.splitlines()  # the usage block is --help's, not repeated before an error
    assert line.startswith("verdict-mock: error:"), err
    return line


@pytest.mark.parametrize(
    ("argv", "environ", "problem"),
    [
        ([], {"VERDICT_MOCK_PORT": "eighty"}, "VERDICT_MOCK_PORT: 'eighty' is not a port"),
        ([], {"VERDICT_MOCK_CONTROL": "maybe"}, "VERDICT_MOCK_CONTROL: 'maybe' is not a boolean"),
        ([], {"VERDICT_MOCK_RATE_LIMIT": "fast"}, "VERDICT_MOCK_RATE_LIMIT: rate limit 'fast'"),
        ([], {"VERDICT_MOCK_API_KEYS": " , "}, "VERDICT_MOCK_API_KEYS: no value given"),
        ([], {"VERDICT_MOCK_SESSION_LIFETIME": "15m"}, "VERDICT_MOCK_SESSION_LIFETIME:"),
        (["--rate-limit", "fast"], {}, "argument --rate-limit"),
        (["--log-level", "verbose"], {}, "argument --log-level"),
        (["--port", "eighty"], {}, "argument --port"),
        (["--rate-limit", "5/0"], {}, "the window must be a number of seconds above 0"),
        (["--control-token", " "], {}, "a non-empty control token is needed"),
        (["--max-body", "0"], {}, "must be at least 1"),
        (["--journal-size", "0"], {}, "at least 1"),
        (["--threads", "0"], {}, "at least 1"),
        (["--port", "70000"], {}, "argument --port: '70000' is not a port: a whole number"),
        (["--rate-limit", "10"], {}, "argument --rate-limit: rate limit '10' needs its window"),
        (["--session-lifetime", "0"], {}, "positive number of seconds"),
        (["--api-key", ""], {}, "non-empty API key"),
    ],
)
def test_a_bad_flag_or_variable_is_a_one_line_usage_error(
    no_serving: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    environ: dict[str, str],
    problem: str,
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert problem in _one_line_error(capsys)


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--control_token", "ct-secret-0123456789"], "unrecognized arguments: --control_token …"),
        (["--apikey=ak-secret-0123456789"], "unrecognized arguments: --apikey"),
        (["--api=ak-secret-0123456789"], "unrecognized arguments: --api (did you mean --api-key"),
        (["--proxy-to", "ftp://me:pw-secret-0123456789@h"], "'…@h' is not an http(s) URL"),
        (["--proxy-to", "me:pw-secret-0123456789@h"], "'…@h' is not an http(s) URL"),
        (
            ["--state", "redis://127.0.0.1:1/0", "--state-name", "ak-secret-0123456789!"],
            "the name holds the secret or an API key",
        ),
    ],
)
def test_a_flag_error_shows_no_secret_it_was_given(
    no_serving: None, capsys: pytest.CaptureFixture[str], argv: list[str], problem: str
) -> None:
    with pytest.raises(SystemExit):
        main([*argv, "--api-key", "ak-secret-0123456789"])
    error = _one_line_error(capsys)
    assert problem in error
    assert "secret-0" not in error


def test_good_environment_value_gets_past_the_checks(
    no_serving: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VERDICT_MOCK_PORT", "8081")
    with pytest.raises(AssertionError, match="went on to serve"):
        main([])
    assert ":8081" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("sessions:\n  a: {verdict: blocked}\n", "sessions.a.verdict must be one of"),
        ("sessions: {a: [unclosed\n", "not valid YAML"),
        ("bogus: 1\n", "unknown key(s) ['bogus']"),
    ],
)
def test_bad_scenario_is_a_one_line_usage_error(
    no_serving: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    text: str,
    problem: str,
) -> None:
    scenario = tmp_path / "team.yaml"
    scenario.write_text(text)
    with pytest.raises(SystemExit) as exited:
        main(["--scenario", str(scenario)])
    assert exited.value.code == 2
    line = _one_line_error(capsys)
    assert str(scenario) in line
    assert problem in line


def test_missing_scenario_is_a_usage_error(
    no_serving: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--scenario", str(tmp_path / "absent.yaml")])
    assert exited.value.code == 2
    assert "absent.yaml: cannot read" in _one_line_error(capsys)


def test_an_open_control_api_on_the_network_gets_a_warning(
    no_serving: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(AssertionError, match="went on to serve"):
        main(["--host", "0.0.0.0", "--port", "0"])
    assert "WARNING: the control API (/_mock/) is reachable" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--host", "0.0.0.0", "--control-token", "t0ken-0123456789"],
        ["--host", "0.0.0.0", "--no-control"],
    ],
)
def test_no_warning_when_the_control_api_is_safe(
    no_serving: None, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(AssertionError, match="went on to serve"):
        main([*argv, "--port", "0"])
    captured = capsys.readouterr()
    assert "WARNING" not in captured.err
    assert "t0ken-0123456789" not in captured.out + captured.err


def test_the_control_token_and_allowed_hosts_from_flags_and_environment() -> None:
    settings = settings_for(
        ["--allowed-host", "Mock.Test", "--allowed-host", "other.test"],
        {"VERDICT_MOCK_CONTROL_TOKEN": "t0ken-0123456789"},
    )
    assert settings.allowed_hosts == ("mock.test", "other.test")
    assert settings.control_token is not None
    assert settings.control_token.reveal() == "t0ken-0123456789"
    assert "t0ken-0123456789" not in repr(settings)


# --- banner -----------------------------------------------------------------------------------


def test_banner_shows_the_default_key_in_full() -> None:
    text = banner(Settings(), URL, (DEFAULT_API_KEY,))
    lines = text.splitlines()
    assert lines[0] == f"verdict-mock serving the Explain API on {URL}"
    assert f"API key:  {DEFAULT_API_KEY}" in text
    curl = f"curl -i -H 'Authorization: Bearer {DEFAULT_API_KEY}' '{URL}/e?n=demo-contradicted'"
    assert curl in text
    assert ", ".join(DEMO_SESSIONS) in text
    assert f"{URL}/_mock/health" in text


def test_banner_masks_another_key_to_its_last_4_characters() -> None:
    text = banner(Settings(api_keys=(KEY,)), URL, (KEY,))
    assert KEY not in text
    assert KEY[:-4] not in text
    assert f"API key:  …{KEY[-4:]}" in text
    assert "Bearer $VERDICT_API_KEY" in text


def test_banner_hides_a_short_key_completely() -> None:
    text = banner(Settings(), URL, ("short-key",))
    assert "short-key" not in text
    assert "API key:  …\n" in text


def test_banner_counts_further_keys_without_showing_them() -> None:
    text = banner(Settings(), URL, (KEY, "second-secret-key-0000000"))
    assert "(+1 more)" in text
    assert "second-secret-key" not in text
    assert "0000000" not in text


def test_banner_leaves_out_what_is_turned_off() -> None:
    text = banner(Settings(control=False, demo_sessions=False), URL, (DEFAULT_API_KEY,))
    assert "demo ids" not in text
    assert "/_mock/" not in text
    assert "n=demo-" not in text  # no curl for a session that answers 404
    assert "sessions: none (--no-demo-sessions, no scenario, no control API)" in text


def test_without_demo_sessions_the_curl_fetches_a_scenario_session() -> None:
    text = banner(Settings(demo_sessions=False), URL, (DEFAULT_API_KEY,), ("blocked user",))
    assert "n=demo-" not in text
    assert _curl_line(text).endswith(f"'{URL}/e?n=blocked%20user'")


@pytest.mark.parametrize("token", [None, Secret("t0ken-0123456789")])
def test_without_any_session_the_banner_says_how_to_mint_one(token: Secret | None) -> None:
    settings = Settings(demo_sessions=False, control_token=token)
    text = banner(settings, URL, (DEFAULT_API_KEY,))
    assert "n=demo-" not in text
    line = next(line for line in text.splitlines() if "sessions:" in line)
    assert f"-d '{{}}' {URL}/_mock/sessions" in line
    assert ('"X-Mock-Token: $VERDICT_MOCK_CONTROL_TOKEN"' in line) == (token is not None)
    assert "0123456789" not in text


def test_a_configured_key_says_once_where_the_variable_comes_from() -> None:
    text = banner(Settings(api_keys=(KEY,)), URL, (KEY,))
    assert text.count("$VERDICT_API_KEY") == 2  # the curl line, and the one line saying it
    explained = next(line for line in text.splitlines() if line.startswith("  key:"))
    assert "--api-key" in explained
    assert "VERDICT_MOCK_API_KEYS" in explained
    assert "export" in explained
    public = banner(Settings(), URL, (DEFAULT_API_KEY,))
    assert "$VERDICT_API_KEY" not in public  # the public default key is printed as is
    assert "  key:" not in public


def test_the_banner_says_how_to_open_a_token_protected_dashboard() -> None:
    token = "t0ken-0123456789"
    text = banner(Settings(control_token=Secret(token)), URL, (DEFAULT_API_KEY,))
    assert token not in text
    assert f"dashboard: {URL}/_mock/?token=<the control token> once" in text
    assert "cookie" in text
    assert "?token=" not in banner(Settings(), URL, (DEFAULT_API_KEY,))


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"verdict-mock {version('verdict-contract')}\n"


def _curl_line(text: str) -> str:
    return next(line for line in text.splitlines() if "try:" in line).split("try:", 1)[1].strip()


def _pasted(line: str, key: str) -> subprocess.CompletedProcess[str]:
    """Run a banner's line in bash, as pasted by a user whose $VERDICT_API_KEY is ``key``."""
    return subprocess.run(
        ["bash", "-c", line],
        capture_output=True,
        text=True,
        timeout=20,
        env={**clean_environ(), "VERDICT_API_KEY": key},
        check=False,
    )


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl (installed in CI)")
@pytest.mark.parametrize("key", [DEFAULT_API_KEY, KEY])
def test_the_banner_curl_line_works_pasted_into_a_shell(key: str) -> None:
    with running(create_app(Settings(api_keys=(key,)))) as server:
        line = _curl_line(banner(Settings(api_keys=(key,)), server.base_url, (key,)))
        assert key == DEFAULT_API_KEY or key not in line
        done = _pasted(line, key)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("HTTP/1.1 200"), done.stdout[:200]
    assert '"verdict":"contradicted"' in done.stdout.replace(" ", "")


def test_the_banner_curl_line_splits_into_the_intended_words() -> None:
    line = _curl_line(banner(Settings(), "http://[::1]:8080", ("a key with spaces & $HOME",)))
    words = shlex.split(line)
    assert words[:3] == ["curl", "-i", "-H"]
    assert words[3] == "Authorization: Bearer $VERDICT_API_KEY"  # expanded by the shell
    assert words[4] == "http://[::1]:8080/e?n=demo-contradicted"


# --- a real start -----------------------------------------------------------------------------


@pytest.fixture
def stderr_file(tmp_path: Path) -> Path:
    return tmp_path / "stderr.txt"


def _start(argv: list[str], stderr: Path, cwd: Path) -> subprocess.Popen[str]:
    with stderr.open("w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "verdict_contract.mockserver", *argv],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=clean_environ(),
            cwd=cwd,
        )


def test_python_m_mockserver_serves_the_demo(tmp_path: Path, stderr_file: Path) -> None:
    port = free_port()
    proc = _start(["--port", str(port)], stderr_file, tmp_path)
    try:
        base = f"http://127.0.0.1:{port}"

        # stop waiting early if the child exits: the assertion below then says why
        assert wait_until(lambda: proc.poll() is not None or _answers(base), step=0.1)
        assert proc.poll() is None, stderr_file.read_text()
        first = read_line(proc)
        assert first == f"verdict-mock serving the Explain API on {base}\n"
        response = httpx.get(
            f"{base}/e", params={"n": "demo-contradicted"}, headers=bearer(DEFAULT_API_KEY)
        )
        assert response.status_code == 200
        assert response.json()["verdict"] == "contradicted"
        assert httpx.get(f"{base}/e", params={"n": "demo-contradicted"}).status_code == 401
    finally:
        stop_process(proc)


def test_banner_shows_the_bound_port_for_port_0(tmp_path: Path, stderr_file: Path) -> None:
    proc = _start(["--port", "0"], stderr_file, tmp_path)
    try:
        first = read_line(proc)
        assert first is not None, stderr_file.read_text()
        match = re.search(r"http://127\.0\.0\.1:(\d+)$", first.strip())
        assert match is not None, first
        port = int(match.group(1))
        assert port > 0
        # the port shown is the one that answers
        assert wait_until(lambda: _answers(f"http://127.0.0.1:{port}"), step=0.1)
    finally:
        stop_process(proc)


def _answers(base: str) -> bool:
    try:
        return httpx.get(f"{base}/_mock/health", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def test_bad_log_level_in_the_environment_is_a_usage_error(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "verdict_contract.mockserver", "--port", str(free_port())],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_environ({"VERDICT_MOCK_LOG_LEVEL": "verbose"}),
        cwd=tmp_path,
    )
    try:
        _, err = proc.communicate(timeout=10)
    finally:
        stop_process(proc)
    assert "Traceback" not in err
    assert proc.returncode == 2
    assert "VERDICT_MOCK_LOG_LEVEL" in err


def test_journal_size_flag_reaches_the_settings() -> None:
    args = build_parser().parse_args(["--journal-size", "5"])
    assert settings_from(args, {}).journal_size == 5


def test_sighup_reloads_the_scenario(tmp_path: Path, stderr_file: Path) -> None:
    scenario = tmp_path / "team.yaml"
    scenario.write_text("sessions:\n  aaaa: {verdict: refused}\n")
    proc = _start(["--port", "0", "--scenario", str(scenario)], stderr_file, tmp_path)
    try:
        first = read_line(proc)
        assert first is not None, stderr_file.read_text()
        base = first.strip().rsplit(" ", 1)[-1]
        stamp = scenario.stat()
        # Same size and mtime: the file watcher cannot notice, only SIGHUP can.
        scenario.write_text("sessions:\n  bbbb: {verdict: refused}\n")
        os.utime(scenario, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))

        def named() -> list[str]:
            answer = httpx.get(f"{base}/_mock/sessions", timeout=2).json()
            return [s["n"] for s in answer if not s["n"].startswith("demo-")]

        assert wait_until(lambda: named() == ["aaaa"], step=0.1)
        time.sleep(1.5)  # a poll of the watcher passes, and must not reload
        assert named() == ["aaaa"]
        proc.send_signal(signal.SIGHUP)
        assert wait_until(lambda: named() == ["bbbb"], step=0.1)
    finally:
        stop_process(proc)


def test_banner_names_the_dashboard_and_the_upstream() -> None:
    text = banner(Settings(proxy_to="https://staging.example"), URL, (DEFAULT_API_KEY,))
    assert f"dashboard: {URL}/_mock/" in text
    assert "proxying: GET /e to https://staging.example/e" in text
    assert "proxying" not in banner(Settings(), URL, (DEFAULT_API_KEY,))


UPSTREAM_KEY = "upstream-key-0123456789wxyz"


@pytest.mark.parametrize("upstream_key", [None, Secret(UPSTREAM_KEY)])
def test_the_proxy_banner_offers_no_session_the_proxy_does_not_serve(
    upstream_key: Secret | None,
) -> None:
    settings = Settings(proxy_to="https://staging.example", upstream_key=upstream_key)
    text = banner(settings, URL, (DEFAULT_API_KEY,), ("blocked-user", *DEMO_SESSIONS))
    assert "demo ids" not in text
    assert "demo-" not in text
    assert "blocked-user" not in text  # a scenario's sessions are not served either
    assert _curl_line(text).endswith(f"'{URL}/e?n={SESSION_PLACEHOLDER}'")
    session = next(line for line in text.splitlines() if line.startswith("  session:"))
    assert "one of https://staging.example's sessions" in session
    assert f"POST {URL}/_mock/sessions" not in text  # a minted session would go upstream too
    assert "wxyz" not in text  # the upstream key: not even its last characters
    if upstream_key is None:  # the client's key goes upstream: not the mock's
        assert DEFAULT_API_KEY not in text
        assert "Bearer $VERDICT_API_KEY" in _curl_line(text)
        assert "$VERDICT_API_KEY is a key of https://staging.example" in text
    else:  # the client sends a key of the mock's, the proxy its own upstream
        assert f"-H 'Authorization: Bearer {DEFAULT_API_KEY}'" in _curl_line(text)
        assert "--upstream-key upstream" in text


def test_the_proxy_banner_is_checked_against_the_banner_of_a_mock() -> None:
    """The breaking input of the test above: a mock's own banner offers its demo sessions."""
    text = banner(Settings(), URL, (DEFAULT_API_KEY,), tuple(DEMO_SESSIONS))
    assert "demo ids" in text
    assert SESSION_PLACEHOLDER not in text
    assert f"POST {URL}/_mock/sessions" in text


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl (installed in CI)")
@pytest.mark.parametrize("upstream_key", [None, Secret(KEY)])
def test_the_proxy_banner_curl_line_gets_an_upstream_session(upstream_key: Secret | None) -> None:
    """Its placeholder filled with a session of the upstream's, the line works pasted in a shell."""
    upstream_app = create_app(Settings(api_keys=(KEY,), demo_sessions=False))
    with running(upstream_app) as upstream, httpx.Client(base_url=upstream.base_url) as http:
        minted = http.post("/_mock/sessions", json={"verdict": "refused"})
        n = minted.json()["n"]
        settings = Settings(proxy_to=upstream.base_url, upstream_key=upstream_key)
        with running(create_app(settings)) as proxy:
            line = _curl_line(banner(settings, proxy.base_url, (DEFAULT_API_KEY,)))
            assert SESSION_PLACEHOLDER in line
            done = _pasted(line.replace(SESSION_PLACEHOLDER, n), KEY)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("HTTP/1.1 200"), done.stdout[:300]
    assert '"verdict":"refused"' in done.stdout.replace(" ", "")


def _banner_of_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What main() prints before it would serve (no_serving stops it there)."""
    with pytest.raises(AssertionError, match="went on to serve"):
        main(argv)
    return capsys.readouterr().out


def test_no_demo_sessions_prints_no_curl_for_a_demo_id(
    no_serving: None, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = _banner_of_main(["--no-demo-sessions", "--port", "0"], capsys)
    assert "n=demo-" not in text
    assert "mint one" in text
    scenario = tmp_path / "team.yaml"
    scenario.write_text("sessions:\n  blocked-user: {verdict: contradicted}\n")
    with_scenario = _banner_of_main(["--no-demo-sessions", "--scenario", str(scenario)], capsys)
    assert "n=demo-" not in with_scenario
    assert _curl_line(with_scenario).endswith("/e?n=blocked-user'")


def test_the_readmes_proxy_line_starts(
    no_serving: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """``VERDICT_MOCK_UPSTREAM_KEY=… verdict-mock --proxy-to URL --record staging.yaml``."""
    monkeypatch.setenv("VERDICT_MOCK_UPSTREAM_KEY", "staging-key-0123456789")
    record = tmp_path / "staging.yaml"
    argv = ["--proxy-to", "https://staging.example", "--record", str(record)]
    text = _banner_of_main(argv, capsys)
    assert "proxying: GET /e to https://staging.example" in text
    assert "staging-key-0123456789" not in text
    monkeypatch.delenv("VERDICT_MOCK_UPSTREAM_KEY")
    monkeypatch.setenv("VERDICT_MOCK_PROXY_TO", "https://staging.example")
    assert "proxying" in _banner_of_main(["--proxy-strict"], capsys)


def test_a_record_folder_that_does_not_exist_is_a_one_line_usage_error(
    no_serving: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = tmp_path / "absent" / "staging.yaml"
    with pytest.raises(SystemExit) as exited:
        main(["--proxy-to", "https://staging.example", "--record", str(record)])
    assert exited.value.code == 2
    line = _one_line_error(capsys)
    assert line.endswith(f"--record: its folder {record.parent} does not exist")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_as_the_scenario_is_a_one_line_usage_error_at_once(
    no_serving: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "team.yaml"
    os.mkfifo(fifo)
    exits: list[object] = []

    def start() -> None:
        try:
            main(["--scenario", str(fifo)])
        except SystemExit as exc:
            exits.append(exc.code)

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    thread.join(30)  # a FIFO opened for reading would wait for a writer forever
    assert not thread.is_alive(), "main() hangs on a FIFO"
    assert exits == [2]
    assert _one_line_error(capsys).endswith(
        f"{fifo}: not a regular file (a FIFO); a scenario is a YAML or JSON file"
    )


# --- a port in use ------------------------------------------------------------------------------


def _run_on_taken_port(port: int, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verdict_contract.mockserver", "--port", str(port)],
        capture_output=True,
        text=True,
        env=clean_environ(),
        cwd=tmp_path,
        timeout=60,
        check=False,
    )


def test_a_port_held_by_another_program_is_one_line_and_a_hint(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()  # it accepts, but never answers HTTP
        port = holder.getsockname()[1]
        done = _run_on_taken_port(port, tmp_path)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 2, done.stderr
    assert lines[0] == (
        f"verdict-mock: error: cannot listen on 127.0.0.1:{port}: the port is in use "
        "by another program"
    )
    assert "--port 0" in lines[1]
    assert "usage:" not in done.stderr


def test_a_port_held_by_a_verdict_mock_says_so(tmp_path: Path) -> None:
    """Even with its control API off: its 404 to /_mock/health names the server all the same."""
    with running(create_app(Settings(api_keys=(KEY,), control=False))) as other:
        port = other.effective_port
        done = _run_on_taken_port(port, tmp_path)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 2, done.stderr
    assert lines[0] == (
        f"verdict-mock: error: cannot listen on 127.0.0.1:{port}: a verdict-mock "
        f"already answers there (http://127.0.0.1:{port}/)"
    )
    assert "--port 0" in lines[1]


def test_ctrl_c_while_starting_stops_quietly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A --workers group's worker may get Ctrl-C before its loop takes the signal over
    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("verdict_contract.mockserver.cli.banner", interrupted)
    monkeypatch.setattr("verdict_contract.mockserver.cli.serve_forever", pytest.fail)
    assert main(["--port", "0"]) == 0
    assert "Traceback" not in capsys.readouterr().err
