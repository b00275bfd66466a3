"""The suite's pytest hooks: options, clauses, redaction, the summary.

They are registered only in runs that collect the suite (:mod:`.activation`), by
:mod:`verdict_contract.suite`; the fixtures that compose the suite with the mock are there too.
"""

from __future__ import annotations

import importlib
import os
import re
import signal
import threading
from collections.abc import Callable, Generator
from dataclasses import replace
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from verdict_contract.core.redact import Redactor
from verdict_contract.core.suggest import did_you_mean, unknown_options

from . import config as target
from .activation import PACKAGE, collects_suite, package_dir
from .ci import under_github_actions, workflow_commands
from .gate import FAILED, Gate, decide
from .report import (
    CHECKS_VERDICTS,
    CLAUSE,
    CURL,
    INTERRUPTED,
    OUTCOME,
    ReportPaths,
    SuiteReport,
)

REDACTOR = pytest.StashKey[Redactor]()
REPORT = pytest.StashKey[SuiteReport]()
SUITE_CONFIG = pytest.StashKey[target.SuiteConfig]()
CANCELLED = pytest.StashKey[str]()
"""The signal that cancelled the run (SIGINT, SIGTERM), once one came."""
BASE_URL_PLUGIN = "base_url"
"""pytest-base-url's plugin name: when it is installed, ``--base-url`` is its option."""
CLAUSE_FIXTURE = "spec_clause"
"""The suite's autouse fixture that the hooks parametrize with each check's clause."""


def _base_url_plugin_loads(pluginmanager: pytest.PytestPluginManager) -> bool:
    """Whether pytest-base-url is, or is about to be, registered in this run.

    With ``-p verdict_contract.suite`` (as ``verdict-contract check`` runs it) the suite registers
    before pytest loads the installed plugins, so an installed, unblocked pytest-base-url is
    expected rather than seen; declaring ``--base-url`` then would make it fail to load.
    """
    if pluginmanager.has_plugin(BASE_URL_PLUGIN):
        return True
    if pluginmanager.is_blocked(BASE_URL_PLUGIN) or os.environ.get(
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD"
    ):
        return False
    config = pluginmanager.get_plugin("pytestconfig")
    namespace = getattr(config, "known_args_namespace", None)
    if getattr(namespace, "disable_plugin_autoload", False):
        return False
    return bool(entry_points(group="pytest11", name=BASE_URL_PLUGIN))


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    target.add_options(parser, own_base_url=not _base_url_plugin_loads(pluginmanager))


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> Generator[None]:
    """Once every option is declared (plugins, initial conftests), a mistyped one is answered
    with the closest, in one line, instead of pytest's "unrecognized arguments"."""
    yield
    reject_typos(parser, args)


def reject_typos(parser: pytest.Parser, args: list[str]) -> None:
    """Raise a one-line UsageError for an unknown ``--option`` close to a known one."""
    _, unknown = parser.parse_known_and_unknown_args(args)
    actions = getattr(parser.optparser, "_option_string_actions", {})
    hint = did_you_mean(unknown_options([str(a) for a in unknown], actions))
    if hint is not None:
        raise pytest.UsageError(hint)


class SuiteModule(pytest.Module):
    """One of the suite's test modules, imported by its name in the package
    (``verdict_contract.contract_tests.test_auth``) wherever pytest found its file.

    pytest names a test module after the folders above its file: in a checkout the folder is
    ``contract_tests/``, not the package, and the module's relative imports would load a second
    copy of each module it names (``contract_tests.client`` beside
    ``verdict_contract.contract_tests.client``), with state of its own (the clock, the stash
    keys). Imported by its name, a test module meets the one copy, as from an install.
    ``_getobj`` is where pytest's Module imports its file; no public hook names the module
    (``tests/test_canaries.py`` keeps it in sight).
    """

    def _getobj(self) -> ModuleType:
        module = importlib.import_module(f"{PACKAGE}.{self.path.stem}")
        self.config.pluginmanager.consider_module(module)  # as pytest does for a test module
        return module


def pytest_pycollect_makemodule(
    module_path: Path, parent: pytest.Collector
) -> pytest.Module | None:
    """The suite's own test modules are :class:`SuiteModule`; any other is pytest's business."""
    if module_path.resolve().parent != package_dir():
        return None
    return SuiteModule.from_parent(parent, path=module_path)


def _suite_requested(config: pytest.Config) -> bool:
    """Whether this run collects the contract suite (by path, or with --pyargs)."""
    args = [str(arg) for arg in config.args]
    return collects_suite(args, bool(config.option.pyargs), config.invocation_params.dir)


