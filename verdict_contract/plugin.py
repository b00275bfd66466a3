"""The pytest plugin (a ``pytest11`` entry point) that composes the mock and the suite.

It gives integrators the mock (over HTTP, or in-process for httpx and requests), the verdict
factory and the per-kind parametrisation, and gives the contract suite its bundled mock
(``verdict_bundled_mock``), so neither of the two imports the other. Imports stay inside the
fixtures, so runs that use none of them pay nothing (``benchmarks/bench_plugin_load.py``).

Each test gets exactly the settings it asks for: ``verdict_mock_settings`` (override it at any
scope) updated by the test's ``@pytest.mark.verdict_mock(...)`` marker. Live servers are kept
per distinct settings for the session (per xdist worker), so order does not matter.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

import pytest

from verdict_contract.core.spec import VERDICTS

if TYPE_CHECKING:
    from verdict_contract.core.spec import VerdictKind
    from verdict_contract.mockserver import Settings
    from verdict_contract.mockserver.factory import MakeVerdict
    from verdict_contract.mockserver.testing import (
        ResponsesVerdictMock,
        RespxVerdictMock,
        VerdictMock,
    )

MARKER = "verdict_mock"
SEED_OPTION = "--verdict-seed"
CHECK_SCRIPTS = "assert_all_scripts_used"
"""A ``verdict_mock`` marker argument, not a setting: check every script was used at teardown."""
MAX_LIVE_SERVERS = 4
"""Live servers kept at once for distinct settings; the least recently used one stops first."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("verdict-contract", "verdict-contract mock fixtures")
    group.addoption(
        SEED_OPTION,
        metavar="SEED",
        default=None,
        help="seed of the mock's generated verdicts, to reproduce a run's bodies "
        "[ini: verdict_seed]",
    )
    parser.addini("verdict_seed", "seed of the mock's generated verdicts", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(**settings): the mock's Settings for this test, e.g. "
        '@pytest.mark.verdict_mock(rate_limit="2/60", api_keys=["k1"])',
    )


@pytest.fixture
def verdict_mock_settings(pytestconfig: pytest.Config) -> Settings:
    """The mock's settings for this test; override this fixture (any scope) to change them."""
    from verdict_contract.mockserver import Settings

    seed = pytestconfig.getoption(SEED_OPTION) or pytestconfig.getini("verdict_seed")
    return Settings(port=0, seed=seed) if seed else Settings(port=0)


def _settings_for(request: pytest.FixtureRequest, base: Settings) -> Settings:
    """``base`` updated by the test's ``verdict_mock`` markers (the closest one wins)."""
    from dataclasses import fields, replace

    changes: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers(MARKER))):
        if marker.args:
            pytest.fail(f"@pytest.mark.{MARKER} takes keyword arguments only", pytrace=False)
        changes.update(marker.kwargs)
    changes.pop(CHECK_SCRIPTS, None)
    known = {f.name for f in fields(base)}
    unknown = sorted(set(changes) - known)
    if unknown:
        pytest.fail(
            f"@pytest.mark.{MARKER}: unknown setting(s) {unknown}; known: {sorted(known)}",
            pytrace=False,
        )
    try:
        return replace(base, **changes)
    except ValueError as exc:
        problem = str(exc)
    pytest.fail(f"@pytest.mark.{MARKER}: {problem}", pytrace=False)


_Context = AbstractContextManager["VerdictMock"]


class _LiveServers:
    """Live mocks by settings, started on first use and stopped at the session's end."""

    def __init__(self) -> None:
        self._running: OrderedDict[Settings, tuple[_Context, VerdictMock]] = OrderedDict()

    def __repr__(self) -> str:
        return f"_LiveServers({len(self._running)} running)"

    def get(self, settings: Settings) -> VerdictMock:
        from verdict_contract.mockserver.testing import live_mock

        if settings in self._running:
            self._running.move_to_end(settings)
            return self._running[settings][1]
        if len(self._running) >= MAX_LIVE_SERVERS:
            _, (oldest, _mock) = self._running.popitem(last=False)
            oldest.__exit__(None, None, None)
        context = live_mock(settings)
        mock = context.__enter__()
        self._running[settings] = (context, mock)
        return mock

    def close(self) -> None:
        while self._running:
            _, (context, _mock) = self._running.popitem()
            context.__exit__(None, None, None)


