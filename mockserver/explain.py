"""``GET /e`` as the spec describes it: every rule of its answer, decided once, in Python.

:func:`decide` decides the answer from the raw query string and Authorization header alone (the
key first, before any work that grows with the request). It asks the store for what it needs as
round trips of storage primitives (:mod:`.store.primitives`: read the clock, count a hit, take a
step), so the same code decides for both stores and every transport: the async server awaits
each round trip on its loop (:mod:`.server.asyncserver`), a blocking one runs it (:func:`run`).
Which function decides each rule: the table in ARCHITECTURE.md.
"""

from __future__ import annotations

import math
import time
from collections.abc import Generator
from contextlib import suppress
from dataclasses import dataclass, replace
from functools import lru_cache
from urllib.parse import parse_qsl

from verdict_contract.core.redact import KeyFinder, masked_path
from verdict_contract.core.spec import API_METHODS, ENDPOINT_PATH, SESSION_PARAM

from .model.answer import (
    CACHED_BODY_BYTES,
    NO_STORE,
    Answer,
    error_answer,
    not_allowed,
    unavailable_answer,
)
from .model.sessions import MAX_SESSION_ID_LENGTH, Session, Step
from .model.steps import result_of
from .model.steps import scripted as scripted_answer
from .state import MockState, authorized, masks_for, mock_time
from .store.backend import StateUnavailable
from .store.journal import (
    CUT,
    MAX_PATH_CHARS,
    JournaledQuery,
    JournalEntry,
    RawHeaders,
    SentRequest,
    as_text,
    journaled_query,
    make_entry,
)
from .store.primitives import Ask

VERDICT_CACHE_CONTROL = "private, max-age=86400, immutable"
"""A verdict never changes (spec §8), so callers may keep it; it is per key, hence private."""

_NOT_FOUND = "unknown session id, or the session expired"
_NO_KEY = "missing or invalid API key; send Authorization: Bearer <key>"
_LIMITED = "rate limit exceeded for this API key"
# Answers that never change, built once (an Answer is immutable: its headers are never mutated).
_UNAUTHORIZED = error_answer(401, "unauthorized", _NO_KEY, headers=[("WWW-Authenticate", "Bearer")])
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


Decider = Generator[Ask, None, "Decision"]
"""A request decided: each round trip it needs yielded, resumed once the store answered it."""


def _over_budget(hits: int, budget: int) -> bool:
    """The rate limit's rule: a key gets ``budget`` calls a window, the rest 429."""
    return hits > budget


# One answer per second to wait (bench_instructions --row limited: 116k a 429 with it, 152k without)
@lru_cache(maxsize=64)
def _retry_after(seconds: int) -> Answer:
    return error_answer(429, "rate_limited", _LIMITED, headers=[("Retry-After", str(seconds))])


def _find(state: MockState, pairs: list[tuple[str, str]] | None) -> Answer | Session:
    """The session ``n`` names, or the answer if there is none (400, 404)."""
    values = None if pairs is None else [v for name, v in pairs if name == SESSION_PARAM]
    problem = _bad_session_id(values)
    if problem is not None or not values:
        return error_answer(400, "bad_request", problem or "")
    return state.lookup(values[0]) or _UNKNOWN


def _answer(session: Session, body: bytes, step: Step | None, expired: bool) -> Answer:
    """The answer of a found session, given its next scripted step (if any): a step's own
    answer stands; else 404 if expired, else its body (late, for a delay step)."""
    step = step or session.spec.always
    if step is not None:
        scripted = scripted_answer(step, body)
        if scripted is not None:
            return scripted
    answer = _EXPIRED if expired else _normal(session, body)
    if step is not None and step.delay_ms:
        return replace(answer, delay=step.delay_ms / 1000)
    return answer


def _normal(session: Session, body: bytes) -> Answer:
    recorded = session.spec.recorded  # replayed as received: the status and the very bytes
    status, outcome = (recorded.status, "recorded") if recorded else (200, "verdict")
    if len(body) > CACHED_BODY_BYTES:  # a big body (a recorded one) is not kept: built each time
        return _body_answer(status, body, outcome)
    return _kept_body_answer(status, body, outcome)


def _body_answer(status: int, body: bytes, outcome: str) -> Answer:
    """A session's own answer: its body, kept by callers for a day if it is a 200 (§8)."""
    cache = VERDICT_CACHE_CONTROL if status == 200 else NO_STORE
    return Answer(status, body, [("Cache-Control", cache)], outcome)


# Headers and journal reading built once a body (bench_instructions: 115k a GET /e, 194k without)
_kept_body_answer = lru_cache(maxsize=2048)(_body_answer)


