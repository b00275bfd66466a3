"""The suite's pytest hooks (a ``pytest11`` entry point): options, redaction, the summary.

They stay inert in other projects' runs: nothing is checked unless the contract suite is
collected. The fixtures that compose the suite with the mock are in :mod:`verdict_contract.plugin`.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from verdict_contract.contract_tests import config as target
from verdict_contract.contract_tests.report import CLAUSE, SuiteReport

from verdict_contract.core.redact import Redactor

REDACTOR = pytest.StashKey[Redactor]()
REPORT = pytest.StashKey[SuiteReport]()
SUITE_CONFIG = pytest.StashKey[target.SuiteConfig]()


def pytest_addoption(parser: pytest.Parser) -> None:
    target.add_options(parser)


def _suite_requested(config: pytest.Config) -> bool:
    """Whether this run collects the contract suite (by path, or with --pyargs)."""
    package = Path(__file__).resolve().parent
    name = __name__.rpartition(".")[0]  # verdict_contract.contract_tests
    for arg in config.args:
        target = str(arg).split("::")[0]
        if config.option.pyargs and (target == name or target.startswith(f"{name}.")):
            return True
        path = (config.invocation_params.dir / target).resolve()
        if path == package or package in path.parents:
            return True
    return False


def suite_config(config: pytest.Config) -> target.SuiteConfig:
    """The suite's validated options, resolved once per process."""
    if SUITE_CONFIG not in config.stash:
        loaded = target.load_config(config)
        if loaded.api_key is not None:
            config.stash[REDACTOR].add(loaded.api_key.reveal())
        config.stash[SUITE_CONFIG] = loaded
    return config.stash[SUITE_CONFIG]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "clause(text): the spec clause a contract check enforces")
    config.stash[REDACTOR] = Redactor()
    config.stash[REPORT] = SuiteReport()
    config.pluginmanager.register(_Summary(config.stash[REPORT]), "verdict-contract-summary")
    # pytest-base-url copies its ini value into the option on the controller only; do it on
    # pytest-xdist workers too, so `pytest -n 2` targets the ini's URL as well.
    if hasattr(config, "workerinput") and not config.getoption("base_url", None):
        ini = config.getini("base_url")
        if ini:
            config.option.base_url = ini
    # Secrets are masked in log records (captured logs, live logs, JUnit system-out).
    config.add_cleanup(config.stash[REDACTOR].redact_logs())
    if _suite_requested(config) and not hasattr(config, "workerinput"):
        suite_config(config)  # a configuration mistake stops the run here, in one line


def pytest_itemcollected(item: pytest.Item) -> None:
    marker = item.get_closest_marker("clause")
    if marker is not None and marker.args:
        item.user_properties.append((CLAUSE, str(marker.args[0])))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    redactor = item.config.stash[REDACTOR]
    if redactor.secrets:
        if report.longrepr is not None:
            text = str(report.longrepr)
            cleaned = redactor.text(text)
            if cleaned != text:
                report.longrepr = cleaned
        report.sections = [(name, redactor.text(content)) for name, content in report.sections]
        report.user_properties = [
            (name, redactor.text(str(value))) for name, value in report.user_properties
        ]
    return report


class _Summary:
    """Collects the clause of every test report and prints the table at the end."""

    def __init__(self, report: SuiteReport) -> None:
        self.report = report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.report.record(report)

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        lines = self.report.lines()
        if lines:
            terminalreporter.write_sep("=", "Explain API contract")
            for line in lines:
                terminalreporter.write_line(line)
