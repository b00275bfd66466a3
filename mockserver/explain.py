"""``GET /e`` as the spec describes it: one framework-free function.

:func:`decide` decides the answer from the raw query string and Authorization header alone (the
key first, before any work that grows with the request), so the same code serves every
transport: the async server (:mod:`.connection`), the WSGI fast path (:mod:`.fastpath`), the
Flask view and the in-process transports of :mod:`.testing`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from http import HTTPStatus
from urllib.parse import parse_qsl

from verdict_contract.core.spec import ENDPOINT_PATH, SESSION_PARAM
from verdict_contract.mockserver.answer import NO_STORE, Answer, error_answer
from verdict_contract.mockserver.faults import fault_answer
from verdict_contract.mockserver.journal import CUT, Shown, shown_args
from verdict_contract.mockserver.sessions import MAX_SESSION_ID_LENGTH, Session, Step
from verdict_contract.mockserver.state import MockState, key_in

VERDICT_CACHE_CONTROL = "private, max-age=86400, immutable"
"""A verdict never changes (spec §8), so callers may keep it; it is per key, hence private."""

MAX_UNAUTHORIZED_QUERY = 4096
"""Bytes of the query of a request with no valid key that are parsed (to journal ``n``)."""
_NOT_FOUND = "unknown session id, or the session expired"
# Answers that never change, built once (an Answer is immutable: its headers are never mutated).
_UNAUTHORIZED = error_answer(
    401,
    "unauthorized",
    "missing or invalid API key; send Authorization: Bearer <key>",
    headers=[("WWW-Authenticate", "Bearer")],
)
_UNKNOWN = error_answer(404, "session_not_found", _NOT_FOUND, "unknown")
_EXPIRED = error_answer(404, "session_not_found", _NOT_FOUND, "expired")
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


def bearer_token(header: str | None) -> str | None:
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def parse_query(query_string: bytes) -> list[tuple[str, str]] | None:
    """The query's pairs, or None if it is not UTF-8 (werkzeug would keep ``%FF`` as text)."""
    try:
        if query_string and not any(c in query_string for c in _ESCAPES):
            # One pair with nothing to unquote (``n=<id>``, every load test): as parse_qsl.
            name, _, value = query_string.decode("utf-8").partition("=")
            return [(name, value)]
        return parse_qsl(query_string.decode("utf-8"), keep_blank_values=True, errors="strict")
    except (UnicodeDecodeError, ValueError):
        return None


_ESCAPES = (38, 37, 43)  # & % +: a query without them is one pair, read as it is


def _bad_session_id(values: list[str] | None) -> str | None:
    """Say what is wrong with the ``n`` values of a request, if anything."""
    if values is None:
        return "the query string is not valid UTF-8 percent-encoding"
    if not values:
        return "the query parameter n (the session id) is missing"
    if len(values) > 1:
        return f"the query parameter n was given {len(values)} times; send it once"
    (value,) = values
    if not value:
        return "the query parameter n is empty"
    if len(value) > MAX_SESSION_ID_LENGTH:
        return f"the session id is longer than {MAX_SESSION_ID_LENGTH} characters"
    return None


def _generic_error(status: int) -> tuple[str, str]:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = f"status {status}"
    return phrase.lower().replace(" ", "_").replace("-", "_"), f"scripted: {phrase}"


def _scripted(step: Step, body: bytes) -> Answer | None:
    if step.status is not None:
        headers = list(step.headers) or _STEP_HEADERS.get(step.status, [])
        if 200 <= step.status < 300:  # the normal verdict, with the scripted status and headers
            return Answer(step.status, body, [("Cache-Control", NO_STORE), *headers], "scripted")
        code, message = _STEP_ERRORS.get(step.status) or _generic_error(step.status)
        return error_answer(step.status, code, message, "scripted", headers)
    if step.fault is not None:
        return fault_answer(step.fault, body)
    return None  # a delay: the answer is the normal one, late


def authorized(state: MockState, authorization: str | None) -> str | None:
    """The request's key if the mock accepts it (compared in constant time), else None."""
    key = bearer_token(authorization)
    return key if key is not None and state.key_ok(key) else None


def _explain(state: MockState, key: str, pairs: list[tuple[str, str]] | None) -> Answer:
    """Answer ``GET /e`` for an accepted key: rate limit, ``n``, lookup, script, expiry."""
    wait = state.limiter.admit(key)
    if wait is not None:
        return error_answer(
            429,
            "rate_limited",
            "rate limit exceeded for this API key",
            headers=[("Retry-After", str(max(1, math.ceil(wait))))],
        )
    values = None if pairs is None else [v for name, v in pairs if name == SESSION_PARAM]
    problem = _bad_session_id(values)
    if problem is not None or not values:
        return error_answer(400, "bad_request", problem or "")
    session = state.lookup(values[0])
    if session is None:
        return _UNKNOWN
    recorded = session.spec.recorded
    body = recorded.body if recorded else state.generator.render(session.id, session.spec)
    step = state.scripts.next_step(session.id) or session.spec.always
    if step is not None:
        scripted = _scripted(step, body)
        if scripted is not None:
            return scripted
        if step.delay_ms:
            return replace(_served(state, session, body), delay=step.delay_ms / 1000)
    return _served(state, session, body)