@dataclass(slots=True)
class Decision:
    """A request to ``/e`` and its answer, decided but not yet journaled (nor sent)."""

    method: str
    query: bytes
    pairs: list[tuple[str, str]] | None
    authorization: str | None
    answer: Answer
    generation: int | None  # the journal's on arrival (a clear moves it); None: the current one
    started: float  # perf_counter() when it arrived: the journal's latency runs from here
    headers: RawHeaders = ()  # the request's headers, fingerprinted by the journal (matchers)
    sent: SentRequest | None = None  # in-process: the request as sent, kept in its entry


def decide(
    state: MockState, method: str, query: bytes, authorization: str | None, headers: RawHeaders = ()
) -> Decider:
    """Decide the answer to a request to ``/e``: the key, then the rate limit, ``n``, the
    session, its script and its expiry; :func:`record` journals it once sent."""
    started, wall = time.perf_counter(), time.time()
    key = authorized(state, authorization)  # before any work that grows with the request
    if key is None:
        # Anyone can send these: only the query's first bytes are read, for the journal, which
        # keeps it as it is now (answered at once: no round trip to the store before).
        pairs = query_start(query)
        return Decision(method, query, pairs, authorization, _UNAUTHORIZED,
                        None, started, headers)  # fmt: skip
    pairs = parse_query(query)
    found = _find(state, pairs)  # decided here, but the key is counted first
    session = None if isinstance(found, Answer) else found
    limit, sid = state.limit, None if session is None else session.id
    # with no limit, nothing can refuse the request: its step comes in the same round trip
    take = sid if session is not None and session.scripted and not limit.budget else None
    while True:
        offset = state.offset_read
        counted = key if limit.budget else None
        now = mock_time(wall, offset)
        ask = Ask(True, counted, now, limit.window, offset, sid, take)
        try:
            yield ask
        except StateUnavailable:  # a malformed request is one, store or not: never a 5xx
            if isinstance(found, Answer) and found.status == 400:
                return Decision(method, query, pairs, authorization, found,
                                None, started, headers)  # fmt: skip
            raise
        state.offset_read = ask.offset
        if counted is None or ask.hits:
            break  # else the clock moved since it was read: counted again on the new one
    now = mock_time(wall, ask.offset)
    if counted is not None and _over_budget(ask.hits, limit.budget):
        answer = _retry_after(max(1, math.ceil(ask.started + limit.window - now)))
    elif isinstance(found, Answer):
        answer = found
    else:
        step = ask.step
        if limit.budget and found.scripted:
            taken = Ask(take=found.id)
            yield taken
            step = taken.step
        expired = ask.expired or found.expired(now, state.settings.session_lifetime)
        answer = _answer(found, state.body(found), step, expired)
    return Decision(method, query, pairs, authorization, answer, ask.generation, started, headers)


def run(state: MockState, decider: Decider) -> Decision:
    """Decide on a blocking server: each round trip run in turn, a failed one told to the
    decider (which may decide all the same); raises StateUnavailable."""
    try:
        ask = next(decider)
        while True:
            try:
                state.store.run(ask)
            except StateUnavailable as exc:
                ask = decider.throw(exc)
            else:
                ask = next(decider)
    except StopIteration as decided:
        return decided.value  # type: ignore[no-any-return]


def record(
    state: MockState, decision: Decision, fault: str | None = None
) -> tuple[JournalEntry, float]:
    """The entry of a decided request, and its latency in seconds, a scripted delay included;
    ``fault``: what the client got instead (``disconnected``: it left during a delay)."""
    d = decision
    latency = time.perf_counter() - d.started
    got = d.answer if fault is None else fault
    entry = entry_for(
        state, d.method, d.pairs, d.query, d.authorization, got, latency * 1000, d.headers, d.sent,
        generation=d.generation,
    )  # fmt: skip
    return entry, latency


class ClientLeft(BaseException):
    """Raised by a :attr:`.state.MockState.delay` whose client stopped waiting: the request is
    journaled with :attr:`fault` and the exception goes on (a BaseException, so that it passes
    the app's net for errors)."""

    fault = "disconnected"


def handle(
    state: MockState,
    method: str,
    query: bytes,
    authorization: str | None,
    headers: RawHeaders = (),
    sent: SentRequest | None = None,
) -> Answer:
    """Answer a request to ``/e`` for a blocking server: wait out a delay, journal, return
    (``sent``: an in-process client's request, kept in its entry). As on the event loop, a store
    that cannot decide gets a 503; one that cannot journal a decided answer only logs."""
    state = state.tenant_of(authorization)
    try:
        decision = run(state, decide(state, method, query, authorization, headers))
    except StateUnavailable as exc:
        return unavailable_answer(exc)
    decision.sent = sent
    if decision.answer.delay:
        try:
            state.delay(decision.answer.delay)  # in-process transports replace this
        except ClientLeft as left:
            _journal(state, record(state, decision, left.fault)[0])
            raise
    _journal(state, record(state, decision)[0])
    return decision.answer


