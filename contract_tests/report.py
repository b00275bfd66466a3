"""The suite's closing summary: the target, what it reported, and each spec clause's outcome.

Tests carry their clause (and any verdict provenance seen) as ``user_properties``, which reach
JUnit XML as ``<property>`` elements under every ``junit_family`` and cross pytest-xdist.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pytest

CLAUSE = "spec_clause"
TARGET = "verdict_target"
BUILD = "verdict_build"
SCHEMA = "verdict_schema"
UNDOCUMENTED = "verdict_undocumented_field"


@dataclass
class SuiteReport:
    targets: set[str] = field(default_factory=set)
    builds: set[str] = field(default_factory=set)
    schemas: set[str] = field(default_factory=set)
    undocumented: set[str] = field(default_factory=set)
    clauses: dict[str, Counter[str]] = field(default_factory=dict)

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
        if report.when == "call" or (report.when == "setup" and not report.passed):
            outcome = "failed" if report.failed else "skipped" if report.skipped else "passed"
            self.clauses.setdefault(str(clause), Counter())[outcome] += 1
        elif report.when == "teardown" and report.failed:
            self.clauses.setdefault(str(clause), Counter())["failed"] += 1

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
        out += [
            "",
            f"{'spec clause':28} {'passed':>7} {'failed':>7} {'skipped':>8}",
        ]
        for clause in sorted(self.clauses, key=_clause_order):
            c = self.clauses[clause]
            out.append(f"{clause:28} {c['passed']:>7} {c['failed']:>7} {c['skipped']:>8}")
        return out


def _few(values: set[str], shown: int = 3) -> str:
    ordered = sorted(values)
    more = f" (+{len(ordered) - shown} more)" if len(ordered) > shown else ""
    return ", ".join(ordered[:shown]) + more


def _clause_order(clause: str) -> tuple[int, ...]:
    numbers = "".join(ch if ch.isdigit() else " " for ch in clause).split()
    return tuple(int(n) for n in numbers) or (999,)
