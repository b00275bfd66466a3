"""The pytest plugin (``pytest11``): options, redaction, the suite's summary, and fixtures.

It stays inert in other projects' runs: no server starts and nothing is checked unless a
fixture of ours is requested or the contract suite is collected.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from contract_tests import target
from contract_tests.redact import Redactor
from contract_tests.report import CLAUSE, SuiteReport
from contract_tests.spec import VERDICTS

if TYPE_CHECKING:
    from mockserver import Settings
    from mockserver.testing import VerdictMock

REDACTOR = pytest.StashKey[Redactor]()
REPORT = pytest.StashKey[SuiteReport]()
SUITE_CONFIG = pytest.StashKey[target.SuiteConfig]()


def pytest_addoption(parser: pytest.Parser) -> None:
    target.add_options(parser)


def _suite_requested(config: pytest.Config) -> bool:
    """Whether this run collects the contract suite (by path, or with --pyargs)."""
    package = Path(__file__).resolve().parent
    for arg in config.args:
        target = str(arg).split("::")[0]
        if config.option.pyargs and (
            target == package.name or target.startswith(f"{package.name}.")
        ):
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
    _install_log_redaction(config)
    if _suite_requested(config) and not hasattr(config, "workerinput"):
        suite_config(config)  # a configuration mistake stops the run here, in one line


def _install_log_redaction(config: pytest.Config) -> None:
    redactor = config.stash[REDACTOR]
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if redactor.secrets:
            message = record.getMessage()
            cleaned = redactor.text(message)
            if cleaned != message:
                record.msg, record.args = cleaned, None
        return record

    logging.setLogRecordFactory(factory)
    config.add_cleanup(lambda: logging.setLogRecordFactory(previous))


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


# Fixtures for integrators: the mock over real HTTP, through respx, and verdict factories.
# Imports stay inside them so that runs which use none of them pay nothing.


@pytest.fixture(scope="session")
def verdict_mock_settings() -> Settings:
    """Settings of the session's mock server; override this fixture to change them."""
    from mockserver import Settings

    return Settings(port=0)


@pytest.fixture(scope="session")
def verdict_mock_server(verdict_mock_settings: Settings) -> Iterator[VerdictMock]:
    """The mock on 127.0.0.1, started once per session (per xdist worker)."""
    from mockserver.testing import live_mock

    with live_mock(verdict_mock_settings) as mock:
        yield mock


@pytest.fixture
def verdict_mock(verdict_mock_server: VerdictMock) -> VerdictMock:
    """The running mock, with journal, counters and scripts cleared for this test."""
    verdict_mock_server.reset()
    return verdict_mock_server


@pytest.fixture
def verdict_respx() -> Iterator[VerdictMock]:
    """httpx requests to ``verdict_respx.base_url`` answered in-process by the mock app."""
    from mockserver.testing import respx_mock

    with respx_mock() as mock:
        yield mock


@pytest.fixture
def make_verdict() -> Callable[..., dict[str, Any]]:
    """``make_verdict(verdict=..., conclusive=..., **overrides)``: a contract-valid body."""
    from mockserver.factory import make_verdict

    return make_verdict


@pytest.fixture(params=VERDICTS)
def verdict_kind(request: pytest.FixtureRequest) -> str:
    """Runs a test once per verdict value of spec §2.2."""
    kind: str = request.param
    return kind
