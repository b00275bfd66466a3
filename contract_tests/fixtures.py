"""The integrators' fixtures (a ``pytest11`` entry point): the mock, over HTTP or respx.

Also the verdict factory and the per-kind parametrisation. Imports stay inside the fixtures,
so runs that use none of them pay nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from contract_tests.spec import VERDICTS

if TYPE_CHECKING:
    from mockserver import Settings
    from mockserver.testing import VerdictMock


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