@pytest.fixture(scope="session")
def verdict_mock_servers() -> Iterator[_LiveServers]:
    """The session's live mocks, one per distinct settings (per xdist worker)."""
    servers = _LiveServers()
    yield servers
    servers.close()


def _checked_at_teardown(request: pytest.FixtureRequest, mock: VerdictMock) -> None:
    """``@pytest.mark.verdict_mock(assert_all_scripts_used=True)``: every script was used."""
    __tracebackhide__ = True
    marker = request.node.get_closest_marker(MARKER)
    if marker is not None and marker.kwargs.get(CHECK_SCRIPTS):
        mock.assert_all_scripts_used()


@pytest.fixture
def verdict_mock(
    request: pytest.FixtureRequest,
    verdict_mock_settings: Settings,
    verdict_mock_servers: _LiveServers,
) -> Iterator[VerdictMock]:
    """The mock over real HTTP on 127.0.0.1, with this test's settings, cleared for this test."""
    __tracebackhide__ = True  # a failed check at teardown points at the test, not here
    mock = verdict_mock_servers.get(_settings_for(request, verdict_mock_settings))
    mock.reset()
    yield mock
    _checked_at_teardown(request, mock)


@pytest.fixture
def verdict_respx(
    request: pytest.FixtureRequest, verdict_mock_settings: Settings
) -> Iterator[RespxVerdictMock]:
    """httpx requests to ``verdict_respx.base_url`` answered in-process (respx), same settings."""
    __tracebackhide__ = True  # a failed check at teardown points at the test, not here
    from verdict_contract.mockserver.testing import respx_mock

    with respx_mock(settings=_settings_for(request, verdict_mock_settings)) as mock:
        yield mock
        _checked_at_teardown(request, mock)


@pytest.fixture
def verdict_responses(
    request: pytest.FixtureRequest, verdict_mock_settings: Settings
) -> Iterator[ResponsesVerdictMock]:
    """requests calls to ``verdict_responses.base_url`` answered in-process (responses)."""
    __tracebackhide__ = True  # a failed check at teardown points at the test, not here
    from verdict_contract.mockserver.testing import responses_mock

    with responses_mock(settings=_settings_for(request, verdict_mock_settings)) as mock:
        yield mock
        _checked_at_teardown(request, mock)


@pytest.fixture
def make_verdict() -> MakeVerdict:
    """``make_verdict(verdict=..., conclusive=..., **overrides)``: a contract-valid body."""
    from verdict_contract.mockserver.factory import make_verdict

    return make_verdict


@pytest.fixture(params=VERDICTS)
def verdict_kind(request: pytest.FixtureRequest) -> VerdictKind:
    """Runs a test once per verdict value of spec §2.2."""
    kind: VerdictKind = request.param
    return kind


class _BundledMock:
    """The suite's :class:`~verdict_contract.contract_tests.target.MockProvider`."""

    @property
    def default_api_key(self) -> str:
        from verdict_contract.mockserver.settings import DEFAULT_API_KEY

        return DEFAULT_API_KEY

    @contextmanager
    def serve(self, rate_limit: str | None = None) -> Iterator[str]:
        from verdict_contract.mockserver.ratelimit import RateLimit
        from verdict_contract.mockserver.settings import Settings
        from verdict_contract.mockserver.testing import live_mock

        settings = Settings(port=0)
        if rate_limit is not None:
            settings = Settings(port=0, rate_limit=RateLimit.parse(rate_limit))
        with live_mock(settings) as mock:
            yield mock.base_url


@pytest.fixture(scope="session")
def verdict_bundled_mock() -> _BundledMock:
    """Starts the mocks the contract suite runs against when no ``--base-url`` is given."""
    return _BundledMock()
