"""``GET /e`` as the spec describes it: one framework-free function.

:func:`decide` decides the answer from the raw query string and Authorization header alone (the
key first, before any work that grows with the request), so the same code serves every
transport: the async server (:mod:`.connection`), the WSGI fast path (:mod:`.fastpath`), the
Flask view and the in-process transports of :mod:`.testing`.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache, partial

from verdict_contract.core.spec import SESSION_PARAM

from .journaling import MAX_UNAUTHORIZED_QUERY as MAX_UNAUTHORIZED_QUERY
from .journaling import head_past_time, query_start
from .journaling import journal as journal
from .journaling import journal_elsewhere as journal_elsewhere
from .journaling import parse_query as parse_query
from .model.answer import (
    CACHED_BODY_BYTES,
    NO_STORE,
    Answer,
    error_answer,
    unavailable_answer,
)
from .model.sessions import MAX_SESSION_ID_LENGTH, Session, Step
from .model.steps import decode_step, outcome
from .model.steps import scripted as scripted_answer
from .state import MockState
from .state import authorized as authorized
from .state import bearer_token as bearer_token
from .store.backend import CallKind, Facts, SharedCall, SharedRules, StateUnavailable
from .store.journal import SentRequest, TailAround, entry_tail, tail_around
from .store.masking import RawHeaders

VERDICT_CACHE_CONTROL = "private, max-age=86400, immutable"
"""A verdict never changes (spec §8), so callers may keep it; it is per key, hence private."""

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


def _explain(state: MockState, key: str, pairs: list[tuple[str, str]] | None) -> Answer:
    """Answer ``GET /e`` for an accepted key: rate limit, ``n``, lookup, script, expiry."""
    wait = state.limiter.admit(key)
    if wait is not None:
        return _limited(wait)
    found = _find(state, pairs)
    if isinstance(found, Answer):
        return found
    session, body = found
    return _answer(state, session, body, state.scripts.next_step(session.id), None)


def _limited(wait: float) -> Answer:
    return _retry_after(max(1, math.ceil(wait)))


@lru_cache(maxsize=64)  # one answer per whole second to wait: a flood of 429s builds nothing
def _retry_after(seconds: int) -> Answer:
    return error_answer(
        429,
        "rate_limited",
        "rate limit exceeded for this API key",
        headers=[("Retry-After", str(seconds))],
    )


@lru_cache(maxsize=64)  # as _retry_after: a client sending one bad query again and again
def _bad_request(problem: str) -> Answer:
    return error_answer(400, "bad_request", problem)


def _find(state: MockState, pairs: list[tuple[str, str]] | None) -> Answer | tuple[Session, bytes]:
    """The session ``n`` names and its body, or the answer if there is none (400, 404)."""
    if pairs and len(pairs) == 1 and pairs[0][0] == SESSION_PARAM and pairs[0][1]:
        session_id = pairs[0][1]  # the usual query: n alone (its length is checked below)
    else:
        values = None if pairs is None else [v for name, v in pairs if name == SESSION_PARAM]
        problem = _bad_session_id(values)
        if problem is not None or not values:
            return _bad_request(problem or "")
        session_id = values[0]
    if len(session_id) > MAX_SESSION_ID_LENGTH:
        return _bad_request(_bad_session_id([session_id]) or "")
    session = state.lookup(session_id)
    if session is None:
        return _UNKNOWN
    return session, state.body(session)


def _answer(
    state: MockState, session: Session, body: bytes, step: Step | None, expired: bool | None
) -> Answer:
    """The answer of a found session, given its next scripted step (if any).

    ``expired``: what a shared state said; None asks this process's state when it matters.
    """
    step = step or session.spec.always
    if step is not None:
        scripted = scripted_answer(step, body)
        if scripted is not None:
            return scripted
        if step.delay_ms:
            return replace(_served(state, session, body, expired), delay=step.delay_ms / 1000)
    return _served(state, session, body, expired)


def _served(state: MockState, session: Session, body: bytes, expired: bool | None) -> Answer:
    """The answer of a session that no script step overrides: 404 if expired, else its body."""
    if state.is_expired(session) if expired is None else expired:
        return _EXPIRED
    return _normal(session, body)


def _normal(session: Session, body: bytes) -> Answer:
    recorded = session.spec.recorded
    if recorded is not None:  # replayed as received: the status and the very bytes
        status, outcome = recorded.status, "recorded"
    else:
        status, outcome = 200, "verdict"
    if len(body) > CACHED_BODY_BYTES:  # a big body (a recorded one) is not kept: built each time
        return _body_answer(status, body, outcome)
    return _kept_body_answer(status, body, outcome)


def _body_answer(status: int, body: bytes, outcome: str) -> Answer:
    """A session's own answer: its body, kept by callers for a day if it is a 200 (§8)."""
    cache = VERDICT_CACHE_CONTROL if status == 200 else NO_STORE
    return Answer(status, body, [("Cache-Control", cache)], outcome)


