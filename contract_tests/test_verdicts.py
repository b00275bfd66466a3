"""A fresh session's answer: a JSON verdict object that keeps the schema-7 contract.

Each session stands alone: a session whose answer is broken is reported once, by
``test_success_is_a_json_object``, and every other session is still fully checked by the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from verdict_contract.core.spec import SCHEMA_VERSION
from verdict_contract.core.validator import check_repeat, unknown_properties, validate_verdict
from verdict_contract.core.violations import format_violations

from .body import Answer, is_json, media_type
from .config import ENV, flag
from .diff import documented_diff
from .report import BUILD, SCHEMA, UNDOCUMENTED, VERIFIED
from .target import Target

pytestmark = pytest.mark.checks_verdicts  # every check here reads verdict bodies


def _fail_if(failures: list[str]) -> None:
    """One message per session, each said once (no assertion introspection repeating it)."""
    if failures:
        pytest.fail("\n".join(failures), pytrace=False)


def _verified(request: pytest.FixtureRequest, count: int) -> None:
    request.node.user_properties.append((VERIFIED, str(count)))


Verdict = dict[str, Any]


def _check_each_verdict(
    request: pytest.FixtureRequest,
    answers: list[Answer],
    check: Callable[[Answer, Verdict], str | None],
) -> None:
    """``check`` every answer that is a verdict; fail once, with each session's problem.

    An answer that is no verdict is passed over: ``test_success_is_a_json_object`` reports it.
    """
    failures = []
    checked = 0
    for answer in answers:
        body = answer.verdict()
        if body is None:
            continue
        checked += 1
        problem = check(answer, body)
        if problem:  # with the session's replay, unless the check wrote its own
            failures.append(problem if "replay" in problem else problem + answer.replay())
    _verified(request, checked)
    _fail_if(failures)
    if not checked:  # a clause is not shown to hold by zero bodies
        pytest.skip(
            f"no verdict body to check: none of the {len(answers)} sessions answered 200 with "
            "one (see test_success_is_a_json_object)"
        )


def _answer_problem(answer: Answer) -> str | None:
    if answer.throttled:
        return None  # not a breach; counted by the summary as unverified
    if answer.response is None:
        return answer.problem
    if answer.status == 401:
        return (
            f"received 401: the API key is rejected (check {flag('api_key')} / {ENV['api_key']}); "
            "documented: 200 with the verdict for an authorised call"
        )
    if answer.status == 404:
        return (
            "received 404; documented: 200 with the verdict (is the id fresh, collected less "
            "than 15 minutes ago?)"
        )
    if answer.status != 200:
        return f"received status {answer.status}; documented: 200 with the verdict"
    received = answer.response.headers.get("content-type")
    if not is_json(media_type(answer.response)):
        return (
            f"received Content-Type {received!r}; documented: a JSON body (application/json "
            "or a +json type)"
        )
    _, problem = answer.body()
    return problem


@pytest.mark.clause("§4 GET /e, §7")
def test_success_is_a_json_object(
    request: pytest.FixtureRequest, verdict_answers: list[Answer]
) -> None:
    failures = []
    for answer in verdict_answers:
        problem = _answer_problem(answer)
        if problem:
            failures.append(f"{answer.where()}: {problem}{answer.replay()}")
    _verified(request, sum(a.verdict() is not None for a in verdict_answers))
    _fail_if(failures)


@pytest.mark.clause("§2.2-§2.4")
def test_verdicts_keep_the_contract(
    request: pytest.FixtureRequest, contract_target: Target, verdict_answers: list[Answer]
) -> None:
    def check(answer: Answer, body: Verdict) -> str | None:
        provenance = body.get("provenance")
        build = provenance.get("build") if isinstance(provenance, dict) else None
        request.node.user_properties.append((BUILD, build))
        request.node.user_properties.append((SCHEMA, body.get("schema")))
        violations = validate_verdict(body, strict=contract_target.strict)
        if violations:
            return format_violations(violations, subject=answer.where())
        if not contract_target.strict:
            # Added fields are allowed (spec §9.2): listed in the summary, never a failure.
            for added in unknown_properties(body):
                request.node.user_properties.append((UNDOCUMENTED, added.path))
        return None

    _check_each_verdict(request, verdict_answers, check)


@pytest.mark.clause("§9.1, §9.3")
def test_schema_version(request: pytest.FixtureRequest, verdict_answers: list[Answer]) -> None:
    def check(answer: Answer, body: Verdict) -> str | None:
        if body.get("schema") == SCHEMA_VERSION:
            return None
        return (
            f"{answer.where()}: schema version mismatch: the service speaks schema "
            f"{body.get('schema')!r}, this suite checks schema {SCHEMA_VERSION}"
        )

    _check_each_verdict(request, verdict_answers, check)


def _changed(answer: Answer, first: Verdict, later: Verdict, when: str, replay: str) -> str | None:
    """The documented fields that differ between a session's first verdict and a later one
    (the registry's ``verdict_never_changes``), shown as a diff.

    ``replay`` is the later call's replay line, named as the diff names that call.
    """
    changed = check_repeat(first, later)
    if not changed:
        return None
    diff = documented_diff(first, later, replay.partition(":")[0])
    shown = "\n".join(f"    {line}" for line in diff or [str(v) for v in changed])
    return (
        f"{answer.where()}: the verdict changed {when}; documented: a verdict is immutable once "
        f"produced (documented fields compared):\n{shown}"
        f"\n    replay, first call: {answer.curl}\n    replay, {replay}"
    )


@pytest.mark.clause("§3, §8")
def test_verdict_is_immutable(
    request: pytest.FixtureRequest, contract_target: Target, verdict_answers: list[Answer]
) -> None:
    """A second call gives the same documented verdict; undocumented fields may vary."""
    client = contract_target.client

    def check(answer: Answer, first: Verdict) -> str | None:
        again = Answer(answer.session, client.explain(answer.session))
        second = f"second call: {client.sent[-1].curl()}"
        if again.status != 200:
            return (
                f"{answer.where()}: the second call got {again.status}; documented: 200"
                f"\n    replay, first call: {answer.curl}\n    replay, {second}"
            )
        body = again.verdict()
        if body is None:
            return (
                f"{answer.where()}: the second call's body is not a JSON object"
                f"\n    replay, first call: {answer.curl}\n    replay, {second}"
            )
        return _changed(answer, first, body, "between two calls", second)

    _check_each_verdict(request, verdict_answers, check)


@pytest.mark.clause("§3, §8")
@pytest.mark.run_last
def test_verdict_never_changes_during_the_run(
    request: pytest.FixtureRequest, contract_target: Target, verdict_answers: list[Answer]
) -> None:
    """Not only back to back: the first answer, from the run's start, against every verdict the
    session gave this process since (any check's call) and one more call at the run's end."""
    client = contract_target.client

    def check(answer: Answer, first: Verdict) -> str | None:
        last = client.explain(answer.session)
        for seen in client.verdicts.get(answer.session, {}).values():  # before any expiry
            problem = _changed(
                answer, first, seen.body, "during the run", f"a later call: {seen.curl}"
            )
            if problem:
                return problem
        if last.status_code == 404:
            return None  # expired during a long run (§3): no final answer to compare
        if last.status_code != 200:
            return (
                f"{answer.where()}: at the run's end it answered {last.status_code}; documented: "
                f"200 until it expires\n    replay: {client.sent[-1].curl()}"
            )
        return None

    _check_each_verdict(request, verdict_answers, check)
