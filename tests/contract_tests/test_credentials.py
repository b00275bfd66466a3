"""The caller's credential: never put in a URL by the suite, caught wherever a service shows it.

Every test runs the real suite over real HTTP against a service that records what it was sent,
or that gives the key away in one more place than the last.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from urllib.parse import quote, unquote, unquote_plus

import pytest

from tests.contract_tests.command import check
from tests.contract_tests.servers import (
    BROKEN,
    CONFORMING,
    CONTROLLED,
    KEY,
    KEY_ENCODED_AS_THE_VERDICT,
    KEY_ESCAPED_IN_A_200,
    STAGING_KEY,
    SUITE,
    Variant,
    run_suite,
    serve,
)
from verdict_contract.contract_tests.body import QUOTED, BodyError, strict_json
from verdict_contract.core.keyforms import base64_forms, hex_forms
from verdict_contract.core.redact import CUT, KeyFinder, Redactor

REAL_KEY = "sk-live-verdict-9f8e7d6c5b4a3210"
"""A key exported as VERDICT_API_KEY, as a pipeline would: it must stay in the header."""


def _in_a_target(key: str, targets: list[str]) -> list[str]:
    forms = {key, quote(key, safe=""), quote(key)}
    return [t for t in targets if any(f in t for f in forms) or key in unquote_plus(t)]


@pytest.mark.parametrize("kind", ["auto", "mock"])
def test_the_exported_key_never_goes_in_a_url_of_a_mock(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A verdict-mock behind a proxy: the key-in-URL checks still run, with the mock's own key."""
    monkeypatch.setenv("VERDICT_API_KEY", REAL_KEY)
    with serve(CONTROLLED, key=REAL_KEY) as running:
        result = pytester.runpytest_subprocess(
            *SUITE, "--base-url", running.base_url, "--verdict-target-kind", kind, "-rA"
        )
    assert running.traffic is not None
    targets = running.traffic.targets
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert len(targets) > 30  # the whole suite ran against it
    result.stdout.fnmatch_lines(["PASSED *test_key_in_the_query_does_not_authorise*api_key*"])
    assert any("api_key=" in t for t in targets)  # the check ran ...
    assert _in_a_target(REAL_KEY, targets) == []  # ... without the exported key


def test_a_live_target_gets_no_key_in_a_url_without_the_opt_in(pytester: pytest.Pytester) -> None:
    with serve(Variant(), key=REAL_KEY) as running:
        result = pytester.runpytest_subprocess(*running.suite_args("-rA"))
    assert running.traffic is not None
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert _in_a_target(REAL_KEY, running.traffic.targets) == []
    result.stdout.fnmatch_lines(["SKIPPED *opt-in: pass --verdict-check-key-in-url*"])


@pytest.mark.parametrize(
    ("name", "where"),
    [
        (
            "the key in every answer",
            "header x-upstream-authorization holds the whole key (so does an answer to a call "
            "without any credential)",
        ),
        ("a 401 quoting the token after 64 KiB", "body holds the whole key"),
        ("the token in the reason phrase", "the reason phrase holds the whole key"),
        ("the credential base64-encoded in a header", "header x-debug-auth holds the key base64"),
        ("the token base64url-encoded in a 401 body", "body holds the key base64-encoded"),
        ("the token less its last 4 encoded", "header x-debug-b64 holds the key base64-encoded"),
        (
            "the token in capitals or full-width",
            "header x-debug-caps (in capitals or full-width) holds the whole key",
        ),
    ],
)
def test_a_credential_shown_anywhere_is_a_breach(
    pytester: pytest.Pytester, name: str, where: str
) -> None:
    result, _ = run_suite(pytester, BROKEN[name], "-rf")
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output
    result.stdout.fnmatch_lines([f"*reflects the caller's credential (*{where}*"])
    for start in range(len(KEY) - 7):  # the report names the place, never 8 characters of it
        assert KEY[start : start + 8] not in output
    finder = KeyFinder.of([KEY.encode()])  # nor 8 characters of the key encoded in a row
    assert not finder.finds(output)


@pytest.mark.parametrize(
    "name",
    [
        "a base64 request id on every answer",
        "a C array of bytes on every answer",
        "a 401 naming the key's last 4 characters",
    ],
)
def test_a_service_that_keeps_its_credential_stays_green(
    pytester: pytest.Pytester, name: str
) -> None:
    result, _ = run_suite(pytester, CONFORMING[name], "-rA")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["PASSED *test_credential_is_never_reflected*"])


