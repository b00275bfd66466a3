"""How a request is journaled: the entry of an answered request, or of one the API does not take.

Apart from :mod:`.explain` (which decides ``/e``): any server journals through here, and with a
shared state the entry goes to the shared journal (:meth:`.backend.StateBackend.record`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from functools import lru_cache, partial
from urllib.parse import parse_qsl

from verdict_contract.core.errors import StateUnavailable
from verdict_contract.core.spec import ENDPOINT_PATH

from .model.answer import Answer, Served
from .model.steps import Outcome, outcome
from .state import MockState, authorized, key_in
from .store.journal import SentRequest, build_entry, entry_from
from .store.journal import head_past_time as journal_head
from .store.masking import CUT, RawHeaders, Shown, as_text, shown_args, shown_path

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


def journal(
    state: MockState,
    method: str,
    pairs: list[tuple[str, str]] | None,
    query_string: bytes,
    authorization: str | None,
    answer: Answer | str,
    generation: int,
    latency_ms: float | None = None,
    *,
    headers: RawHeaders = (),
    path: str = ENDPOINT_PATH,
    sent: SentRequest | None = None,
) -> None:
    """Journal what the client got: an answer, or a fault (reset, truncated...) or timeout.

    ``path`` is another than ``/e`` for a request to a wrong path, journaled so that a check
    can say what was sent instead (:func:`journal_elsewhere`).
    """
    reading = outcome(answer)
    shown = None
    if pairs is not None and len(query_string) <= _CACHED_QUERY:
        shown = _shown(query_string, state.key_bytes)
    if shown is None:
        shown = shown_args(journaled_args(pairs, query_string), state.key_ok)
    entry = build_entry(
        method,
        path,
        authorization,
        reading,
        shown,
        headers,
        latency_ms,
        generation=generation,
        sent=sent,
    )
    if state.shared is None:
        state.journal.add(entry)
    else:  # the shared journal (its ring, for what any web page can send)
        state.shared.record(entry)


_CACHED_HEAD = 512
"""Characters of a query and an Authorization header past which an entry's head is built anew
(the cache stays small in bytes)."""


def head_past_time(
    state: MockState,
    method: str,
    query_string: bytes,
    pairs: list[tuple[str, str]] | None,
    authorization: str | None,
    refused: Outcome | None,
    served: Served | None,
) -> tuple[str, bool]:
    """A request to ``/e``'s entry for a shared store, up to its answer's fields and past its
    time (:func:`.journal.head_past_time`), and whether it goes to the ring of untrusted ones.
    ``refused``: the 401 of a request without a valid key (its ``pairs`` then the query's start,
    :func:`query_start`); ``served``: the facts of the body its session would be served."""
    if len(query_string) + len(authorization or "") <= _CACHED_HEAD:
        keys = state.key_bytes
        return _kept_head(method, query_string, authorization, refused, served, keys)
    return _new_head(method, query_string, pairs, authorization, refused, served, state.key_ok)


# A load test sends one request again and again: its head is built once (explain._Pending.of
# in a loop: 8.9 µs a request without the cache, 4.0 with it).
@lru_cache(maxsize=1024)
def _kept_head(
    method: str,
    query_string: bytes,
    authorization: str | None,
    refused: Outcome | None,
    served: Served | None,
    keys: tuple[bytes, ...],
) -> tuple[str, bool]:
    pairs = parse_query(query_string) if refused is None else query_start(query_string)
    is_key = partial(key_in, keys)
    return _new_head(method, query_string, pairs, authorization, refused, served, is_key)


def _new_head(
    method: str,
    query_string: bytes,
    pairs: list[tuple[str, str]] | None,
    authorization: str | None,
    refused: Outcome | None,
    served: Served | None,
    is_key: Callable[[str], bool],
) -> tuple[str, bool]:
    entry = entry_from(
        {
            "method": method,
            "path": ENDPOINT_PATH,
            "args": journaled_args(pairs, query_string),
            "authorization": authorization,
            "status": None if refused is None else refused.status,
            "outcome": "" if refused is None else refused.outcome,
            "is_key": is_key,
        }
    )
    return journal_head(entry, served), entry.untrusted


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
    generation = state.journal.generation
    with suppress(StateUnavailable):  # the store's own calls log its outage (availability.py)
        journal(
            state,
            method,
            pairs,
            query_string,
            authorization,
            answer,
            generation,
            headers=headers,
            path=shown_path(path, state.key_ok),
        )


def journaled_args(
    pairs: list[tuple[str, str]] | None, query_string: bytes
) -> list[tuple[str, str]]:
    return pairs if pairs is not None else [("?", query_string.decode("latin-1"))]
