"""``verdict-contract validate`` and ``rules``; what both commands say to a typo."""

from __future__ import annotations

import importlib.util
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bodies import contradicted
from tests.contract_tests.command import check
from verdict_contract import RULES
from verdict_contract.cli import main


def _write(tmp_path: Path, body: object) -> str:
    path = tmp_path / "body.json"
    path.write_text(json.dumps(body))
    return str(path)


def test_valid_file_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", _write(tmp_path, contradicted())]) == 0
    assert "conforms" in capsys.readouterr().out


def test_each_violation_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = contradicted()
    body.update(schema=8, summary="")
    assert main(["validate", _write(tmp_path, body)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("/schema: schema version mismatch")
    assert "[summary_is_non_empty, spec §2.2]" in lines[1]


def test_strict_flag(tmp_path: Path) -> None:
    body = contradicted()
    body["extra"] = 1
    path = _write(tmp_path, body)
    assert main(["validate", path]) == 0
    assert main(["validate", "--strict", path]) == 1


def test_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(contradicted())))
    assert main(["validate", "-q", "-"]) == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "is not JSON"),
        (b'{"a": "unterminated', "is not JSON: Unterminated string starting at line 1 column 7"),
        (b"\xff\xfe\x00", "is not UTF-8"),
    ],
)
def test_unreadable_input_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert " at at " not in err
    assert len(err.strip().splitlines()) == 1


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "absent.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_rules_lists_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()] == list(RULES)


def test_deeply_nested_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert main(["validate", str(path)]) == 2
    assert "too deeply" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"verdict-contract {version('verdict-contract')}\n"


