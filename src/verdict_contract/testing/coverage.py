"""Consumer coverage: which of the spec's answers a test run met, and the client's habits.

Registered by the plugin only in a run that asks (``--verdict-coverage``...). Each fixture's
journal is read at its test's teardown; an xdist worker hands its part to the controller in
``workeroutput``. The report says "served", not "checked": what a test then checked of its
client cannot be told from outside. It is broken down per test module and per client, since a
behaviour served to one client says nothing of another's handling of it.
"""

from __future__ import annotations

import json
from itertools import chain
from pathlib import Path
from typing import Any, Final, Literal

import pytest

from verdict_contract.core.parsing import output_file
from verdict_contract.core.suggest import closest
from verdict_contract.mockserver.coverage import BEHAVIOURS, BROKEN_CLIENT_ONLY, behaviours, habits

from .mocks import VerdictMock

WORKER_KEY: Final = "verdict_coverage"
TESTS_SHOWN: Final = 3  # tests named per behaviour in the table (the JSON names them all)
CORRECT_CLIENT_IDS: Final = [b for b in BEHAVIOURS if b not in BROKEN_CLIENT_ONLY]
"""What ``all`` requires: every answer the spec lets a service give a correct client."""


IN_PROCESS_ONLY: Final = frozenset({"fault.timeout"})
"""What the mock over real HTTP cannot know it served (a client that gives up only closes its
connection): not asked of ``verdict_mock``'s client, nor by ``all`` of a run that used no other."""


Per = Literal["run", "client", "module"]
"""Of what ``--verdict-require-coverage-per`` asks every required behaviour: the run as a whole,
each client, or each test module's each client."""


def _unservable(clients: set[str], named: frozenset[str] = frozenset()) -> frozenset[str]:
    """What no test of these clients could be served: over real HTTP alone, a timeout (the mock
    cannot know a client gave up), unless the gate ``named`` it."""
    return IN_PROCESS_ONLY - named if clients <= {VerdictMock.client} else frozenset()


def _never_in(served: set[str], client: str) -> list[str]:
    """What a correct ``client`` could meet and was not ``served``."""
    unservable = _unservable({client})
    return [b for b in CORRECT_CLIENT_IDS if b not in served and b not in unservable]


def required(value: str | None) -> list[str]:
    """The ids ``--verdict-require-coverage`` names (``all``: every answer a correct client can
    meet, :data:`CORRECT_CLIENT_IDS`; with more ids: those too); unknown ones refused."""
    parts = (part.strip() for part in (value or "").split(","))
    expanded = (CORRECT_CLIENT_IDS if part == "all" else [part] for part in parts if part)
    ids = list(dict.fromkeys(chain.from_iterable(expanded)))
    unknown = [i for i in ids if i not in BEHAVIOURS]
    if unknown:
        named = (
            f"{w} (did you mean {c}?)" if (c := closest(w, BEHAVIOURS)) else w for w in unknown
        )
        raise pytest.UsageError(
            f"--verdict-require-coverage: unknown behaviour id(s) {', '.join(named)}; "
            f"known: all, {', '.join(BEHAVIOURS)}"
        )
    return ids


