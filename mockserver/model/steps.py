"""What a scripted step answers, and how an answer reads in the journal.

A connection fault (a reset, a cut body, a body that is not JSON) is an answer marked with
:data:`FAULT_HEADER`, for ``FaultMiddleware`` to enact on the connection and in-process
transports (respx) to read; the async server reads :attr:`.Answer.fault`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from http import HTTPStatus
from typing import Final

from .answer import CACHED_BODY_BYTES, NO_STORE, Answer, Result, error_answer, with_defaults
from .sessions import Step, parse_step

FAULT_HEADER: Final = "X-Verdict-Mock-Fault"

_STEP_ERRORS = {
    401: ("unauthorized", "scripted: missing or invalid API key"),
    404: ("session_not_found", "scripted: unknown or expired session"),
    429: ("rate_limited", "scripted: rate limit exceeded; retry after the announced time"),
    500: ("internal_error", "scripted: internal server error"),
    503: ("unavailable", "scripted: service unavailable; retry later"),
}
_STEP_HEADERS: dict[int, list[tuple[str, str]]] = {
    429: [("Retry-After", "1")],
    503: [("Retry-After", "1")],
    401: [("WWW-Authenticate", "Bearer")],
}


def _generic_error(status: int) -> tuple[str, str]:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = f"status {status}"
    return phrase.lower().replace(" ", "_").replace("-", "_"), f"scripted: {phrase}"


def scripted(step: Step, body: bytes) -> Answer | None:
    """The answer a step gives instead of the normal one; None for a delay (normal, late).
    One object per step and body up to :data:`.answer.CACHED_BODY_BYTES` (``always`` steps)."""
    return _kept_answer(step, body) if len(body) <= CACHED_BODY_BYTES else _answer(step, body)


def _answer(step: Step, body: bytes) -> Answer | None:
    if step.status is not None:  # headers None: the status's usual ones (Retry-After...)
        headers = _STEP_HEADERS.get(step.status, []) if step.headers is None else step.headers
        if 200 <= step.status < 300:  # the normal verdict, with the scripted status and headers
            headers = with_defaults([("Cache-Control", NO_STORE)], headers)
            answer = Answer(step.status, body, headers, "scripted")
        else:
            code, message = _STEP_ERRORS.get(step.status) or _generic_error(step.status)
            answer = error_answer(step.status, code, message, "scripted", headers)
        # {"status": 503, "delay_ms": 2000}: a slow error, waited out as a delay step is
        return replace(answer, delay=step.delay_ms / 1000) if step.delay_ms else answer
    return None if step.fault is None else fault_answer(step.fault, body)


# A standing step's answer, built once (--row standing: 119k instructions a GET /e, 196k without)
_kept_answer = lru_cache(maxsize=256)(_answer)


def fault_answer(kind: str, body: bytes) -> Answer:
    """The answer that carries fault ``kind`` for a verdict ``body``."""
    sent = b"" if kind == "reset" else body[: len(body) // 2]
    headers = [("Cache-Control", NO_STORE)]
    if kind != "malformed":  # malformed: complete HTTP, but the JSON stops half-way
        headers += [("Content-Length", str(len(body))), (FAULT_HEADER, kind)]
    return Answer(200, sent, headers, "scripted", fault=kind)


def result_of(answer: Answer | str) -> Result:
    """The journal's reading of an answer, or of a fault named by a string (``"timeout"``)."""
    if isinstance(answer, str):  # met before any answer: a scripted delay outlasting a timeout
        return Result(None, "scripted", answer, "script")
    return answer.result  # built once per answer object


def encode_step(step: Step) -> str:
    """A step as JSON text, for a shared store (:func:`decode_step` reads it back)."""
    return json.dumps(step.to_json(), separators=(",", ":"))


@lru_cache(maxsize=256)  # parse_step checks it on the schema: 55 µs, half a scripted /e on Redis
def decode_step(text: str) -> Step:
    return parse_step(json.loads(text), "stored step")