@pytest.mark.parametrize("argv", [["check", "--help"], ["check", "https://x.example", "-h"]])
def test_check_help_is_the_suites_own_short_help(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_pytest(args: object) -> int:
        raise AssertionError("check --help started pytest")

    monkeypatch.setattr("verdict_contract.cli.run_suite", no_pytest)
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: verdict-contract check [URL] [options] [pytest options]\n")
    assert text.index("URL ") < text.index("--verdict-api-key")  # the URL argument first
    from verdict_contract.contract_tests.config import ENV, flag

    for name, variable in ENV.items():  # every option of the suite, with its variable
        assert flag(name) in text
        assert variable in text
    assert "--capture" not in text  # not pytest's own pages of options
    assert len(text.splitlines()) < 80


def test_help_after_a_double_dash_goes_to_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def record(args: list[str]) -> int:
        seen.append(list(args))
        return 0

    monkeypatch.setattr("verdict_contract.cli.run_suite", record)
    assert main(["check", "https://x.example", "--", "--help"]) == 0
    assert seen == [["--base-url", "https://x.example", "--", "--help"]]


@pytest.mark.parametrize("workers", [["-n", "2"], ["-n2"], ["-nauto"], ["--numprocesses=2"]])
def test_workers_without_xdist_are_one_line_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], workers: list[str]
) -> None:
    """``-n`` is pytest-xdist's: without it pytest's own refusal named no package to install."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        "importlib.util.find_spec",
        lambda name, *a: None if name == "xdist" else find_spec(name, *a),
    )
    monkeypatch.setattr("verdict_contract.cli.supervise", lambda *a, **k: pytest.fail("ran"))
    assert main(["check", "https://x.example", *workers]) == pytest.ExitCode.USAGE_ERROR
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "ERROR: -n needs the pytest-xdist package, which is not installed: install "
        "verdict-contract[parallel] (from a checkout: pip install '.[parallel]')"
    )


def test_a_reader_that_stops_early_gets_no_traceback() -> None:
    """``verdict-contract rules | head -1``: the reader gone before the listing is written."""
    child = subprocess.Popen(
        [sys.executable, "-m", "verdict_contract.cli", "rules"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None
    child.stdout.close()  # before the child has imported anything, let alone written
    _, err = child.communicate(timeout=60)
    assert err == b""


# --- messages that say what to do, through the real command ---------------------------------


def _command(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verdict_contract.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _mock_answer(n: str, headers: dict[str, str]) -> str:
    """The body the mock answers to ``GET /e?n=...``, as a client would capture it."""
    from verdict_contract.mockserver import Settings, create_app

    app = create_app(Settings(api_keys=("a-key-for-the-test-0001",)))
    return app.test_client().get("/e", query_string={"n": n}, headers=headers).get_data(True)


@pytest.mark.parametrize(
    ("n", "headers", "said"),
    [
        (
            "no-such-session",
            {"Authorization": "Bearer a-key-for-the-test-0001"},
            "404 session_not_found",
        ),
        ("demo-refused", {}, "401 unauthorized"),
    ],
)
def test_validate_names_an_error_answer_instead_of_listing_missing_fields(
    tmp_path: Path, n: str, headers: dict[str, str], said: str
) -> None:
    path = tmp_path / "answer.json"
    path.write_text(_mock_answer(n, headers))
    done = _command("validate", str(path))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    assert lines[0].startswith(
        f"{path}: this is an error answer ({said}), not a verdict; the service said: "
    )
    assert "required property" not in done.stdout
    assert "a-key-for-the-test-0001" not in done.stdout + done.stderr


def test_validate_judges_a_verdict_with_an_error_field_as_a_verdict(tmp_path: Path) -> None:
    body = contradicted()
    body["error"] = {"code": "x", "message": "y"}
    done = _command("validate", "--strict", _write(tmp_path, body))
    assert "error answer" not in done.stdout  # a verdict's own extra field, reported as such
    assert done.returncode == 1


def test_help_lists_every_exit_code() -> None:
    done = _command("--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    for code, meaning in [
        ("0", "every given session was checked and every check passed"),
        ("1", "a breach"),
        ("4", "a usage error"),
        ("10", "incomplete"),
    ]:
        assert re.search(rf"\b{code}\b[^.;]*{meaning}", text), (code, text)


def test_check_help_lists_every_exit_code() -> None:
    done = _command("check", "--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    for said in ["0 passed", "1 failed", "4 usage error", "10 incomplete"]:
        assert said in text, (said, text)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--verdict-sesion-id", "x"],
            "ERROR: unrecognized option --verdict-sesion-id: did you mean --verdict-session-id?",
        ),
        (["--junitxm=out.xml"], "ERROR: unrecognized option --junitxm: did you mean --junitxml?"),
        (
            ["127.0.0.1:8080"],
            "ERROR: --base-url '127.0.0.1:8080' is not an http(s) URL with a host: did you mean "
            "http://127.0.0.1:8080?",
        ),
        (
            ["staging.example"],
            "ERROR: --base-url 'staging.example' is not an http(s) URL with a host: did you mean "
            "https://staging.example?",
        ),
    ],
)
def test_check_suggests_what_was_meant(tmp_path: Path, args: list[str], line: str) -> None:
    done = check(*args, cwd=tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    assert [x for x in done.stderr.splitlines() if x.strip()] == [line]
    assert not done.stdout.strip()


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/?key=suite-key-0123456789",
        "http://127.0.0.1:9/#suite-key-0123456789",
        "htps://me:suite-key-0123456789@127.0.0.1:9",
        "htps://127.0.0.1:9/suite-key-0123456789",
    ],
)
def test_a_refused_base_url_is_shown_without_the_key(tmp_path: Path, url: str) -> None:
    done = check(url, cwd=tmp_path, VERDICT_API_KEY="suite-key-0123456789")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "ERROR: --base-url '" in done.stderr
    assert "key-0123" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--prot", "8080"], "unrecognized arguments: --prot … (did you mean --port?)"),
        (
            ["--proxy-to", "localhost:9000"],
            "'localhost:9000' is not an http(s) URL: did you mean http://localhost:9000?",
        ),
        (
            ["--proxy-to", "staging.example"],
            "'staging.example' is not an http(s) URL: did you mean https://staging.example?",
        ),
    ],
)
def test_the_mock_suggests_what_was_meant(tmp_path: Path, args: list[str], expected: str) -> None:
    mock = Path(sys.executable).with_name("verdict-mock")
    done = subprocess.run(
        [str(mock), *args], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines()[-1].endswith(expected), done.stderr