def suite_config(config: pytest.Config) -> target.SuiteConfig:
    """The suite's validated options, resolved once per process."""
    if SUITE_CONFIG not in config.stash:
        loaded = target.load_config(config)
        for secret in (loaded.api_key, loaded.control_token):  # never in any output
            if secret is not None:
                config.stash[REDACTOR].add(secret.reveal())
        config.stash[SUITE_CONFIG] = loaded
    return config.stash[SUITE_CONFIG]


def _clause_numbers(clause: str) -> list[str]:
    """``"§5.1, §5.3"`` -> ``["5.1", "5.3"]``; a range ``"§2.2-§2.4"`` is expanded."""
    numbers: list[str] = []
    for start, end in re.findall(r"§(\d+(?:\.\d+)?)(?:-§(\d+(?:\.\d+)?))?", clause):
        major, _, minor = start.partition(".")
        if end and minor and end.startswith(f"{major}."):
            numbers += [f"{major}.{m}" for m in range(int(minor), int(end.split(".")[1]) + 1)]
        else:
            numbers.append(start)
    return numbers


def _marker(number: str) -> str:
    return "clause_" + number.replace(".", "_")


def clause_markers(clause: str) -> list[str]:
    """``"§5.1, §5.3"`` -> ``clause_5``, ``clause_5_1``, ``clause_5_3`` (ranges expanded)."""
    names: list[str] = []
    for number in _clause_numbers(clause):
        for name in (_marker(number.partition(".")[0]), _marker(number)):
            if name not in names:
                names.append(name)
    return names


def clause_id(clause: str) -> str:
    """The clause in a test id, in the words ``-m`` and ``-k`` take (ASCII, as pytest's ids).

    ``"§5.1, §5.3"`` -> ``clause_5_1+clause_5_3``; a clause without a section number keeps
    its words.
    """
    markers = dict.fromkeys(_marker(number) for number in _clause_numbers(clause))
    return "+".join(markers) or re.sub(r"[^A-Za-z0-9.]+", "_", clause).strip("_") or "clause"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "clause(text): the spec clause a contract check enforces")
    config.addinivalue_line("markers", "checks_verdicts: a check that reads verdict bodies")
    config.addinivalue_line("markers", "run_last: a check that looks back over the whole run")
    config.stash[REDACTOR] = Redactor(known=target.own_words())
    config.stash[REPORT] = SuiteReport()
    summary = _Summary(config, config.stash[REPORT], worker=hasattr(config, "workerinput"))
    config.pluginmanager.register(summary, "verdict-contract-summary")
    # pytest-base-url (when installed) copies its ini value into the option on the controller
    # only; do it on pytest-xdist workers too, so `pytest -n 2` targets the ini's URL as well.
    if hasattr(config, "workerinput") and not config.getoption("base_url", None):
        ini = config.getini("base_url")
        if ini:
            config.option.base_url = ini
    # Secrets are masked in log records (captured logs, live logs, JUnit system-out).
    config.add_cleanup(config.stash[REDACTOR].redact_logs())
    if _suite_requested(config) and not hasattr(config, "workerinput"):
        config.add_cleanup(_cancel_on_signals(config))
        suite_config(config)  # a configuration mistake stops the run here, in one line


