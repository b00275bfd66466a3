"""The closing summary and Markdown report: outcome, coverage, clauses, failures, advisories.

Tests carry their clause, the sessions they read and what they noticed as ``user_properties``,
which cross pytest-xdist to the controller. There the records are gathered once: the summary,
the Markdown report (``--verdict-report``) and the JUnit XML's suite-level properties all read
them. A JUnit test case keeps only what is its own (its clause, its replay lines, throttled).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from verdict_contract.core.redact import printable
from verdict_contract.core.spec import VERDICT_OUTCOMES, VERDICTS

from .htmlreport import render
from .throttling import THROTTLING, RunThrottling, Throttling

CLAUSE = "spec_clause"
TARGET = "verdict_target"
BUILD = "verdict_build"
SCHEMA = "verdict_schema"
UNDOCUMENTED = "verdict_undocumented_field"
CURL = "verdict_curl"
OUTCOME = "verdict_outcome"
"""Set to ``throttled`` on a report whose check ended because the target kept answering 429."""
CHECKS_VERDICTS = "verdict_checks_bodies"
"""Marks the reports of checks that read verdict bodies (for "nothing verified")."""
VERIFIED = "verdict_bodies_checked"
SESSION = "verdict_session"
"""One fresh session's coverage, as JSON: its id, whether it was checked, the kind it had."""
INTERRUPTED = "verdict_interrupted"
"""Why the run stopped early (the target stopped answering)."""
ADVISORY = "verdict_advisory"
"""Something that breaks no clause but a reviewer wants to see."""

PER_TEST = frozenset({CLAUSE, CURL, OUTCOME})
"""The properties a JUnit test case keeps; the others are the run's, written once."""

OUTCOMES = ("passed", "failed", "throttled", "skipped")
MAX_EVIDENCE = 5


def outcome_of(report: pytest.TestReport) -> str:
    if dict(report.user_properties).get(OUTCOME) == "throttled":
        return "throttled"
    return "failed" if report.failed else "skipped" if report.skipped else "passed"


def failure_text(report: pytest.TestReport) -> str:
    """Every line of a check's failure (or its skip reason), without the traceback."""
    if isinstance(report.longrepr, tuple):  # a skip: (path, line, "Skipped: reason")
        return report.longrepr[2].removeprefix("Skipped: ")
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    return text.removeprefix("Failed: ").removeprefix("AssertionError: ").strip()


def _first_line(report: pytest.TestReport) -> str:
    lines = [line.strip() for line in failure_text(report).splitlines() if line.strip()]
    return lines[0][:300] if lines else ""


class ReportPaths(NamedTuple):
    """Where the run's report goes: Markdown, HTML (either may be None)."""

    markdown: str | None
    html: str | None


@dataclass
class ClauseRow:
    outcomes: Counter[str] = field(default_factory=Counter)
    evidence: list[str] = field(default_factory=list)
    curl: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Failure:
    """A failed check as the report lists it: all its lines and its own replay."""

    check: str
    clause: str
    text: str
    curl: tuple[str, ...]


