"""Fixtures of the contract suite: the target (bundled mock or a URL) and its sessions."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from verdict_contract.contract_tests.body import Answer
from verdict_contract.contract_tests.client import BrokenAnswer, ExplainClient, Throttled
from verdict_contract.contract_tests.config import flag
from verdict_contract.contract_tests.hooks import suite_config
from verdict_contract.contract_tests.report import TARGET
from verdict_contract.contract_tests.target import MockProvider, Target
from verdict_contract.core.redact import Secret
from verdict_contract.core.spec import VERDICT_OUTCOMES


@pytest.fixture(scope="session")
def contract_target(request: pytest.FixtureRequest) -> Iterator[Target]:
    config = suite_config(request.config)
    provider: MockProvider = request.getfixturevalue("verdict_bundled_mock")
    with ExitStack() as stack:
        if config.base_url is None:
            base_url, mock = stack.enter_context(provider.serve()), True
            key = Secret(provider.default_api_key)
        else:
            base_url, mock = config.base_url, config.mock_target
            key = config.api_key or Secret(provider.default_api_key)
        client = ExplainClient(base_url, key, config.request_timeout, config.wait_budget)
        stack.callback(client.close)
        yield Target(base_url, client, config, mock, bundled=config.base_url is None)


@pytest.fixture(autouse=True)
def spec_clause(request: pytest.FixtureRequest) -> str | None:
    """The check's spec clause, parametrized by the hooks so that its test id shows it."""
    return getattr(request, "param", None)  # None only for a test without a clause marker


@pytest.fixture(autouse=True)
def _record_target(request: pytest.FixtureRequest, contract_target: Target) -> None:
    label = "bundled mock" if contract_target.bundled else contract_target.base_url
    request.node.user_properties.append((TARGET, label))
    contract_target.client.sent.clear()  # what this check sends is what its failure replays


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
        pytest.skip(
            f"needs a fresh session id: pass {flag('session_id')} ID or "
            f"{flag('session_factory')} MODULE:CALLABLE"
        )
    return ids


@pytest.fixture(scope="session")
def any_session(contract_target: Target) -> str:
    """An id for checks that never reach the lookup (auth, CORS): fresh if one is at hand."""
    if contract_target.mock:
        return contract_target.client.mint()
    ids = contract_target.config.session_ids
    return ids[0] if ids else f"verdict-contract-unknown-{uuid.uuid4().hex}"


@pytest.fixture(scope="session")
def verdict_answers(contract_target: Target, fresh_sessions: list[str]) -> list[Answer]:
    """The answer for every fresh session, fetched once per run; each stands alone.

    A session whose call broke or stayed throttled is kept with the reason, so the other
    sessions are still checked; if every one is throttled, the checks end as throttled.
    """
    answers = []
    client = contract_target.client
    for n in fresh_sessions:
        try:
            response = client.explain(n)
        except Throttled as exc:
            answers.append(Answer(n, None, str(exc), throttled=True))
            continue
        except BrokenAnswer as exc:
            answers.append(Answer(n, None, str(exc), curl=client.sent[-1].curl()))
            continue
        answers.append(Answer(n, response, curl=client.sent[-1].curl()))
    if all(a.throttled for a in answers):
        raise Throttled(answers[0].problem or "throttled")
    return answers


@pytest.fixture(scope="session")
def expired_session(contract_target: Target) -> str:
    if contract_target.mock:
        return contract_target.client.mint(age_seconds=contract_target.lifetime() + 1)
    if contract_target.config.expired_session_id is None:
        pytest.skip(f"needs an expired session id: pass {flag('expired_session_id')} ID")
    return contract_target.config.expired_session_id


@pytest.fixture
def unknown_session() -> str:
    return f"verdict-contract-unknown-{uuid.uuid4().hex}"