class CoveragePlugin:
    """The run's coverage: behaviours served (how often, to which tests, per module and client)
    and habits seen, gathered per test, merged from xdist workers, reported at the end."""

    def __init__(
        self,
        config: pytest.Config,
        show: bool,
        json_path: str | None,
        require: str | None,
        per: Per = "run",
    ) -> None:
        self.config = config
        self.per: Per = per
        self.show = show
        try:
            self.json_path = None if json_path is None else output_file(json_path)
        except ValueError as exc:
            raise pytest.UsageError(f"--verdict-coverage-json: {exc}") from None
        self.required = required(require)
        self.named = frozenset(part.strip() for part in (require or "").split(",")) - {"all"}
        self.gaps: dict[str, list[str]] = {}  # what the gate found missing, by scope
        self.counts: dict[str, int] = dict.fromkeys(BEHAVIOURS, 0)
        self.tests: dict[str, set[str]] = {behaviour: set() for behaviour in BEHAVIOURS}
        self.modules: dict[str, dict[str, set[str]]] = {}  # per test module, per client: served
        self.habits: list[dict[str, str]] = []

    def __repr__(self) -> str:
        return f"CoveragePlugin(required={self.required!r})"

    def add(self, test: str, mock: VerdictMock) -> None:
        """Count one test's journal (and its client's habits, from the keys and clock moves)."""
        entries = mock.journal
        module = test.partition("::")[0]  # tests/test_x.py::test_y[1]: tests/test_x.py
        served = self.modules.setdefault(module, {}).setdefault(mock.client, set())
        for entry in entries:
            for behaviour in behaviours(entry):
                self.counts[behaviour] += 1
                self.tests[behaviour].add(test)
                served.add(behaviour)
        for habit in habits(entries, mock.state.api_keys, list(mock.state.clock_moves)):
            detail = f"session {habit.session}: {habit.detail}"
            self.habits.append({"id": habit.id, "test": test, "detail": detail})

    def missing(self, per: Per) -> dict[str, list[str]]:
        """The required behaviours never served, per scope (:data:`Per`), by its name ("" for
        the run); none is asked of a client that cannot be served it."""
        served: dict[str, set[str]] = {"": set()} if per == "run" or not self.modules else {}
        clients: dict[str, set[str]] = {scope: set() for scope in served}
        for module, met_by in self.modules.items():
            for client, met in met_by.items():
                scope = (
                    "" if per == "run" else client if per == "client" else f"{module} ({client})"
                )
                served.setdefault(scope, set()).update(met)
                clients.setdefault(scope, set()).add(client)
        gaps = {}
        for scope, met in sorted(served.items()):
            left_out = _unservable(clients[scope], self.named)
            never = [b for b in self.required if b not in met and b not in left_out]
            if never:
                gaps[scope] = never
        return gaps

    def never(self) -> list[str]:
        return [behaviour for behaviour, count in self.counts.items() if not count]

    def to_json(self) -> dict[str, Any]:
        return {
            "behaviours": {
                behaviour: {"exercised": count, "tests": sorted(self.tests[behaviour])}
                for behaviour, count in self.counts.items()
            },
            "never": self.never(),
            "modules": {
                module: {
                    client: {"served": sorted(served), "never": _never_in(served, client)}
                    for client, served in sorted(clients.items())
                }
                for module, clients in sorted(self.modules.items())
            },
            "habits": sorted(self.habits, key=lambda h: (h["test"], h["id"], h["detail"])),
        }

    def merge(self, data: dict[str, Any]) -> None:
        """Add a part :meth:`to_json` wrote (an xdist worker's)."""
        for behaviour, met in data["behaviours"].items():  # the same BEHAVIOURS: one install
            self.counts[behaviour] += met["exercised"]
            self.tests[behaviour].update(met["tests"])
        for module, clients in data["modules"].items():
            for client, part in clients.items():
                served = self.modules.setdefault(module, {}).setdefault(client, set())
                served.update(part["served"])
        self.habits.extend(data["habits"])

    def lines(self) -> list[str]:
        """The report: one table of the answer space, the behaviours never served (in all and
        per module and client), the habits."""
        met = len(BEHAVIOURS) - len(self.never())
        width = max(map(len, BEHAVIOURS))
        out = [
            f"{met} of {len(BEHAVIOURS)} behaviours of the spec served",
            f"{'behaviour':<{width}}  {'served':>6}  tests",
        ]
        for behaviour, count in self.counts.items():
            tests = sorted(self.tests[behaviour])
            listed = ", ".join(tests[:TESTS_SHOWN])
            if len(tests) > TESTS_SHOWN:
                listed += f", +{len(tests) - TESTS_SHOWN} more"
            out.append(f"{behaviour:<{width}}  {count:>6}  {listed or '-'}")
        never = self.never()
        out.append(f"never served ({len(never)}): {', '.join(never) or 'none'}")
        broken = ", ".join(sorted(BROKEN_CLIENT_ONLY))
        out.append(f"(only a client that breaks the spec meets {broken}: 'all' leaves it out)")
        if len(self.modules) > 1 or any(len(c) > 1 for c in self.modules.values()):
            out.append("never served, per test module and client (what a correct client meets):")
            for module, clients in sorted(self.modules.items()):
                for client, served in sorted(clients.items()):
                    missing = _never_in(served, client)
                    listed = f"{len(missing)}: {', '.join(missing)}" if missing else "none"
                    out.append(f"  {module} ({client}): {listed}")
        if self.habits:
            out.append(f"client habits (advisory, {len(self.habits)}):")
            for habit in self.to_json()["habits"]:
                out.append(f"  {habit['id']}  {habit['test']}  {habit['detail']}")
        return out

    @property
    def _is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        part = getattr(node, "workeroutput", {}).get(WORKER_KEY)
        if part:
            self.merge(json.loads(part))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self._is_worker:
            output: dict[str, Any] = getattr(self.config, "workeroutput")  # noqa: B009
            output[WORKER_KEY] = json.dumps(self.to_json())
            return
        self.gaps = self.missing(self.per)
        if self.gaps and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.json_path:
            path = Path(self.json_path)
            path.write_text(json.dumps(self.to_json(), indent=2) + "\n")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self._is_worker:
            return
        terminalreporter.write_sep("=", "verdict coverage")
        for line in self.lines() if self.show or self.gaps else ():
            terminalreporter.write_line(line)
        if self.required and not self.gaps:  # the gate passed: said, not left to a blank
            count = len(self.required)
            passed = f"every behaviour --verdict-require-coverage requires was served ({count})"
            short = ", ".join(self.missing("client")) if self.per == "run" else ""
            if short:  # honest about what it checked: the run, not each client
                passed += (
                    f" to the run as a whole, not to each client ({short} not every one): "
                    "--verdict-require-coverage-per=client asks it of each"
                )
            terminalreporter.write_line(passed)
        if self.json_path:
            terminalreporter.write_line(f"verdict coverage JSON written to {self.json_path}")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """A failing gate says why on the run's last line, after pytest's own counts."""
        if self._is_worker or not self.gaps:
            return
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            names = "; ".join(
                f"{scope}: {', '.join(never)}" if scope else ", ".join(never)
                for scope, never in self.gaps.items()
            )
            per = "" if self.per == "run" else f", per {self.per}"
            reporter.write_line(
                f"FAILED (exit 1): verdict coverage: required behaviour(s) never served: {names}"
                f" (--verdict-require-coverage{per})",
                red=True,
            )