def _cancel_on_signals(config: pytest.Config) -> Callable[[], None]:
    """SIGTERM (a CI's cancel) interrupts the run as Ctrl-C does, and the run ends as
    interrupted: the check in flight stops, the summary, JUnit XML and report are written.

    After the first signal the usual handlers are back, so a second one is not caught: the
    cleanup runs undisturbed, and ``verdict-contract check`` kills what is left after a grace.
    Returns what restores the handlers found.
    """
    signals = (signal.SIGINT, signal.SIGTERM)
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {s: signal.getsignal(s) for s in signals}

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    def cancel(signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        config.stash[CANCELLED] = f"cancelled by {name}"
        restore()
        raise KeyboardInterrupt(f"cancelled by {name}")

    for signum in signals:
        signal.signal(signum, cancel)
    return restore


@pytest.hookimpl(tryfirst=True)  # before the parametrize markers: the clause leads the id
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each check runs once per its clause, so the clause is in its id: ``test_x[clause_5_3]``.

    Only the suite's checks take part: they are the tests that see the ``spec_clause`` fixture.
    """
    marker = metafunc.definition.get_closest_marker("clause")
    if marker is None or not marker.args or CLAUSE_FIXTURE not in metafunc.fixturenames:
        return
    clause = str(marker.args[0])
    metafunc.parametrize(CLAUSE_FIXTURE, [clause], ids=[clause_id(clause)])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Checks that look back over the run (``run_last``) run after the others, in every process
    alike (xdist needs one order): a verdict compared at the run's end, not its middle."""
    items.sort(key=lambda item: item.get_closest_marker("run_last") is not None)


def pytest_itemcollected(item: pytest.Item) -> None:
    marker = item.get_closest_marker("clause")
    if marker is None or not marker.args:
        return
    clause = str(marker.args[0])
    item.user_properties.append((CLAUSE, clause))
    if item.get_closest_marker("checks_verdicts") is not None:
        item.user_properties.append((CHECKS_VERDICTS, "1"))
    # `-m clause_5_1` and `-k clause_5` select by clause (a marker's name is also a keyword).
    for name in clause_markers(clause):
        config = item.config
        config.addinivalue_line("markers", f"{name}: checks of spec {name[7:].replace('_', '.')}")
        item.add_marker(name)


def _short_failure(
    item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport
) -> None:
    """Our own exceptions read as one line: throttled is its own outcome; a dead target stops."""
    from .client import BrokenAnswer, RunStopped, TargetUnreachable, Throttled

    excinfo = call.excinfo
    if excinfo is None:
        return
    message = str(excinfo.value)
    if excinfo.errisinstance(Throttled):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {message}")
        report.user_properties.append((OUTCOME, "throttled"))
    elif excinfo.errisinstance((TargetUnreachable, RunStopped)):
        unreachable = excinfo.errisinstance(TargetUnreachable)
        stopped = f"the target stopped answering: {message}" if unreachable else message
        stopped = item.config.stash[REDACTOR].text(stopped)  # pytest prints it as it is
        report.longrepr = item.session.shouldstop = stopped
        report.user_properties.append((INTERRUPTED, stopped))
    elif excinfo.errisinstance(BrokenAnswer):
        report.longrepr = message


REPLAY = re.compile(r"^\s*replay[^:]*: (curl .*)$", flags=re.MULTILINE)
"""A replay line inside a check's own message (checks of verdicts name each session's)."""


def _curl_lines(item: pytest.Item, report: pytest.TestReport) -> None:
    """Each failure shows the calls it made as curl lines, the key as ``$VERDICT_API_KEY``.

    A check of verdict bodies already shows the replay of each failing session in its message
    (the answers were fetched once for the run, not by this check): those lines are its own.
    """
    if item.get_closest_marker("checks_verdicts") is not None:
        lines = REPLAY.findall(str(report.longrepr or ""))
    else:
        target_ = getattr(item, "funcargs", {}).get("contract_target")
        client = getattr(target_, "client", None)
        lines = [s.curl() for s in list(getattr(client, "sent", []))[-3:]]
        if lines:
            report.sections.append(("replay (export VERDICT_API_KEY first)", "\n".join(lines)))
    properties = [(CURL, line) for line in dict.fromkeys(lines)]
    report.user_properties += properties
    item.user_properties += properties  # the test case's JUnit properties come from teardown


def pytest_report_teststatus(report: pytest.TestReport) -> tuple[str, str, Any] | None:
    if dict(getattr(report, "user_properties", [])).get(OUTCOME) == "throttled":
        return "throttled", "T", ("THROTTLED", {"yellow": True})
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if item.get_closest_marker("clause") is not None:
        _short_failure(item, call, report)
        if report.failed and call.when == "call":
            _curl_lines(item, report)
    redactor = item.config.stash[REDACTOR]
    if redactor.active:
        if isinstance(report.longrepr, tuple):  # a skip: (path, line, "Skipped: reason")
            path, line, reason = report.longrepr
            report.longrepr = (path, line, redactor.text(reason))
        elif report.longrepr is not None:
            text = str(report.longrepr)
            cleaned = redactor.text(text)
            if cleaned != text:
                report.longrepr = cleaned
        report.sections = [(name, redactor.text(content)) for name, content in report.sections]
        report.user_properties[:] = [
            (name, redactor.text(str(value))) for name, value in report.user_properties
        ]
    return report


def _add_to_junit(config: pytest.Config, report: SuiteReport, gate: Gate) -> None:
    """The run's properties once, on the JUnit test suite; a failing test case for a failed gate
    that no failing check explains (nothing verified, interrupted, incomplete), so a CI that
    reads JUnit shows it red too."""
    from _pytest.junitxml import xml_key
    from _pytest.reports import TestReport

    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    redactor = config.stash[REDACTOR]
    xml.add_global_property("verdict_outcome", f"{gate.outcome} (exit {gate.exit_code})")
    for name, value in report.run_properties():
        xml.add_global_property(name, redactor.text(value))
    if not gate.unexplained:
        return
    where = ("verdict_contract/contract_tests", None, "run_outcome")
    for when, outcome in (("call", "failed"), ("teardown", "passed")):
        xml.pytest_runtest_logreport(
            TestReport(
                "verdict_contract/contract_tests::run_outcome",
                where,
                {},
                outcome,  # type: ignore[arg-type]
                redactor.text("\n".join(gate.lines())) if outcome == "failed" else None,
                when,  # type: ignore[arg-type]
            )
        )


SUITE_PACKAGE = "verdict_contract.contract_tests"


def junit_names(nodeid: str) -> tuple[str, str]:
    """A check's JUnit classname and name, by the suite's module: the same from any directory,
    any install and under xdist (pytest derives them from a path relative to the rootdir).

    ``…/contract_tests/test_auth.py::test_x[clause_5_3]`` (or ``test_auth.py::…``) ->
    ``("verdict_contract.contract_tests.test_auth", "test_x[clause_5_3]")``.
    """
    path, _, rest = nodeid.partition("::")
    *classes, name = rest.split("::")
    module = path.rpartition("/")[2].removesuffix(".py")
    return ".".join([SUITE_PACKAGE, module, *classes]), name


def _name_junit_case(config: pytest.Config, report: pytest.TestReport) -> None:
    """Give the check's JUnit test case its names before JUnit records it (which keeps the
    attributes it finds, and freezes the test case at its teardown)."""
    from _pytest.junitxml import xml_key

    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    reporter = xml.node_reporter(report)
    reporter.attrs["classname"], reporter.attrs["name"] = junit_names(report.nodeid)


class _Summary:
    """Collects the clause of every test report and prints the table at the end."""

    def __init__(self, config: pytest.Config, report: SuiteReport, worker: bool) -> None:
        self.config = config
        self.report = report
        self.worker = worker
        self.gate: Gate | None = None

    @pytest.hookimpl(tryfirst=True)  # before JUnit writes a test case's properties
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.worker:
            return  # a worker passes its reports to the controller untouched
        if CLAUSE in dict(report.user_properties):
            _name_junit_case(self.config, report)
        self.report.record(report)
        if dict(report.user_properties).get(CLAUSE) is not None:
            SuiteReport.keep_per_test(report)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        config = session.config
        cancelled = config.stash.get(CANCELLED, None)
        if hasattr(config, "workerinput") or not (self.report.clauses or cancelled):
            return  # the controller sees every report and decides
        if exitstatus not in (
            pytest.ExitCode.OK,
            pytest.ExitCode.TESTS_FAILED,
            pytest.ExitCode.INTERRUPTED,
        ):
            return  # pytest's own trouble (a usage error, an internal error) stands
        interrupted = self.report.interrupted
        if interrupted is None and exitstatus == pytest.ExitCode.INTERRUPTED:
            interrupted = cancelled or str(session.shouldstop or "KeyboardInterrupt")
        loaded = config.stash.get(SUITE_CONFIG, None)
        self.gate = gate = decide(self.report, loaded, interrupted)
        # Other tests of the same run (a project's own) failing keep the run failed.
        others_failed = exitstatus == pytest.ExitCode.TESTS_FAILED and gate.exit_code != FAILED
        session.exitstatus = FAILED if others_failed else gate.exit_code
        if others_failed:
            self.gate = gate = replace(
                gate, notes=[*gate.notes, "other tests of this run failed: the run exits 1"]
            )
        _add_to_junit(config, self.report, gate)
        if loaded is not None and (loaded.report or loaded.html_report):
            paths = ReportPaths(loaded.report, loaded.html_report)
            self.report.write(paths, gate.lines(), loaded.described(), gate.outcome)

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        lines = self.report.lines(self.gate.lines() if self.gate is not None else [])
        if lines:
            terminalreporter.write_sep("=", "Explain API contract")
            for line in lines:
                terminalreporter.write_line(line)
        if self.gate is not None and under_github_actions():
            redactor = terminalreporter.config.stash[REDACTOR]  # as JUnit's copy of them
            for line in workflow_commands(self.report, self.gate):
                terminalreporter.write_line(redactor.text(line) if redactor.active else line)