def _served(state: MockState, session: Session, body: bytes) -> Answer:
    """The answer of a session that no script step overrides: 404 if expired, else its body."""
    if state.is_expired(session):
        return _EXPIRED
    recorded = session.spec.recorded
    if recorded is not None:  # replayed as received: the status and the very bytes
        cache = VERDICT_CACHE_CONTROL if recorded.status == 200 else NO_STORE
        return Answer(recorded.status, body, [("Cache-Control", cache)], "recorded")
    return _verdict(body)


@lru_cache(maxsize=1024)  # one answer object per body: nothing is built per request
def _verdict(body: bytes) -> Answer:
    return Answer(200, body, [("Cache-Control", VERDICT_CACHE_CONTROL)], "verdict")


@dataclass(slots=True)
class Decision:
    """A request to ``/e`` and its answer, decided but not yet journaled (nor sent)."""

    method: str
    query: bytes
    pairs: list[tuple[str, str]] | None
    authorization: str | None
    answer: Answer
    generation: int  # the journal's generation when the request arrived (reset() moves it)
    started: float  # perf_counter() when it arrived: the journal's latency runs from here


def _query_start(query_string: bytes) -> list[tuple[str, str]] | None:
    """The pairs of at most :data:`MAX_UNAUTHORIZED_QUERY` bytes of a query, and a note of the
    rest (named :data:`.journal.CUT`)."""
    if len(query_string) <= MAX_UNAUTHORIZED_QUERY:
        return parse_query(query_string)
    start = query_string[:MAX_UNAUTHORIZED_QUERY].rpartition(b"&")[0]
    pairs = parse_query(start)
    if pairs is not None:
        unread = len(query_string) - len(start)
        pairs.append((CUT, f"{unread} bytes not read (no valid key)"))
    return pairs


def decide(
    state: MockState, method: str, query_string: bytes, authorization: str | None
) -> Decision:
    """Decide the answer to a request to ``/e``; :func:`record` journals it once sent."""
    generation, started = state.journal.generation, time.perf_counter()
    key = authorized(state, authorization)  # before any work that grows with the request
    if key is None:
        # Anyone can send these: only the query's first bytes are read, for the journal.
        pairs = _query_start(query_string)
        answer = _UNAUTHORIZED
    else:
        pairs = parse_query(query_string)
        answer = _explain(state, key, pairs)
    return Decision(method, query_string, pairs, authorization, answer, generation, started)


def record(state: MockState, decision: Decision, fault: str | None = None) -> None:
    """Journal a decided request; its latency includes any scripted delay waited out.

    ``fault`` says what the client got instead of the answer: ``disconnected`` for a client
    that left while its answer was delayed (journaled with no status, when it left).
    """
    latency_ms = (time.perf_counter() - decision.started) * 1000
    d = decision
    answer: Answer | str = d.answer if fault is None else fault
    journal(state, d.method, d.pairs, d.query, d.authorization, answer, d.generation, latency_ms)


def handle(state: MockState, method: str, query_string: bytes, authorization: str | None) -> Answer:
    """Answer a request to ``/e`` for a blocking server: wait out a delay, journal, return."""
    decision = decide(state, method, query_string, authorization)
    if decision.answer.delay:
        state.delay(decision.answer.delay)  # in-process transports replace this (inprocess.py)
    record(state, decision)
    return decision.answer


_CACHED_QUERY = 512  # longer queries are shown afresh: the cache stays small in bytes


@lru_cache(maxsize=1024)  # a load test sends one query again and again
def _shown(query_string: bytes, keys: tuple[bytes, ...]) -> Shown | None:
    pairs = parse_query(query_string)
    return None if pairs is None else shown_args(pairs, partial(key_in, keys))


def journal(
    state: MockState,
    method: str,
    pairs: list[tuple[str, str]] | None,
    query_string: bytes,
    authorization: str | None,
    answer: Answer | str,
    generation: int,
    latency_ms: float | None = None,
) -> None:
    """Journal what the client got: an answer, or a fault (reset, truncated...) or timeout."""
    fault: str | None
    if isinstance(answer, str):
        fault, status = answer, None
    else:
        fault = answer.fault
        status = None if fault == "reset" else answer.status
    shown = None
    if pairs is not None and len(query_string) <= _CACHED_QUERY:
        shown = _shown(query_string, state.key_bytes)
    state.journal.record(
        shown=shown,
        method=method,
        path=ENDPOINT_PATH,
        args=pairs if pairs is not None else [("?", query_string.decode("latin-1"))],
        authorization=authorization,
        status=status,
        outcome="scripted" if isinstance(answer, str) or fault else answer.outcome,
        is_key=state.key_ok,
        fault=fault,
        generation=generation,
        latency_ms=latency_ms,
    )
