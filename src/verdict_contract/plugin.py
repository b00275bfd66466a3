"""The pytest plugin (the ``pytest11`` entry point) that integrators get with the install.

It gives the mock (over HTTP, or in-process for httpx and requests), the verdict factory and the
per-kind parametrisation, and registers nothing else: the fixtures, the ``verdict_mock`` marker
and ``--verdict-seed``. The contract suite's own plugin (:mod:`verdict_contract.suite`) is
registered only in runs that collect the suite. Imports stay inside the fixtures, so runs that
use none of them pay nothing (``benchmarks/bench_plugin_load.py``).

Each test gets exactly the settings it asks for: ``verdict_mock_settings`` (override it at any
scope) updated by the test's ``@pytest.mark.verdict_mock(...)`` marker. Live servers are kept
per distinct settings for the session (per xdist worker), so order does not matter.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from .core.spec import VERDICT_OUTCOMES

if TYPE_CHECKING:
    from verdict_contract.mockserver import Settings
    from verdict_contract.mockserver.factory import MakeVerdict
    from verdict_contract.testing.inprocess import InProcessApp
    from verdict_contract.testing.mocks import (
        ResponsesVerdictMock,
        RespxVerdictMock,
        VerdictMock,
    )

    from .core.spec import VerdictRow

MARKER = "verdict_mock"
SEED_OPTION = "--verdict-seed"
COVERAGE_OPTION = "--verdict-coverage"
COVERAGE_JSON_OPTION = "--verdict-coverage-json"
REQUIRE_OPTION = "--verdict-require-coverage"
REQUIRE_PER_OPTION = "--verdict-require-coverage-per"
COVERAGE_PLUGIN = "verdict-coverage"
SUITE_PLUGIN = "verdict_contract.suite"
CHECK_SCRIPTS = "assert_all_scripts_used"
"""A ``verdict_mock`` marker argument, not a setting: check every script was used at teardown."""
BASE_URL = "base_url"
"""A ``verdict_mock`` marker argument, not a setting: where the in-process mocks answer."""
MAX_LIVE_SERVERS = 4
"""Live servers kept at once for distinct settings; the least recently used one stops first."""
MAX_IN_PROCESS_MOCKS = 16
"""In-process mocks kept at once for distinct settings; the least recently used one goes first."""


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
    group.addoption(
        COVERAGE_OPTION,
        action="store_true",
        default=False,
        help="after the run, print which of the spec's answers the verdict fixtures served "
        "the tests (every behaviour id, per test module and client), and the client's habits",
    )
    group.addoption(
        COVERAGE_JSON_OPTION,
        metavar="PATH",
        default=None,
        help="write that coverage as JSON to PATH",
    )
    group.addoption(
        REQUIRE_OPTION,
        metavar="IDS",
        default=None,
        help="fail the run if a behaviour id of IDS (comma-separated) was never served; "
        "all: every answer a correct client can meet",
    )
    group.addoption(
        REQUIRE_PER_OPTION,
        choices=("run", "client", "module"),  # testing.coverage.Per
        default=None,
        help="of what --verdict-require-coverage asks each behaviour: the run as a whole "
        "(default), each client (httpx, requests, http), or each test module's each client",
    )


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> Iterator[None]:
    """Register the suite's plugin in a run that collects the suite, before its options parse;
    once the initial conftests declared theirs, answer a mistyped option with the closest."""
    from verdict_contract.contract_tests.activation import collects_suite

    namespace = early_config.known_args_namespace
    paths = [str(arg) for arg in namespace.file_or_dir or []]
    if not paths and early_config.invocation_params.dir == early_config.rootpath:
        paths = [str(p) for p in early_config.getini("testpaths")]
    invoked = early_config.invocation_params.dir
    suite = collects_suite(paths or ["."], bool(namespace.pyargs), invoked)
    if suite:
        early_config.pluginmanager.import_plugin(SUITE_PLUGIN)  # a no-op if given with -p
    yield
    if suite:
        from verdict_contract.contract_tests.hooks import reject_typos

        reject_typos(parser, args)


def pytest_assertrepr_compare(op: str, left: object, right: object) -> list[str] | None:
    """A comparison with a mock's ``headers`` shows their masked repr, not pytest's diff of the
    items (which would print the key)."""
    from .core.redact import KeyHeaders

    if isinstance(left, KeyHeaders) or isinstance(right, KeyHeaders):
        return [f"{left!r} {op} {right!r}"]
    return None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(**settings): the mock's Settings for this test, e.g. "
        '@pytest.mark.verdict_mock(rate_limit="2/60", api_keys=["k1"])',
    )
    show = bool(config.getoption(COVERAGE_OPTION))
    json_path = config.getoption(COVERAGE_JSON_OPTION)
    require = config.getoption(REQUIRE_OPTION)
    for option, value, wanted in (
        (COVERAGE_JSON_OPTION, json_path, "a file's path"),
        (REQUIRE_OPTION, require, "behaviour ids (all, or ID,ID,...)"),
    ):
        if value is not None and not value.replace(",", " ").strip():  # not taken as not given
            raise pytest.UsageError(f"{option}: received an empty value; documented: {wanted}")
    per = config.getoption(REQUIRE_PER_OPTION)
    if per and not require:
        raise pytest.UsageError(f"{REQUIRE_PER_OPTION} needs {REQUIRE_OPTION}: give both")
    if show or json_path or require:  # its hooks join only the runs that ask for them
        from verdict_contract.testing.coverage import CoveragePlugin

        plugin = CoveragePlugin(config, show, json_path, require, per or "run")
        config.pluginmanager.register(plugin, COVERAGE_PLUGIN)


def _gathered(request: pytest.FixtureRequest, mock: VerdictMock) -> None:
    """With ``--verdict-coverage``: this test's journal, counted at its teardown."""
    plugin = request.config.pluginmanager.get_plugin(COVERAGE_PLUGIN)
    if plugin is not None:
        plugin.add(request.node.nodeid, mock)