# One answer object per body: the server finds an answer's heads by its identity (wire.Heads),
# so a session's answer is framed once, not per request (bench_connection.py: 12 µs a
# request with it, 15-17 µs without).
_kept_body_answer = lru_cache(maxsize=2048)(_body_answer)


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
    headers: RawHeaders = ()  # the request's headers, fingerprinted by the journal (matchers)
    journaled: bool = False  # a shared state journals a request as it decides it
    sent: SentRequest | None = None  # in-process: the request as sent, kept in its entry


def decide(
    state: MockState,
    method: str,
    query_string: bytes,
    authorization: str | None,
    headers: RawHeaders = (),
) -> Decision:
    """Decide the answer to a request to ``/e``; :func:`record` journals it once sent.

    With a shared state this blocks for its round trip: the event loop awaits
    :func:`decide_shared` instead.
    """
    if state.shared is not None:
        pending = _Pending.of(state, method, query_string, authorization)
        try:
            return pending.decision(state, state.shared.decide(pending.call))
        except StateUnavailable as exc:
            return pending.unavailable(exc)
    generation, started = state.journal.generation, time.perf_counter()
    key = authorized(state, authorization)  # before any work that grows with the request
    if key is None:
        # Anyone can send these: only the query's first bytes are read, for the journal.
        pairs = query_start(query_string)
        answer = _UNAUTHORIZED
    else:
        pairs = parse_query(query_string)
        answer = _explain(state, key, pairs)
    return Decision(
        method, query_string, pairs, authorization, answer, generation, started, headers
    )


def decide_shared(
    state: MockState,
    method: str,
    query_string: bytes,
    authorization: str | None,
    done: Callable[[Decision | Exception], None],
) -> None:
    """:func:`decide` with a shared state, on the event loop: decided (and journaled) in the
    next round trip, ``done`` told the decision (or why there is none) then."""
    assert state.shared is not None
    pending = _Pending.of(state, method, query_string, authorization)
    state.shared.submit(pending.call, partial(pending.told, state, done))


_NO_TAIL = TailAround("", "")


@lru_cache(maxsize=16)  # one object for a process's rules: a batch is cut where they change
def _rules(budget: int, window: float, lifetime: float) -> SharedRules:
    limited, expired = entry_tail(outcome(_limited(1.0))), tail_around(outcome(_EXPIRED))
    return SharedRules(budget, window, lifetime, limited, expired)


@lru_cache(maxsize=64)
def _key_digest(secret: str, key: str) -> str:
    """How a shared state names an API key: never the key itself."""
    return hmac.new(secret.encode(), key.encode(), hashlib.sha256).hexdigest()[:32]