def _journal(state: MockState, entry: JournalEntry) -> None:
    with suppress(StateUnavailable):  # the store's own calls log its outage (redisstate.TripHealth)
        state.store.append(entry)


# --- how a request is journaled: the entry of an answered one, or of one the API does not take

MAX_UNAUTHORIZED_QUERY = 4096
"""Bytes of the query of a request with no valid key that are parsed (to journal ``n``)."""


def parse_query(query: bytes) -> list[tuple[str, str]] | None:
    """The query's pairs, or None if it is not UTF-8 (werkzeug would keep ``%FF`` as text)."""
    try:
        text = query.decode("utf-8")
        if text and "&" not in text and "%" not in text and "+" not in text:
            # One pair, nothing to unquote (n=<id>): parse_qsl's work, 11% of a GET /e, skipped
            name, _, value = text.partition("=")
            return [(name, value)]
        return parse_qsl(text, keep_blank_values=True, errors="strict")
    except (UnicodeDecodeError, ValueError):
        return None


_CACHED_QUERY = 512  # longer (with the Authorization) are shown afresh: the cache stays small


@lru_cache(maxsize=1024)  # a load test sends one query again and again (10%: bench_instructions)
def _cached_query(query: bytes, keys: KeyFinder, sent: str | None) -> JournaledQuery | None:
    pairs = parse_query(query)
    return None if pairs is None else journaled_query(pairs, masks_for(keys, sent))


def entry_for(
    state: MockState,
    method: str,
    pairs: list[tuple[str, str]] | None,
    query: bytes,
    authorization: str | None,
    answer: Answer | str,
    latency_ms: float | None = None,
    headers: RawHeaders = (),
    sent: SentRequest | None = None,
    *,
    path: str = ENDPOINT_PATH,
    generation: int | None = None,
) -> JournalEntry:
    """The entry of what the client got: an answer, or a fault (reset, timeout...) by name;
    ``path``: a wrong one, journaled so that a check can say what was sent instead;
    ``generation``: the journal's when the request arrived (None: kept in the journal of now)."""
    journaled = None
    if pairs is not None and len(query) + len(authorization or "") <= _CACHED_QUERY:
        journaled = _cached_query(query, state.key_finder, authorization)
    if journaled is None:  # a query that is not UTF-8 is journaled whole, as Latin-1
        args = pairs if pairs is not None else [("?", query.decode("latin-1"))]
        journaled = journaled_query(args, state.masks(authorization))
    return make_entry(
        method=method,
        path=path,
        authorization=authorization,
        result=result_of(answer),
        journaled=journaled,
        headers=headers,
        latency_ms=latency_ms,
        sent=sent,
        generation=generation,
    )


def query_start(query: bytes) -> list[tuple[str, str]] | None:
    """The pairs of at most :data:`MAX_UNAUTHORIZED_QUERY` bytes of a query, and a note of the
    rest (named :data:`.store.journal.CUT`)."""
    if len(query) <= MAX_UNAUTHORIZED_QUERY:
        return parse_query(query)
    start = query[:MAX_UNAUTHORIZED_QUERY].rpartition(b"&")[0]
    pairs = parse_query(start)
    if pairs is not None:
        pairs.append((CUT, f"{len(query) - len(start)} bytes not read (no valid key)"))
    return pairs


def wrong_method(state: MockState, method: str, query: bytes, headers: RawHeaders) -> Answer:
    """The 405 of ``/e`` asked with a method the API does not take, journaled."""
    answer = not_allowed(method, ", ".join(API_METHODS))
    journal_elsewhere(state, method, ENDPOINT_PATH, query, headers, answer)
    return answer


def journal_elsewhere(
    state: MockState, method: str, path: str, query: bytes, headers: RawHeaders, answer: Answer
) -> None:
    """Journal a request the API does not take (a wrong path, or ``/e`` with a wrong method):
    a check that said "no request at all" would send its author looking in the wrong place.
    A failing shared store changes no answer (its outage is logged where its calls are)."""
    authorization = next(
        (as_text(v) for k, v in headers if as_text(k).lower() == "authorization"), None
    )
    state = state.tenant_of(authorization)
    # Anyone can send these, with any method: without a key, only the query's start is read.
    keyed = authorized(state, authorization) is not None
    pairs = parse_query(query) if keyed else query_start(query)
    masked = masked_path(path[: MAX_PATH_CHARS + 1], state.masks(authorization))  # as shown
    entry = entry_for(
        state, method, pairs, query, authorization, answer, headers=headers, path=masked
    )
    _journal(state, entry)  # answered at once: kept in the journal of now