@dataclass
class SuiteReport:
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    targets: set[str] = field(default_factory=set)
    builds: set[str] = field(default_factory=set)
    schemas: set[str] = field(default_factory=set)
    undocumented: set[str] = field(default_factory=set)
    clauses: dict[str, ClauseRow] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    advisories: dict[str, None] = field(default_factory=dict)  # ordered, without repeats
    verdict_checks: int = 0
    verified: int = 0
    unverified_why: list[str] = field(default_factory=list)
    interrupted: str | None = None
    throttling: RunThrottling = field(default_factory=RunThrottling)

    def record(self, report: pytest.TestReport) -> None:
        properties = dict(report.user_properties)
        clause = properties.get(CLAUSE)
        if clause is None:
            return
        for name, value in report.user_properties:
            if name == TARGET:
                self.targets.add(received(value))
            elif name == BUILD:
                self.builds.add(received(value))
            elif name == SCHEMA:
                self.schemas.add(received(value))
            elif name == UNDOCUMENTED:
                self.undocumented.add(received(value))
            elif name == INTERRUPTED:
                self.interrupted = self.interrupted or str(value)
            elif name == ADVISORY:
                self.advisories[received(value, MAX_ADVISORY)] = None
            elif name == THROTTLING:
                self.throttling.add(Throttling.loads(str(value)))
            elif name == SESSION:
                seen = json.loads(str(value))
                known = self.sessions.setdefault(seen["n"], seen)
                if seen["checked"] and not known["checked"]:
                    self.sessions[seen["n"]] = seen
        # One outcome per test: its call, or the setup that kept the call from running.
        final = report.when == "call" or (report.when == "setup" and not report.passed)
        if not final and not (report.when == "teardown" and report.failed):
            return
        outcome = outcome_of(report)
        row = self.clauses.setdefault(str(clause), ClauseRow())
        row.outcomes[outcome] += 1
        curl = [str(v) for n, v in report.user_properties if n == CURL]
        if outcome != "passed" and len(row.evidence) < MAX_EVIDENCE:
            row.evidence.append(f"{report.nodeid.rpartition('::')[2]}: {_first_line(report)}")
        if outcome == "failed":
            check = report.nodeid.rpartition("::")[2]
            self.failures.append(Failure(check, str(clause), failure_text(report), tuple(curl)))
        row.curl += curl[: 3 - len(row.curl)]
        if CHECKS_VERDICTS in properties and report.when != "teardown":
            self.verdict_checks += 1
            self.verified += sum(int(str(v)) for n, v in report.user_properties if n == VERIFIED)
            if outcome in ("skipped", "throttled"):
                self.unverified_why.append(_first_line(report))

    @staticmethod
    def keep_per_test(report: pytest.TestReport) -> None:
        """Leave a report only the properties of its own test, each once (for JUnit)."""
        kept = [(n, v) for n, v in report.user_properties if n in PER_TEST]
        report.user_properties = list(dict.fromkeys(kept))

    # What the run covered.

    def counted(self, outcome: str) -> int:
        return sum(row.outcomes[outcome] for row in self.clauses.values())

    def unverified(self) -> str | None:
        """Why no verdict body was checked although checks of verdicts ran; None if some were."""
        if not self.verdict_checks or self.verified:
            return None
        why = next(iter(self.unverified_why), "no fresh session answered 200 with a verdict")
        return f"no verdict body was verified, so the contract is not shown to hold: {why}"

    def checked_sessions(self) -> tuple[int, int]:
        """(sessions checked, sessions given)."""
        return sum(bool(s["checked"]) for s in self.sessions.values()), len(self.sessions)

    def kinds_seen(self) -> list[str]:
        kinds = {s["verdict"] for s in self.sessions.values()}
        return [k for k in VERDICTS if k in kinds]

    def kinds_missing(self) -> list[str]:
        return [k for k in VERDICTS if k not in self.kinds_seen()]

    def outcomes_seen(self) -> list[tuple[str, bool]]:
        pairs = {(s["verdict"], s["conclusive"]) for s in self.sessions.values()}
        return [pair for pair in VERDICT_OUTCOMES if pair in pairs]

    def outcomes_missing(self) -> list[tuple[str, bool]]:
        return [pair for pair in VERDICT_OUTCOMES if pair not in self.outcomes_seen()]

    def key_rejected(self) -> bool:
        """Every session answered 401: the key itself is refused."""
        statuses = [s["status"] for s in self.sessions.values() if s["checked"]]
        return bool(statuses) and all(status == 401 for status in statuses)

    def coverage(self) -> list[str]:
        """'checked N of M sessions', and the verdict kinds seen and never seen."""
        if not self.sessions:
            return []
        checked, given = self.checked_sessions()
        seen = _pairs(self.outcomes_seen())
        never = _pairs(self.outcomes_missing())
        lines = [
            f"sessions:          checked {checked} of {given}",
            f"verdict kinds:     seen {_list(self.kinds_seen())}; "
            f"never seen {_list(self.kinds_missing())}",
            f"conclusive values: seen {_list(seen)}; never seen {_list(never)}",
        ]
        if self.key_rejected():
            lines.append(
                "the API key is rejected: every session answered 401 (check --verdict-api-key)"
            )
        return lines

    def facts(self) -> list[str]:
        """The coverage, then what throttling cost: every run says how close it came."""
        throttling = self.throttling.line()
        return [*self.coverage(), *([f"throttling:        {throttling}"] if throttling else [])]

    # The outputs.

    def lines(self, verdict: list[str]) -> list[str]:
        if not self.clauses and not verdict:
            return []
        out = [
            f"target:            {_few(self.targets) or 'unknown'}",
            f"provenance.build:  {_few(self.builds) or 'none seen'}",
            f"schema:            {_few(self.schemas) or 'none seen'}",
            *self.facts(),
        ]
        if self.undocumented:
            out.append(f"undocumented fields: {_few(self.undocumented, 8)} (allowed, spec §9.2)")
        out += ["", f"{'spec clause':28} " + " ".join(f"{o:>9}" for o in OUTCOMES)]
        for clause in sorted(self.clauses, key=_clause_order):
            counts = self.clauses[clause].outcomes
            out.append(f"{clause:28} " + " ".join(f"{counts[o]:>9}" for o in OUTCOMES))
        if self.advisories:
            out += [
                "",
                "advisories (not breaches of the spec; --verdict-fail-on-advisory fails on them):",
            ]
            out += [f"  - {a}" for a in self.advisories]
        return [*out, "", *verdict]

    def markdown(self, verdict: list[str], options: list[str], ended: datetime) -> str:
        """The report for people: outcome first, then coverage, clauses, failures, advisories."""
        seconds = (ended - self.started).total_seconds()
        out = [
            "# Explain API contract report",
            "",
            *(f"**{line}**" if i == 0 else line for i, line in enumerate(verdict)),
            "",
            f"- date: {self.started:%Y-%m-%d %H:%M:%S} UTC",
            f"- duration: {seconds:.1f} s",
            f"- target: {_few(self.targets) or 'unknown'}",
            f"- options: {', '.join(f'`{o}`' for o in options) or 'none'}",
            f"- provenance.build: {_few(self.builds, code=True) or 'none seen'}",
            f"- schema: {_few(self.schemas, code=True) or 'none seen'}",
        ]
        out += [
            f"- {line.partition(':')[0]}: {line.partition(':')[2].strip()}" for line in self.facts()
        ]
        problem = self.unverified()
        if problem:
            out.append(f"- **{problem}**")
        out += [
            "",
            "Replay a `curl` line after `export VERDICT_API_KEY=…` (the key is never written).",
            "",
            "## Spec clauses",
            "",
            "| spec clause | result | passed | failed | throttled | skipped | evidence | curl |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for clause in sorted(self.clauses, key=_clause_order):
            row = self.clauses[clause]
            counts = row.outcomes
            result = next((o for o in ("failed", "throttled") if counts[o]), None)
            result = result or ("passed" if counts["passed"] else "skipped")
            cells = [
                clause,
                f"**{result}**" if result == "failed" else result,
                *(str(counts[o]) for o in OUTCOMES),
                "<br>".join(_cell(e) for e in row.evidence),
                "<br>".join(f"`{_cell(c)}`" for c in row.curl),
            ]
            out.append("| " + " | ".join(cells) + " |")
        if self.failures:
            out += ["", "## Failures"]
        for failure in self.failures:
            fence = _fence(failure.text)
            out += [
                "",
                f"### {failure.check} ({failure.clause})",
                "",
                f"{fence}text",
                failure.text,
                fence,
            ]
            if failure.curl:
                fence = _fence("\n".join(failure.curl))
                out += ["", "Replay:", "", f"{fence}bash", *failure.curl, fence]
        if self.advisories:
            out += [
                "",
                "## Advisories",
                "",
                "Not breaches of the spec; a reviewer wants to see them.",
            ]
            out += ["", *(f"- {a}" for a in self.advisories)]
        return "\n".join(out) + "\n"

    def write(
        self, paths: ReportPaths, verdict: list[str], options: list[str], outcome: str
    ) -> None:
        """The report, as Markdown, as HTML, or both: one text, rendered."""
        text = self.markdown(verdict, options, datetime.now(UTC))
        if paths.markdown:  # a lone surrogate a target sent, if one got this far, as \udxxx
            Path(paths.markdown).write_text(text, encoding="utf-8", errors="backslashreplace")
        if paths.html:
            html = render(text, outcome)
            Path(paths.html).write_text(html, encoding="utf-8", errors="backslashreplace")

    def run_properties(self) -> list[tuple[str, str]]:
        """The run's properties, once each, for the JUnit XML's test suite."""
        checked, given = self.checked_sessions()
        out = [(TARGET, t) for t in sorted(self.targets)]
        out += [(BUILD, b) for b in sorted(self.builds)]
        out += [(SCHEMA, s) for s in sorted(self.schemas)]
        if self.sessions:
            out += [
                ("verdict_sessions_checked", f"{checked} of {given}"),
                ("verdict_kinds_seen", ", ".join(self.kinds_seen())),
                ("verdict_kinds_never_seen", ", ".join(self.kinds_missing())),
                ("verdict_conclusive_seen", ", ".join(_pairs(self.outcomes_seen()))),
                ("verdict_conclusive_never_seen", ", ".join(_pairs(self.outcomes_missing()))),
            ]
        out += self.throttling.properties()
        out += [(UNDOCUMENTED, u) for u in sorted(self.undocumented)]
        out += [(ADVISORY, a) for a in self.advisories]
        return out


def _pairs(pairs: list[tuple[str, bool]]) -> list[str]:
    return [f"{kind}={str(conclusive).lower()}" for kind, conclusive in pairs]


def _list(items: list[str]) -> str:
    return ", ".join(items) or "none"


def _fence(text: str) -> str:
    """A code block's fence longer than any run of backticks in ``text``: nothing in it ends
    the block (CommonMark's rule)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _few(values: set[str], most: int = 3, *, code: bool = False) -> str:
    """The first ``most`` values; ``code``: each a code span (Markdown renders no link in one)."""
    ordered = [f"`{value}`" if code else value for value in sorted(values)]
    more = f" (+{len(ordered) - most} more)" if len(ordered) > most else ""
    return ", ".join(ordered[:most]) + more


MAX_RECEIVED = 80
MAX_ADVISORY = 300


def received(value: object, most: int = MAX_RECEIVED) -> str:
    """What the target sent, as a report shows it: on one line, control characters escaped (no
    terminal escape, no line a CI runner would read as a command), no backtick (a code span
    holds it), at most ``most`` characters."""
    text = printable(str(value)).replace("`", "\\x60")
    return text if len(text) <= most else text[: most - 1] + "…"


def _clause_order(clause: str) -> tuple[int, ...]:
    numbers = "".join(ch if ch.isdigit() else " " for ch in clause).split()
    return tuple(int(n) for n in numbers) or (999,)
