"""Fixtures of the contract suite: the target (bundled mock or a URL) and its sessions."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from contract_tests.client import ExplainClient
from contract_tests.plugin import suite_config
from contract_tests.redact import Secret
from contract_tests.report import TARGET
from contract_tests.spec import SESSION_LIFETIME_SECONDS, VERDICT_OUTCOMES
from contract_tests.target import SuiteConfig


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


@pytest.fixture(scope="session")
def contract_target(request: pytest.FixtureRequest) -> Iterator[Target]:
    config = suite_config(request.config)
    server = None
    if config.base_url is None:
        from mockserver import DEFAULT_API_KEY, create_app
        from mockserver.serve import BackgroundServer

        server = BackgroundServer(create_app()).start()
        base_url, mock, key = server.base_url, True, Secret(DEFAULT_API_KEY)
    else:
        from mockserver import DEFAULT_API_KEY

        base_url, mock = config.base_url, config.mock_target
        key = config.api_key or Secret(DEFAULT_API_KEY)
    client = ExplainClient(base_url, key, config.request_timeout)
    try:
        yield Target(base_url, client, config, mock, bundled=server is not None)
    finally:
        client.close()
        if server is not None:
            server.stop()


@pytest.fixture(autouse=True)
def _record_target(request: pytest.FixtureRequest, contract_target: Target) -> None:
    label = "bundled mock" if contract_target.bundled else contract_target.base_url
    request.node.user_properties.append((TARGET, label))


@pytest.fixture(scope="session")
def fresh_sessions(contract_target: Target) -> list[str]:
    """Fresh session ids: minted on a mock (every verdict kind), given or made for a live one."""
    if contract_target.mock:
        return [contract_target.client.mint(verdict=v, conclusive=c) for v, c in VERDICT_OUTCOMES]
    config = contract_target.config
    ids = list(config.session_ids)
    if config.session_factory is not None:
        ids.append(config.session_factory())
    if not ids:
        pytest.skip("needs a fresh session id: pass --session-id ID or --session-factory M:F")
    return ids


@pytest.fixture(scope="session")
def any_session(contract_target: Target) -> str:
    """An id for checks that never reach the lookup (auth, CORS): fresh if one is at hand."""
    if contract_target.mock:
        return contract_target.client.mint()
    ids = contract_target.config.session_ids
    return ids[0] if ids else f"verdict-contract-unknown-{uuid.uuid4().hex}"


@pytest.fixture(scope="session")
def verdict_responses(
    contract_target: Target, fresh_sessions: list[str]
) -> dict[str, httpx.Response]:
    """The answer for every fresh session, fetched once per run."""
    return {n: contract_target.client.explain(n) for n in fresh_sessions}


@pytest.fixture(scope="session")
def expired_session(contract_target: Target) -> str:
    if contract_target.mock:
        return contract_target.client.mint(age_seconds=lifetime(contract_target) + 1)
    if contract_target.config.expired_session_id is None:
        pytest.skip("needs an expired session id: pass --expired-session-id ID")
    return contract_target.config.expired_session_id


def lifetime(target: Target) -> float:
    """The mock's session lifetime, from its health answer."""
    return float(target.client.mock_health().get("session_lifetime", SESSION_LIFETIME_SECONDS))


@pytest.fixture
def unknown_session() -> str:
    return f"verdict-contract-unknown-{uuid.uuid4().hex}"