def _seed(config: pytest.Config) -> str | None:
    """``--verdict-seed``, else the ``verdict_seed`` ini value, else None (the mock's default)."""
    seed = config.getoption(SEED_OPTION) or config.getini("verdict_seed")
    return str(seed) if seed else None


def default_settings(config: pytest.Config, **changes: Any) -> Settings:
    """The plugin's settings (a free port, ``--verdict-seed``) with ``changes`` on top.

    Build a ``verdict_mock_settings`` override on it, at any scope::

        @pytest.fixture(scope="session")
        def verdict_mock_settings(pytestconfig):
            return default_settings(pytestconfig, api_keys=["team-key"])
    """
    from verdict_contract.core.errors import SettingsError
    from verdict_contract.mockserver import Settings

    seed = _seed(config)
    base: dict[str, Any] = {"port": 0} | ({"seed": seed} if seed else {})
    try:
        return Settings(**(base | changes))
    except SettingsError as exc:
        problem = str(exc)  # failed outside the except: one line, no traceback nor its locals
    pytest.fail(f"default_settings: {problem}", pytrace=False)


def _keep_defaults(config: pytest.Config, settings: Settings) -> Settings:
    """An override that left the port or seed at Settings' own default keeps the plugin's."""
    from dataclasses import fields, replace

    own = {f.name: f.default for f in fields(settings)}
    seed = _seed(config)
    keep: dict[str, Any] = {}
    if settings.port == own["port"]:
        keep["port"] = 0  # never the port a running verdict-mock listens on
    if seed and settings.seed == own["seed"]:
        keep["seed"] = seed
    return replace(settings, **keep) if keep else settings


@pytest.fixture
def verdict_mock_settings(pytestconfig: pytest.Config) -> Settings:
    """The mock's settings for this test; override it (any scope) with :func:`default_settings`.

    An override that leaves ``port`` or ``seed`` at ``Settings``' defaults still gets a free
    port and ``--verdict-seed``; a marker changes what it names on top.
    """
    return default_settings(pytestconfig)


def _settings_for(request: pytest.FixtureRequest, base: Settings) -> Settings:
    """``base`` updated by the test's ``verdict_mock`` markers (the closest one wins)."""
    from dataclasses import fields, replace

    base = _keep_defaults(request.config, base)
    changes: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers(MARKER))):
        if marker.args:
            pytest.fail(f"@pytest.mark.{MARKER} takes keyword arguments only", pytrace=False)
        changes.update(marker.kwargs)
    changes.pop(CHECK_SCRIPTS, None)
    changes.pop(BASE_URL, None)
    known = {f.name for f in fields(base)}
    unknown = sorted(set(changes) - known)
    if unknown:
        from .core.suggest import closest

        named = []
        for name in unknown:
            close = closest(name, [*known, CHECK_SCRIPTS, BASE_URL])
            named.append(f"{name!r} (did you mean {close!r}?)" if close else repr(name))
        pytest.fail(
            f"@pytest.mark.{MARKER}: unknown setting(s) {', '.join(named)}; the mock's settings "
            "are verdict_contract.mockserver.Settings' fields (verdict-mock --help)",
            pytrace=False,
        )
    try:
        return replace(base, **changes)
    except ValueError as exc:
        problem = str(exc)
    pytest.fail(f"@pytest.mark.{MARKER}: {problem}", pytrace=False)


_Built = TypeVar("_Built")


def _built(build: Callable[[Settings], _Built], settings: Settings) -> _Built:
    """``build(settings)``: a mock its settings cannot make (a missing extra) fails the test in
    one line, as a refused setting does."""
    __tracebackhide__ = True
    from verdict_contract.core.errors import SettingsError

    try:
        return build(settings)
    except SettingsError as exc:
        problem = str(exc)  # failed outside the except: the error is shown once
    pytest.fail(f"verdict_mock_settings or @pytest.mark.{MARKER}: {problem}", pytrace=False)


_Context = AbstractContextManager["VerdictMock"]


class _LiveServers:
    """Live mocks by settings, started on first use and stopped at the session's end (as
    pytest-httpserver keeps one server a session, cleared for each test)."""

    def __init__(self) -> None:
        self._running: OrderedDict[Settings, tuple[_Context, VerdictMock]] = OrderedDict()

    def __repr__(self) -> str:
        return f"_LiveServers({len(self._running)} running)"

    def get(self, settings: Settings) -> VerdictMock:
        from verdict_contract.testing.mocks import live_mock

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


