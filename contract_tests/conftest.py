"""Fixtures of the contract suite: the target (bundled mock or a URL) and its sessions."""

from __future__ import annotations

import inspect
import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from verdict_contract.contract_tests.body import Answer
from verdict_contract.contract_tests.client import (
    BrokenAnswer,
    ExplainClient,
    RunStopped,
    Throttled,
)
from verdict_contract.contract_tests.config import flag
from verdict_contract.contract_tests.hooks import suite_config
from verdict_contract.contract_tests.maxrate import Pace, worker_count
from verdict_contract.contract_tests.report import ADVISORY, SESSION, TARGET
from verdict_contract.contract_tests.shared import (
    answer_from_json,
    answer_to_json,
    once,
    run_folder,
)
from verdict_contract.contract_tests.target import MockProvider, Target
from verdict_contract.contract_tests.throttling import THROTTLING
from verdict_contract.core.redact import Secret
from verdict_contract.core.spec import VERDICT_OUTCOMES, VERDICTS
from verdict_contract.core.violations import describe


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
        workers = worker_count(request.config)
        rate = config.max_rate
        pace = Pace.of(rate.budget, rate.window, workers) if rate is not None else None
        client = ExplainClient(
            base_url,
            key,
            config.request_timeout,
            config.wait_budget,
            ca_bundle=config.ca_bundle,
            pace=pace,
            workers=workers,
            call_timeout=config.call_timeout,
            control_token=config.control_token,
        )
        stack.callback(client.close)
        yield Target(base_url, client, config, mock, bundled=config.base_url is None)


@pytest.fixture(scope="session")
def run_shared(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Path | None:
    """The folder the run's xdist workers share values in; None in a run without workers."""
    return run_folder(pytestconfig, tmp_path_factory.getbasetemp())


@pytest.fixture(autouse=True)
def spec_clause(request: pytest.FixtureRequest) -> str | None:
    """The check's spec clause, parametrized by the hooks so that its test id shows it."""
    return getattr(request, "param", None)  # None only for a test without a clause marker


@pytest.fixture(autouse=True)
def _record_target(request: pytest.FixtureRequest, contract_target: Target) -> Iterator[None]:
    label = "bundled mock" if contract_target.bundled else contract_target.base_url
    request.node.user_properties.append((TARGET, label))
    contract_target.client.sent.clear()  # what this check sends is what its failure replays
    yield
    advisories = contract_target.client.advisories
    request.node.user_properties += [(ADVISORY, text) for text in advisories]
    advisories.clear()
    request.node.user_properties.append((THROTTLING, contract_target.client.throttling().dumps()))


def _from_factory(factory: Callable[..., str | None]) -> list[str]:
    """The factory's sessions: one per verdict kind if it takes ``verdict``, else one; a factory
    that fails stops the run in one line (its words escaped and cut: they may be a service's)."""
    try:
        return _made_by(factory)
    except Exception as exc:
        said = describe(f"{type(exc).__name__}: {exc}", 300)
        raise RunStopped(f"{flag('session_factory')} failed: {said}") from None


def _made_by(factory: Callable[..., str | None]) -> list[str]:
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        parameters = {}  # type: ignore[assignment]
    takes = {n for n, p in parameters.items() if p.kind is not p.VAR_POSITIONAL}
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        takes |= {"verdict", "conclusive"}
    if "verdict" not in takes:
        made = [factory()]
    elif "conclusive" in takes:
        made = [factory(verdict=v, conclusive=c) for v, c in VERDICT_OUTCOMES]
    else:
        made = [factory(verdict=v) for v in VERDICTS]
    return [str(n) for n in made if n is not None]  # None: no session of that kind


@pytest.fixture(scope="session")
def fresh_sessions(contract_target: Target, run_shared: Path | None) -> list[str]:
    """Fresh session ids, made once per run: minted on a mock (every verdict kind), else given
    or made by the factory (once per kind when it takes ``verdict``)."""

    def make() -> list[str]:
        if contract_target.mock:
            client = contract_target.client
            return [client.mint(verdict=v, conclusive=c) for v, c in VERDICT_OUTCOMES]
        config = contract_target.config
        ids = list(config.session_ids)
        if config.session_factory is not None:
            ids += _from_factory(config.session_factory)
        return ids

    def dump(ids: list[str]) -> list[str]:
        return ids

    def load(stored: list[str]) -> list[str]:
        return [str(n) for n in stored]

    ids = once(run_shared, "sessions", make, dump, load)
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
def session_answers(
    contract_target: Target, fresh_sessions: list[str], run_shared: Path | None
) -> list[Answer]:
    """The answer for every fresh session, fetched once per run (shared by xdist workers).

    A session whose call broke or stayed throttled is kept with the reason, so the other
    sessions are still checked.
    """

    def fetch() -> list[Answer]:
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
        return answers

    def dump(answers: list[Answer]) -> list[dict[str, object]]:
        return [answer_to_json(a) for a in answers]

    def load(stored: list[dict[str, object]]) -> list[Answer]:
        return [answer_from_json(a) for a in stored]

    return once(run_shared, "answers", fetch, dump, load)


@pytest.fixture
def verdict_answers(request: pytest.FixtureRequest, session_answers: list[Answer]) -> list[Answer]:
    """The run's answers, each session's outcome recorded for the summary's coverage.

    If every session stayed throttled, the check ends as throttled: nothing could be checked.
    """
    for answer in session_answers:
        request.node.user_properties.append((SESSION, json.dumps(answer.coverage())))
    if all(a.throttled for a in session_answers):
        raise Throttled(session_answers[0].problem or "throttled")
    return session_answers


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
