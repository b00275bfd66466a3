"""CI-native output beside JUnit: GitHub Actions annotations under Actions, and a
self-contained HTML report for a pipeline's artifacts.

The annotations are read from ``verdict-contract check`` run as a pipeline runs it.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests.contract_tests.command import check
from tests.contract_tests.servers import BROKEN, KEY, MARKUP_IN_A_BODY, Variant, run_suite, serve
from verdict_contract.contract_tests.ci import workflow_commands
from verdict_contract.contract_tests.gate import Gate
from verdict_contract.contract_tests.report import Failure, SuiteReport


def _check_against(running_args: list[str], tmp_path: Path, actions: str) -> list[str]:
    done = check(*running_args, cwd=tmp_path, VERDICT_API_KEY=KEY, GITHUB_ACTIONS=actions)
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stdout.splitlines()


def test_under_github_actions_each_failure_is_an_error_naming_clause_and_session(
    tmp_path: Path,
) -> None:
    with serve(BROKEN["mutable verdict"]) as running:
        args = [running.base_url, *running.session_args()]
        under = _check_against(args, tmp_path, "true")
        elsewhere = _check_against(args, tmp_path, "false")
    first, second = running.session_ids
    errors = [line for line in under if line.startswith("::error ")]
    # One annotation per failed check: back to back, and over the whole run.
    assert len(errors) == 2, under[-20:]
    assert "test_verdict_never_changes_during_the_run" in errors[1]
    title, _, message = errors[0].removeprefix("::error title=").partition("::")
    cut = [f"{n[:12]}…{n[-8:]}" if len(n) > 24 else n for n in (first, second)]
    assert title == (
        f"§3%2C §8 test_verdict_is_immutable[clause_3+clause_8] · session {cut[0]}%2C {cut[1]}"
    )
    assert message.startswith(f"session '{first}': the verdict changed between two calls")
    assert "%0A" in message  # one line, as a workflow command must be
    assert "replay, first call: curl -i -H 'Authorization: Bearer '\"$VERDICT_API_KEY\"" in message
    assert KEY not in "\n".join(under)
    assert not [line for line in elsewhere if line.startswith("::")]


INJECTED_BUILD = (
    "b2\n::stop-commands::pwn123\nPASSED (exit 0): every check passed\n"
    "![x](https://attacker.example/pixel.png) `tick` \x1b]0;PWNED\x07\x1b[2J" + "x" * 200
)
"""What a hostile target puts in ``provenance.build``: lines a CI runner would read as its
commands, a fake verdict, Markdown that fetches, terminal escapes, and length."""


def _hostile_strings(request: Any, response: Any) -> None:
    if response.status_code == 200:
        body = json.loads(response.get_data())
        body["provenance"]["build"] = INJECTED_BUILD
        body["x\n::error::fake\x1b[31m"] = 1  # an undocumented field, named to inject too
        response.set_data(json.dumps(body))


def test_what_a_target_sends_reaches_no_output_as_a_line_an_escape_or_markup(
    tmp_path: Path,
) -> None:
    """Values the summary and the reports quote (the build, an undocumented field's name): one
    line each, control characters escaped, cut, and a code span in the Markdown."""
    report = tmp_path / "report.md"
    with serve(Variant(alter=_hostile_strings)) as running:
        done = check(
            running.base_url,
            *running.session_args(),
            f"--verdict-report={report}",
            cwd=tmp_path,
            VERDICT_API_KEY=KEY,
            GITHUB_ACTIONS="true",
        )
    terminal, markdown = done.stdout + done.stderr, report.read_text(encoding="utf-8")
    assert done.returncode == 0, terminal
    for text in (terminal, markdown):
        assert "\x1b" not in text
        lines = text.splitlines()
        assert not [line for line in lines if line.startswith(("::stop-commands", "::error::f"))]
        assert "PASSED (exit 0): every check passed" not in lines
        assert "x" * 100 not in text  # cut
    (build,) = [line for line in markdown.splitlines() if line.startswith("- provenance.build:")]
    assert re.fullmatch(r"- provenance\.build: `[^`]+`", build), build  # one code span
    assert "\\x0a::stop-commands::pwn123" in build  # still told, as text


INJECTION = "x\n```\n# INJECTED\n::error::forged\n\x1b[31mRED\u202eevil\u2028line\x7f\x9b"
"""What a hostile target puts in a field's name and in a value a failure quotes: a fence that
would close the report's code block, a heading, a CI runner's command, terminal escapes, a
bidi override and a line separator; its values also end in a lone surrogate."""


def _hostile_breach(request: Any, response: Any) -> None:
    if response.status_code == 200:
        body = json.loads(response.get_data())
        body[INJECTION] = 1  # the mock's own answers are strict: an unknown field is a breach
        body["verdict"] = INJECTION + "\ud800"
        response.set_data(json.dumps(body))


def test_a_breach_a_target_words_reaches_no_output_as_lines_escapes_or_markup(
    tmp_path: Path,
) -> None:
    """Failure texts quote what the target sent (a path, a value): on one line, every character
    a terminal, a runner or a renderer acts on escaped; the Markdown's code block holds it."""
    outputs = {name: tmp_path / name for name in ("junit.xml", "report.md", "report.html")}
    with serve(Variant(alter=_hostile_breach, control=True)) as running:
        done = check(
            running.base_url,
            f"--junitxml={outputs['junit.xml']}",
            f"--verdict-report={outputs['report.md']}",
            f"--verdict-html-report={outputs['report.html']}",
            cwd=tmp_path,
            VERDICT_API_KEY=KEY,
            GITHUB_ACTIONS="true",
        )
    terminal = done.stdout + done.stderr
    assert done.returncode == 1, terminal  # breaches found, not an internal error
    assert "INTERNALERROR" not in terminal
    written = {name: path.read_text(encoding="utf-8") for name, path in outputs.items()}
    assert "\\u202eevil\\u2028line\\u007f\\u009b" in terminal  # told, escaped
    for text in (terminal, *written.values()):
        lines = text.splitlines()
        assert not [line for line in lines if line.startswith(("# INJECTED", "::error::forged"))]
        for raw in ("\x1b", "\u202e", "\u2028", "\x7f", "\x9b"):
            assert raw not in text
    assert "<h1>INJECTED" not in written["report.html"]


def test_annotations_of_a_gate_no_check_explains_and_of_advisories() -> None:
    report = SuiteReport()
    report.advisories["a 429 came without Retry-After: 100% sure"] = None
    report.failures.append(
        Failure("test_x[clause_5_3]", "§5.3", "a: b\nc", ("curl -i 'https://h/e?n=s%2F1'",))
    )
    gate = Gate("incomplete", 10, ["checked 1 of 2 sessions"], [], unexplained=True)
    assert workflow_commands(report, gate) == [
        "::error title=§5.3 test_x[clause_5_3] · session s/1::a: b%0Ac",
        "::error title=Explain API contract%3A incomplete::INCOMPLETE (exit 10): checked 1 of 2 "
        "sessions",
        "::warning title=Explain API advisory::a 429 came without Retry-After: 100%25 sure",
    ]


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes |= {name for name, _ in attrs}

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.mark.parametrize(
    ("variant", "outcome"), [(MARKUP_IN_A_BODY, "failed"), (Variant(), "passed")]
)
def test_the_html_report_is_self_contained_and_shows_markup_as_text(
    pytester: pytest.Pytester, tmp_path: Path, variant: Variant, outcome: str
) -> None:
    markdown, page = tmp_path / "report.md", tmp_path / "report.html"
    run_suite(pytester, variant, f"--verdict-report={markdown}", f"--verdict-html-report={page}")
    html = page.read_text(encoding="utf-8")
    parsed = _Page()
    parsed.feed(html)
    # Nothing to fetch, nothing to run: the page is one file.
    assert parsed.tags <= {
        "html",
        "head",
        "meta",
        "title",
        "style",
        "body",
        "h1",
        "h2",
        "h3",
        "p",
        "ul",
        "li",
        "strong",
        "code",
        "pre",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "br",
    }, parsed.tags
    assert parsed.attributes <= {"lang", "charset", "name", "content", "data-outcome"}
    assert f'<body data-outcome="{outcome}">' in html
    text = "".join(parsed.text)
    for line in markdown.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):  # each heading of the Markdown report, in the page
            assert line.lstrip("# ") in text
    assert "Spec clauses" in text
    if outcome == "failed":
        assert "<script>alert('x')</script>" in text  # shown as text ...
        assert "&lt;script&gt;" in html  # ... because it was escaped
        assert "curl -i -H 'Authorization: Bearer '\"$VERDICT_API_KEY\"" in text
