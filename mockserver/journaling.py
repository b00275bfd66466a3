"""How a request is journaled: the entry of an answered request, or of one the API does not take.

Apart from :mod:`.explain` (which decides ``/e``): any server journals through here, to the
store's journal (:class:`.store.primitives.Append`).
"""

from __future__ import annotations

from contextlib import suppress
from functools import lru_cache, partial
from urllib.parse import parse_qsl

from verdict_contract.core.errors import StateUnavailable
from verdict_contract.core.spec import ENDPOINT_PATH

from .model.answer import Answer
from .model.steps import outcome
from .state import MockState, authorized, key_in
from .store.journal import JournalEntry, SentRequest, make_entry
from .store.masking import CUT, RawHeaders, Shown, as_text, shown_args, shown_path
from .store.primitives import READ_CLOCK, Append

MAX_UNAUTHORIZED_QUERY = 4096
"""Bytes of the query of a request with no valid key that are parsed (to journal ``n``)."""


def parse_query(query_string: bytes) -> list[tuple[str, str]] | None:
    """The query's pairs, or None if it is not UTF-8 (werkzeug would keep ``%FF`` as text)."""
    try:
        text = query_string.decode("utf-8")
        if text and "&" not in text and "%" not in text and "+" not in text:
            # One pair with nothing to unquote (``n=<id>``, every load test): as parse_qsl.
            name, _, value = text.partition("=")
            return [(name, value)]
        return parse_qsl(text, keep_blank_values=True, errors="strict")
    except (UnicodeDecodeError, ValueError):
        return None


_CACHED_QUERY = 512  # longer queries are shown afresh: the cache stays small in bytes


@lru_cache(maxsize=1024)  # a load test sends one query again and again
def _shown(query_string: bytes, keys: tuple[bytes, ...]) -> Shown | None:
    pairs = parse_query(query_string)
    return None if pairs is None else shown_args(pairs, partial(key_in, keys))


def entry_for(
    state: MockState,
    method: str,
    pairs: list[tuple[str, str]] | None,
    query_string: bytes,
    authorization: str | None,
    answer: Answer | str,
    latency_ms: float | None = None,
    *,
    headers: RawHeaders = (),
    path: str = ENDPOINT_PATH,
    sent: SentRequest | None = None,
) -> JournalEntry:
    """The entry of what the client got: an answer, or a fault (reset, truncated...) or
    timeout; the store keeps it (:class:`.primitives.Append`).

    ``path`` is another than ``/e`` for a request to a wrong path, journaled so that a check
    can say what was sent instead (:func:`journal_elsewhere`).
    """
    shown = None
    if pairs is not None and len(query_string) <= _CACHED_QUERY:
        shown = _shown(query_string, state.key_bytes)
    if shown is None:
        shown = shown_args(journaled_args(pairs, query_string), state.key_ok)
    return make_entry(
        method=method,
        path=path,
        authorization=authorization,
        reading=outcome(answer),
        shown=shown,
        headers=headers,
        latency_ms=latency_ms,
        sent=sent,
    )


def query_start(query_string: bytes) -> list[tuple[str, str]] | None:
    """The pairs of at most :data:`MAX_UNAUTHORIZED_QUERY` bytes of a query, and a note of the
    rest (named :data:`.store.masking.CUT`)."""
    if len(query_string) <= MAX_UNAUTHORIZED_QUERY:
        return parse_query(query_string)
    start = query_string[:MAX_UNAUTHORIZED_QUERY].rpartition(b"&")[0]
    pairs = parse_query(start)
    if pairs is not None:
        unread = len(query_string) - len(start)
        pairs.append((CUT, f"{unread} bytes not read (no valid key)"))
    return pairs


def journal_elsewhere(
    state: MockState,
    method: str,
    path: str,
    query_string: bytes,
    headers: RawHeaders,
    answer: Answer,
) -> None:
    """Journal a request the API does not take (a wrong path, or ``/e`` with a wrong method).

    A client that gets 404 or 405 sent something: a check that says "no request at all" would
    send its author looking in the wrong place. The entry is bounded like any other. While a
    shared store fails, the answer stays what it is (a wrong path is a 404 whatever the store
    says); the store's outage is logged and counted where every call of it is.
    """
    authorization = next(
        (as_text(v) for k, v in headers if as_text(k).lower() == "authorization"), None
    )
    # Anyone can send these, with any method: without a key, only the query's start is read.
    keyed = authorized(state, authorization) is not None
    pairs = parse_query(query_string) if keyed else query_start(query_string)
    entry = entry_for(
        state,
        method,
        pairs,
        query_string,
        authorization,
        answer,
        headers=headers,
        path=shown_path(path, state.key_ok),
    )
    with suppress(StateUnavailable):  # the store's own calls log its outage (availability.py)
        clock = state.store.run(READ_CLOCK).clock
        assert clock is not None
        state.store.append(Append(entry, clock.generation))


def journaled_args(
    pairs: list[tuple[str, str]] | None, query_string: bytes
) -> list[tuple[str, str]]:
    return pairs if pairs is not None else [("?", query_string.decode("latin-1"))]
