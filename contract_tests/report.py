"""The suite's closing summary: the target, what it reported, and each spec clause's outcome.

Tests carry their clause (and any verdict provenance seen) as ``user_properties``, which reach
JUnit XML as ``<property>`` elements under every ``junit_family`` and cross pytest-xdist. The
same records give the optional Markdown report (``--verdict-report``): one row per clause.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

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

OUTCOMES = ("passed", "failed", "throttled", "skipped")


def outcome_of(report: pytest.TestReport) -> str:
    if dict(report.user_properties).get(OUTCOME) == "throttled":
        return "throttled"
    return "failed" if report.failed else "skipped" if report.skipped else "passed"


def _first_line(report: pytest.TestReport) -> str:
    if isinstance(report.longrepr, tuple):  # a skip: (path, line, "Skipped: reason")
        text = report.longrepr[2].removeprefix("Skipped: ")
    else:
        crash = getattr(report.longrepr, "reprcrash", None)
        text = crash.message if crash is not None else str(report.longrepr or "")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:300] if lines else ""


@dataclass
class ClauseRow:
    outcomes: Counter[str] = field(default_factory=Counter)
    evidence: list[str] = field(default_factory=list)
    curl: list[str] = field(default_factory=list)


@dataclass
class SuiteReport:
    targets: set[str] = field(default_factory=set)
    builds: set[str] = field(default_factory=set)
    schemas: set[str] = field(default_factory=set)
    undocumented: set[str] = field(default_factory=set)
    clauses: dict[str, ClauseRow] = field(default_factory=dict)
    verdict_checks: int = 0
    verified: int = 0
    unverified_why: list[str] = field(default_factory=list)

    def record(self, report: pytest.TestReport) -> None:
        properties = dict(report.user_properties)
        clause = properties.get(CLAUSE)
        if clause is None:
            return
        for name, value in report.user_properties:
            if name == TARGET:
                self.targets.add(str(value))
            elif name == BUILD:
                self.builds.add(str(value))
            elif name == SCHEMA:
                self.schemas.add(str(value))
            elif name == UNDOCUMENTED:
                self.undocumented.add(str(value))
        # One outcome per test: its call, or the setup that kept the call from running.
        final = report.when == "call" or (report.when == "setup" and not report.passed)
        if not final and not (report.when == "teardown" and report.failed):
            return
        outcome = outcome_of(report)
        row = self.clauses.setdefault(str(clause), ClauseRow())
        row.outcomes[outcome] += 1
        if outcome != "passed" and len(row.evidence) < 5:
            row.evidence.append(f"{report.nodeid.rpartition('::')[2]}: {_first_line(report)}")
        row.curl += [str(v) for n, v in report.user_properties if n == CURL][: 3 - len(row.curl)]
        if CHECKS_VERDICTS in properties and report.when != "teardown":
            self.verdict_checks += 1
            self.verified += sum(int(str(v)) for n, v in report.user_properties if n == VERIFIED)
            if outcome in ("skipped", "throttled"):
                self.unverified_why.append(_first_line(report))

    def unverified(self) -> str | None:
        """Why no verdict body was checked although checks of verdicts ran; None if some were."""
        if not self.verdict_checks or self.verified:
            return None
        why = next(iter(self.unverified_why), "no fresh session answered 200 with a verdict")
        return f"no verdict body was verified, so the contract is not shown to hold: {why}"

    def lines(self) -> list[str]:
        if not self.clauses:
            return []
        out = [
            f"target:            {_few(self.targets) or 'unknown'}",
            f"provenance.build:  {_few(self.builds) or 'none seen'}",
            f"schema:            {_few(self.schemas) or 'none seen'}",
        ]
        if self.undocumented:
            out.append(f"undocumented fields: {_few(self.undocumented, 8)} (allowed, spec §9.2)")
        out += ["", f"{'spec clause':28} " + " ".join(f"{o:>9}" for o in OUTCOMES)]
        for clause in sorted(self.clauses, key=_clause_order):
            counts = self.clauses[clause].outcomes
            out.append(f"{clause:28} " + " ".join(f"{counts[o]:>9}" for o in OUTCOMES))
        problem = self.unverified()
        if problem:
            out += ["", f"FAILED: {problem}"]
        return out

    def markdown(self) -> str:
        """The report for people: one row per clause, with evidence and a curl line to replay."""
        out = [
            "# Explain API contract report",
            "",
            f"- target: {_few(self.targets) or 'unknown'}",
            f"- provenance.build: {_few(self.builds) or 'none seen'}",
            f"- schema: {_few(self.schemas) or 'none seen'}",
        ]
        problem = self.unverified()
        if problem:
            out.append(f"- **{problem}**")
        out += [
            "",
            "Replay a `curl` line after `export VERDICT_API_KEY=…` (the key is never written).",
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
        return "\n".join(out) + "\n"

    def write(self, path: str) -> None:
        Path(path).write_text(self.markdown(), encoding="utf-8")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _few(values: set[str], shown: int = 3) -> str:
    ordered = sorted(values)
    more = f" (+{len(ordered) - shown} more)" if len(ordered) > shown else ""
    return ", ".join(ordered[:shown]) + more


def _clause_order(clause: str) -> tuple[int, ...]:
    numbers = "".join(ch if ch.isdigit() else " " for ch in clause).split()
    return tuple(int(n) for n in numbers) or (999,)
