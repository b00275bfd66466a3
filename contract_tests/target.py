"""The service under test, as the checks see it, and how the suite gets a mock to test.

The suite never imports the mock: when no URL is given, a :class:`MockProvider` (supplied by the
plugin that composes the two, as the fixture ``verdict_bundled_mock``) starts one.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from verdict_contract.core.spec import SESSION_LIFETIME_SECONDS

from .client import ExplainClient
from .config import SuiteConfig


class MockProvider(Protocol):
    """Starts mocks of the Explain API that answer the control API (``/_mock/``)."""

    @property
    def default_api_key(self) -> str:
        """The key a mock accepts when none is configured."""
        ...

    def serve(self, rate_limit: str | None = None) -> AbstractContextManager[str]:
        """Serve a mock on 127.0.0.1 for the block; yields its base URL."""
        ...


@dataclass
class Target:
    """The service under test, as the checks see it."""

    base_url: str
    client: ExplainClient
    config: SuiteConfig
    mock: bool  # answers the control API, so checks can mint the sessions they need
    bundled: bool  # started by this run

    @property
    def strict(self) -> bool:
        """The mock is held to the documented fields; a live service may add some."""
        return self.mock

    def lifetime(self) -> float:
        """The session lifetime: the mock's, from its health answer; else the spec's."""
        if not self.mock:
            return float(SESSION_LIFETIME_SECONDS)
        health = self.client.mock_health()
        return float(health.get("session_lifetime", SESSION_LIFETIME_SECONDS))
