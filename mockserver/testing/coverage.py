"""Consumer coverage: which of the spec's answers a test run met, and the client's habits.

Registered by the plugin only in a run that asks (``--verdict-coverage``,
``--verdict-coverage-json=PATH``, ``--verdict-require-coverage=IDS``): each fixture's journal is
read at its test's teardown (:meth:`CoveragePlugin.add`); an xdist worker hands its part to the
controller in ``workeroutput``, which merges them (``pytest_testnodedown``) and reports once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

import pytest

from ..store.behaviours import BEHAVIOURS, behaviours
from ..store.habits import ClockMove, habits
from ..store.journal import Entry
from .mocks import VerdictMock

PLUGIN_NAME: Final = "verdict-coverage"
WORKER_KEY: Final = "verdict_coverage"
TESTS_SHOWN: Final = 3
"""Tests named per behaviour in the table (the JSON names them all)."""


class Coverage:
    """Behaviours met (how often, by which tests) and habits seen, mergeable across workers."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = dict.fromkeys(BEHAVIOURS, 0)
        self.tests: dict[str, set[str]] = {behaviour: set() for behaviour in BEHAVIOURS}
        self.habits: list[dict[str, str]] = []

    def add(
        self,
        test: str,
        entries: Iterable[Entry],
        keys: Iterable[str] = (),
        moves: Sequence[ClockMove] = (),
    ) -> None:
        """Count one test's journal (its entries, the mock's keys and clock moves)."""
        entries = list(entries)
        for entry in entries:
            for behaviour in behaviours(entry):
                self.counts[behaviour] += 1
                self.tests[behaviour].add(test)
        for habit in habits(entries, keys, moves):
            detail = f"session {habit.session}: {habit.detail}"
            self.habits.append({"id": habit.id, "test": test, "detail": detail})

    def never(self) -> list[str]:
        return [behaviour for behaviour, count in self.counts.items() if not count]

    def to_json(self) -> dict[str, Any]:
        return {
            "behaviours": {
                behaviour: {"exercised": count, "tests": sorted(self.tests[behaviour])}
                for behaviour, count in self.counts.items()
            },
            "never": self.never(),
            "habits": sorted(self.habits, key=lambda h: (h["test"], h["id"], h["detail"])),
        }

    def merge(self, data: dict[str, Any]) -> None:
        """Add a part :meth:`to_json` wrote (an xdist worker's)."""
        for behaviour, met in data["behaviours"].items():
            if behaviour in self.counts:
                self.counts[behaviour] += met["exercised"]
                self.tests[behaviour].update(met["tests"])
        self.habits.extend(data["habits"])

    def lines(self) -> list[str]:
        """The report: one table of the answer space, the behaviours never met, the habits."""
        met = len(BEHAVIOURS) - len(self.never())
        width = max(map(len, BEHAVIOURS))
        out = [
            f"{met} of {len(BEHAVIOURS)} behaviours of the spec met",
            f"{'behaviour':<{width}}  {'met':>5}  tests",
        ]
        for behaviour, count in self.counts.items():
            tests = sorted(self.tests[behaviour])
            shown = ", ".join(tests[:TESTS_SHOWN])
            if len(tests) > TESTS_SHOWN:
                shown += f", +{len(tests) - TESTS_SHOWN} more"
            out.append(f"{behaviour:<{width}}  {count:>5}  {shown or '-'}")
        never = self.never()
        out.append(f"never met ({len(never)}): {', '.join(never) or 'none'}")
        if self.habits:
            out.append(f"client habits (advisory, {len(self.habits)}):")
            for habit in self.to_json()["habits"]:
                out.append(f"  {habit['id']}  {habit['test']}  {habit['detail']}")
        return out


def required(value: str | None) -> list[str]:
    """The ids ``--verdict-require-coverage`` names (``all``: every one); unknown ones refused."""
    if not value:
        return []
    if value.strip() == "all":
        return list(BEHAVIOURS)
    ids = [part.strip() for part in value.split(",") if part.strip()]
    unknown = [i for i in ids if i not in BEHAVIOURS]
    if unknown:
        raise pytest.UsageError(
            f"--verdict-require-coverage: unknown behaviour id(s) {', '.join(unknown)}; "
            f"known: all, {', '.join(BEHAVIOURS)}"
        )
    return ids


class CoveragePlugin:
    """The run's coverage: gathered per test, merged from workers, reported at the end."""

    def __init__(
        self, config: pytest.Config, show: bool, json_path: str | None, require: str | None
    ) -> None:
        self.config = config
        self.show = show
        self.coverage = Coverage()
        self.json_path = json_path
        self.required = required(require)
        self.missing: list[str] = []

    def __repr__(self) -> str:
        return f"CoveragePlugin(required={self.required!r})"

    def add(self, test: str, mock: VerdictMock) -> None:
        state = mock.state
        self.coverage.add(test, mock.journal, state.api_keys, list(state.clock_moves))

    @property
    def _is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        part = getattr(node, "workeroutput", {}).get(WORKER_KEY)
        if part:
            self.coverage.merge(json.loads(part))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self._is_worker:
            output: dict[str, Any] = getattr(self.config, "workeroutput")  # noqa: B009
            output[WORKER_KEY] = json.dumps(self.coverage.to_json())
            return
        never = set(self.coverage.never())
        self.missing = [behaviour for behaviour in self.required if behaviour in never]
        if self.missing and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.json_path:
            path = Path(self.json_path)
            path.write_text(json.dumps(self.coverage.to_json(), indent=2) + "\n")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self._is_worker:
            return
        terminalreporter.write_sep("=", "verdict coverage")
        for line in self.coverage.lines() if self.show else ():
            terminalreporter.write_line(line)
        if self.json_path:
            terminalreporter.write_line(f"verdict coverage JSON written to {self.json_path}")
        if self.missing:
            names = ", ".join(self.missing)
            terminalreporter.write_line(
                f"verdict coverage: required behaviour(s) never met: {names}", red=True
            )