@dataclass(slots=True)
class _Pending:
    """A request to ``/e`` with what this process could decide alone, and the shared call."""

    method: str
    query: bytes
    pairs: list[tuple[str, str]] | None
    authorization: str | None
    started: float
    local: Answer | None  # 401, 400, 404 unknown: what stands unless the key is over its limit
    found: tuple[Session, bytes] | None
    call: SharedCall

    @classmethod
    def of(
        cls, state: MockState, method: str, query_string: bytes, authorization: str | None
    ) -> _Pending:
        started = time.perf_counter()
        key = authorized(state, authorization)  # before any work that grows with the request
        pairs = query_start(query_string) if key is None else parse_query(query_string)
        limit = state.limiter.limit
        counted, found, session = "", None, None
        local: Answer | None = _UNAUTHORIZED
        if key is not None:
            counted = _key_digest(state.settings.signing_secret, key) if limit.budget else ""
            looked = _find(state, pairs)
            local = looked if isinstance(looked, Answer) else None
            found = None if isinstance(looked, Answer) else looked
        local_tail = "" if local is None else entry_tail(outcome(local))
        served_tail, served = _NO_TAIL, None
        if found is not None:
            session, body = found
            always = session.spec.always
            standing = None if always is None else scripted_answer(always, body)
            normal = outcome(_normal(session, body))
            served = normal.served  # the body's facts, for the step that serves it (a 2xx)
            local_tail = "" if standing is None else entry_tail(outcome(standing))
            served_tail = tail_around(normal)
        # Without a key the 401 stands whatever the store says: the entry says so (and so goes
        # to the ring of what any page can send: the journal's one rule, build_entry).
        refused = outcome(_UNAUTHORIZED) if key is None else None
        past_time, untrusted = head_past_time(
            state, method, query_string, pairs, authorization, refused, served
        )
        kind = CallKind(
            key=counted,
            session="" if session is None else session.id,
            collected_at=None if session is None else session.collected_at,
            local_answer_stands=bool(local_tail) and session is not None,
            untrusted=untrusted,
            entry=past_time,
            local_tail=local_tail,
            served_tail=served_tail,
        )
        rules = _rules(limit.budget, limit.window, state.settings.session_lifetime)
        call = SharedCall(rules, time.time(), kind)
        return cls(method, query_string, pairs, authorization, started, local, found, call)

    def decision(self, state: MockState, facts: Facts) -> Decision:
        if facts.wait is not None:
            answer = _limited(facts.wait)
        elif self.found is None:
            answer = self.local or _UNAUTHORIZED
        else:
            session, body = self.found
            step = decode_step(facts.step) if facts.step else None
            answer = _answer(state, session, body, step, facts.expired)
        return self._decided(answer)

    def told(
        self,
        state: MockState,
        done: Callable[[Decision | Exception], None],
        facts: Facts | StateUnavailable,
    ) -> None:
        """The store's answer: the decision it makes, for ``done``."""
        try:
            if isinstance(facts, StateUnavailable):
                decided: Decision | Exception = self.unavailable(facts)
            else:
                decided = self.decision(state, facts)
        except Exception as exc:  # never a 5xx for a request, however it fails
            decided = exc
        done(decided)

    def unavailable(self, exc: StateUnavailable) -> Decision:
        return self._decided(unavailable_answer(exc, "; the mock keeps running"))

    def _decided(self, answer: Answer) -> Decision:
        return Decision(
            self.method,
            self.query,
            self.pairs,
            self.authorization,
            answer,
            0,
            self.started,
            journaled=True,
        )


def record(state: MockState, decision: Decision, fault: str | None = None) -> float:
    """Journal a decided request; its latency includes any scripted delay waited out.

    ``fault`` says what the client got instead of the answer: ``disconnected`` for a client
    that left while its answer was delayed (journaled with no status, when it left). A shared
    state journaled the request as it decided it: nothing is journaled again.

    Returns the latency in seconds, measured once here for the journal and the metrics.
    """
    latency = time.perf_counter() - decision.started
    if decision.journaled:
        return latency
    latency_ms = latency * 1000
    d = decision
    journal(
        state,
        d.method,
        d.pairs,
        d.query,
        d.authorization,
        d.answer if fault is None else fault,
        d.generation,
        latency_ms,
        headers=d.headers,
        sent=d.sent,
    )
    return latency


def handle(
    state: MockState,
    method: str,
    query_string: bytes,
    authorization: str | None,
    headers: RawHeaders = (),
    sent: SentRequest | None = None,
) -> Answer:
    """Answer a request to ``/e`` for a blocking server: wait out a delay, journal, return;
    ``sent``: an in-process client's request, kept in its entry."""
    decision = decide(state, method, query_string, authorization, headers)
    decision.sent = sent
    if decision.answer.delay:
        state.delay(decision.answer.delay)  # in-process transports replace this (inprocess.py)
    record(state, decision)
    return decision.answer
