"""The pytest plugin (a ``pytest11`` entry point) that composes the mock and the suite.

It gives integrators the mock (over HTTP or respx), the verdict factory and the per-kind
parametrisation, and gives the contract suite its bundled mock (``verdict_bundled_mock``), so
neither of the two imports the other. Imports stay inside the fixtures, so runs that use none
of them pay nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest

from verdict_contract.core.spec import VERDICTS

if TYPE_CHECKING:
    from verdict_contract.mockserver import Settings
    from verdict_contract.mockserver.testing import VerdictMock


@pytest.fixture(scope="session")
def verdict_mock_settings() -> Settings:
    """Settings of the session's mock server; override this fixture to change them."""
    from verdict_contract.mockserver import Settings

    return Settings(port=0)


@pytest.fixture(scope="session")
def verdict_mock_server(verdict_mock_settings: Settings) -> Iterator[VerdictMock]:
    """The mock on 127.0.0.1, started once per session (per xdist worker)."""
    from verdict_contract.mockserver.testing import live_mock

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
    from verdict_contract.mockserver.testing import respx_mock

    with respx_mock() as mock:
        yield mock


@pytest.fixture
def make_verdict() -> Callable[..., dict[str, Any]]:
    """``make_verdict(verdict=..., conclusive=..., **overrides)``: a contract-valid body."""
    from verdict_contract.mockserver.factory import make_verdict

    return make_verdict


@pytest.fixture(params=VERDICTS)
def verdict_kind(request: pytest.FixtureRequest) -> str:
    """Runs a test once per verdict value of spec §2.2."""
    kind: str = request.param
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
