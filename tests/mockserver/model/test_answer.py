"""model/answer.py: the one mapping from an exception to an answer, and the error shape."""

from __future__ import annotations

import json
import logging

import pytest

from verdict_contract.core.errors import SpecError, StateUnavailable
from verdict_contract.mockserver.model.answer import error_answer, failure_answer


def test_a_session_the_mock_cannot_honour_is_a_422_and_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answer = failure_answer(SpecError("its overrides break the schema"), "answering GET /e")
    assert answer.status == 422
    assert json.loads(answer.body)["error"]["code"] == "invalid_session"
    assert "its overrides break the schema" in answer.body.decode()
    assert not caplog.records


def test_a_state_store_that_did_not_answer_is_a_503_that_says_when_to_retry() -> None:
    answer = failure_answer(StateUnavailable("redis://h:6379/0", "timeout"), "answering GET /e")
    assert answer.status == 503
    assert ("Retry-After", "1") in answer.headers
    assert "redis://h:6379/0" in answer.body.decode()


def test_anything_else_is_a_400_never_a_5xx_and_is_logged_with_what_was_done(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="mockserver"):
        answer = failure_answer(KeyError("boom"), "proxying GET /e")
    assert answer.status == 400
    assert json.loads(answer.body)["error"]["code"] == "bad_request"
    assert "boom" not in answer.body.decode()  # an internal error's text is not shown
    assert [r.getMessage() for r in caplog.records] == ["unexpected error proxying GET /e"]


def test_the_error_shape_is_the_same_for_every_status() -> None:
    a, b = error_answer(404, "session_not_found", "gone"), failure_answer(ValueError(), "x")
    assert set(json.loads(a.body)) == set(json.loads(b.body)) == {"error"}
