"""The contract suite's pytest plugin: its hooks and options, and the bundled mock it runs against.

It is registered only where the suite runs: by :mod:`verdict_contract.plugin` when a run collects
the suite (``verdict-contract check``, ``pytest --pyargs verdict_contract.contract_tests``,
``pytest`` in this repository), or explicitly with ``-p verdict_contract.suite``. An
integrator's own runs never see its options, markers or summary.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

pytest_plugins = ["verdict_contract.contract_tests.hooks"]


class BundledMock:
    """The suite's :class:`~verdict_contract.contract_tests.target.MockProvider`."""

    @property
    def default_api_key(self) -> str:
        from verdict_contract.mockserver.settings import DEFAULT_API_KEY

        return DEFAULT_API_KEY

    @contextmanager
    def serve(self, rate_limit: str | None = None) -> Iterator[str]:
        from verdict_contract.mockserver.settings import Settings
        from verdict_contract.testing.mocks import live_mock

        from .core.rates import RateLimit

        settings = Settings(port=0)
        if rate_limit is not None:
            settings = Settings(port=0, rate_limit=RateLimit.parse(rate_limit))
        with live_mock(settings) as mock:
            yield mock.base_url


@pytest.fixture(scope="session")
def verdict_bundled_mock() -> BundledMock:
    """Starts the mocks the contract suite runs against when no ``--base-url`` is given."""
    return BundledMock()