def _shown_runs(key: str, text: str) -> list[str]:
    """The runs of 8 of ``key``'s characters that ``text`` shows, read as a person or a tool
    would: as written, HTML-unescaped, percent-decoded (annotations), JSON-unescaped."""
    unescaped = re.sub(r"\\{1,2}u([0-9a-fA-F]{4})", lambda m: chr(int(m[1], 16)), text)
    readings = "\n".join({text, html.unescape(text), unquote(text), unescaped})
    return [key[i : i + 8] for i in range(len(key) - 7) if key[i : i + 8] in readings]


def _breach_reported(
    variant: Variant, tmp_path: Path, **variables: str
) -> tuple[str, dict[str, str]]:
    """``verdict-contract check`` against ``variant``, which breaches: its terminal output, and
    each report it wrote (JUnit, Markdown, HTML) by name."""
    outputs = {name: tmp_path / name for name in ("junit.xml", "report.md", "report.html")}
    with serve(variant, key=STAGING_KEY) as running:
        done = check(
            running.base_url,
            *running.session_args(),
            f"--junitxml={outputs['junit.xml']}",
            f"--verdict-report={outputs['report.md']}",
            f"--verdict-html-report={outputs['report.html']}",
            "-rf",
            cwd=tmp_path,
            VERDICT_API_KEY=STAGING_KEY,
            **variables,
        )
    terminal = done.stdout + done.stderr
    assert done.returncode == 1, terminal
    return terminal, {name: path.read_text(encoding="utf-8") for name, path in outputs.items()}


def test_a_key_reflected_json_escaped_is_caught_and_shown_in_no_output(tmp_path: Path) -> None:
    """The issue's staging: a 200 carrying the key JSON-escaped, padded so that a quote of the
    body cut at 80 characters keeps 41 of its 42. The reflection check reads the decoded JSON
    strings and fails; the terminal, the annotations, JUnit, the Markdown and the HTML report
    show no 8 characters of the key in a row."""
    terminal, written = _breach_reported(KEY_ESCAPED_IN_A_200, tmp_path, GITHUB_ACTIONS="true")
    annotations = "\n".join(line for line in terminal.splitlines() if line.startswith("::error"))
    for text in (terminal, annotations, *written.values()):
        assert "test_credential_is_never_reflected" in text
        assert "test_verdicts_keep_the_contract" in text
        assert _shown_runs(STAGING_KEY, text) == []
    reflected = "body (in its JSON strings, decoded) holds the whole key"
    assert reflected in terminal
    assert reflected in annotations
    assert all(reflected in html.unescape(text) for text in written.values())
    # The body is still quoted, masked before its cut: the padding, then the mask.
    assert '"debug": "' + "A" * 27 + "…" + STAGING_KEY[-4:] in terminal


@pytest.mark.parametrize(
    "encoding", ["base64", "hex", "hex, a byte a word", "hex, each byte escaped"]
)
def test_a_key_reflected_encoded_is_caught_and_shown_in_no_output(
    tmp_path: Path, encoding: str
) -> None:
    """The key encoded where a check quotes what it received: every output masks it."""
    terminal, written = _breach_reported(KEY_ENCODED_AS_THE_VERDICT[encoding], tmp_path)
    assert f"holds the key {encoding.partition(',')[0]}-encoded" in terminal
    forms = [*base64_forms(STAGING_KEY), *hex_forms(STAGING_KEY)]
    for text in (terminal, *written.values()):
        assert "test_verdicts_keep_the_contract" in text
        assert [form for form in forms if form in text] == []


@pytest.mark.parametrize("quoted", [7, 4], ids=["7 characters", "4 characters"])
def test_a_body_quoted_in_a_failure_shows_no_run_of_the_key_at_its_cut(quoted: int) -> None:
    """A body that is not JSON is quoted up to 80 characters, and ends with ``…`` where it is
    cut, so the run of the key the cut leaves (4 to 7 characters) is masked too."""
    key = "sk-live-0123456789abcdefghijklmnopqrstuvwx"
    body = ("x" * (QUOTED - quoted) + key + "}").encode()
    with pytest.raises(BodyError) as failed:
        strict_json(body)
    message = str(failed.value)
    assert key[:quoted] + CUT in message  # quoted as received, cut there
    redactor = Redactor()
    redactor.add(key)
    assert key[:4] not in redactor.text(message)