class _InProcessMocks:
    """In-process mocks by settings: built on first use, reset for each test that takes one
    (bench_inprocess: a test costs 4.0 ms so, 4.2-4.4 ms building its own mock)."""

    def __init__(self) -> None:
        self._built: OrderedDict[Settings, InProcessApp] = OrderedDict()

    def __repr__(self) -> str:
        return f"_InProcessMocks({len(self._built)} built)"

    def get(self, settings: Settings) -> InProcessApp:
        from verdict_contract.testing.inprocess import InProcessApp

        target = self._built.pop(settings, None)
        if target is None:
            target = InProcessApp(settings)
        else:
            target.state.reset()
        self._built[settings] = target
        while len(self._built) > MAX_IN_PROCESS_MOCKS:
            self._built.popitem(last=False)[1].close()
        return target

    def close(self) -> None:
        while self._built:
            self._built.popitem()[1].close()


@pytest.fixture(scope="session")
def verdict_inprocess_mocks() -> Iterator[_InProcessMocks]:
    """The session's in-process mocks, one per distinct settings (per xdist worker)."""
    mocks = _InProcessMocks()
    yield mocks
    mocks.close()  # their connections to a shared state


def _base_url(request: pytest.FixtureRequest, default: str) -> str:
    """``@pytest.mark.verdict_mock(base_url=...)``: where an in-process mock answers (the
    closest marker that names one), checked; else ``default``."""
    from verdict_contract.core.errors import SettingsError
    from verdict_contract.testing.mocks import checked_base_url

    for marker in request.node.iter_markers(MARKER):
        if BASE_URL in marker.kwargs:
            try:
                return checked_base_url(marker.kwargs[BASE_URL])
            except SettingsError as exc:
                problem = str(exc)  # failed outside the except: the error is shown once
            pytest.fail(f"@pytest.mark.{MARKER}: {problem}", pytrace=False)
    return default


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
    # A marker's base_url is for the in-process fixtures: this one serves at its own address.
    mock = _built(verdict_mock_servers.get, _settings_for(request, verdict_mock_settings))
    mock.reset()
    yield mock
    _gathered(request, mock)
    _checked_at_teardown(request, mock)


@pytest.fixture
def verdict_respx(
    request: pytest.FixtureRequest,
    verdict_mock_settings: Settings,
    verdict_inprocess_mocks: _InProcessMocks,
) -> Iterator[RespxVerdictMock]:
    """httpx and httpx2 requests to ``verdict_respx.base_url`` answered in-process (respx), same
    settings; ``@pytest.mark.verdict_mock(base_url="https://api.example/v2")`` moves it."""
    __tracebackhide__ = True  # a failed check at teardown points at the test, not here
    from verdict_contract.testing.mocks import RESPX_BASE_URL, respx_mock

    target = _built(verdict_inprocess_mocks.get, _settings_for(request, verdict_mock_settings))
    with respx_mock(_base_url(request, RESPX_BASE_URL), target=target) as mock:
        yield mock
        _gathered(request, mock)
        _checked_at_teardown(request, mock)


@pytest.fixture
def verdict_responses(
    request: pytest.FixtureRequest,
    verdict_mock_settings: Settings,
    verdict_inprocess_mocks: _InProcessMocks,
) -> Iterator[ResponsesVerdictMock]:
    """requests calls to ``verdict_responses.base_url`` answered in-process (responses);
    ``@pytest.mark.verdict_mock(base_url=...)`` moves it."""
    __tracebackhide__ = True  # a failed check at teardown points at the test, not here
    from verdict_contract.testing.mocks import RESPONSES_BASE_URL, responses_mock

    target = _built(verdict_inprocess_mocks.get, _settings_for(request, verdict_mock_settings))
    with responses_mock(_base_url(request, RESPONSES_BASE_URL), target=target) as mock:
        yield mock
        _gathered(request, mock)
        _checked_at_teardown(request, mock)


@pytest.fixture
def make_verdict(pytestconfig: pytest.Config) -> MakeVerdict:
    """``make_verdict(verdict=..., conclusive=..., **overrides)``, seeded by ``--verdict-seed``."""
    from functools import partial

    from verdict_contract.mockserver.factory import make_verdict

    seed = _seed(pytestconfig)
    return partial(make_verdict, seed=seed) if seed else make_verdict


@pytest.fixture(params=VERDICT_OUTCOMES, ids=[row.id for row in VERDICT_OUTCOMES])
def verdict_kind(request: pytest.FixtureRequest) -> VerdictRow:
    """Runs a test once per row of spec §2.4: seven (verdict, conclusive) pairs.

    Test ids read ``[contradicted.conclusive]``, ``[refused.inconclusive]``, ``[disputed]``
    (the behaviour ids of ``--verdict-coverage`` less ``verdict.``); ``mint(verdict=row)`` and
    ``make_verdict(row)`` take the row whole.
    """
    row: VerdictRow = request.param
    return row
