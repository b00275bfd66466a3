"""The request journal: a bounded record of the calls to /e, with secrets masked."""

from __future__ import annotations

import hashlib
import heapq
import json
import re
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any, Final, NamedTuple, Required, TypedDict, Unpack
from urllib.parse import unquote

from verdict_contract.core.redact import mask
from verdict_contract.core.spec import ENDPOINT_PATH, SESSION_PARAM

from ..model.sessions import MAX_SESSION_ID_LENGTH
from ..model.steps import Outcome

MAX_PARAMS: Final = 20
"""Query parameters kept per entry; the rest are counted under :data:`CUT`."""
MAX_SCHEME_CHARS: Final = 20
MAX_HEADERS: Final = 64
"""Request headers fingerprinted per entry (for :meth:`~.verify.JournalChecks.calls` matchers)."""
MAX_PATH_CHARS: Final = 200
"""A path other than ``/e`` (a wrong one) is kept cut to this length."""
UNTRUSTED_KEPT: Final = 100
"""Entries of requests any web page can send (no valid key, or a path or method the API does not
take; see :func:`untrusted`), kept in a ring of their own, so they never evict the rest."""
CUT: Final = "…(cut)"
"""The marker where the journal cut a value (or, as a query name, dropped parameters)."""


def cut(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its start and :data:`CUT`."""
    return text if len(text) <= limit else text[:limit] + CUT


@lru_cache(maxsize=64)  # a load test sends one header again and again
def mask_authorization(header: str | None) -> str | None:
    """Keep the scheme of an Authorization header and mask its credentials."""
    if header is None:
        return None
    scheme, _, credentials = header.strip().partition(" ")
    if not credentials:
        return mask(scheme) if scheme else ""
    return f"{cut(scheme, MAX_SCHEME_CHARS)} {mask(credentials.strip())}"


_PLAIN_NAME = re.compile(r"[a-z_]{1,20}")
"""Query parameter names shown as they are; anything else might be a secret."""


def shown_param(
    name: str, value: str, is_key: Callable[[str], bool] = lambda _: False
) -> tuple[str, str]:
    """A query parameter as output shows it: ``n`` (cut), plain names; other values masked."""
    if name == SESSION_PARAM:
        return name, mask(value) if is_key(value) else cut(value, MAX_SESSION_ID_LENGTH)
    # a key may arrive as a value (?api_key=...) or as a bare name (?<key>)
    plain = _PLAIN_NAME.fullmatch(name) and not is_key(name)
    return (name if plain else mask(name)), mask(value)


def shown_path(path: str, is_key: Callable[[str], bool]) -> str:
    """A request's path as output shows it: a segment that is an API key (as sent, or
    percent-decoded) is masked; a client that put its key in the path gets a 404 for it."""
    if not path.count("/") or not any(is_key(s) or is_key(unquote(s)) for s in path.split("/")):
        return path
    return "/".join(mask(s) if is_key(s) or is_key(unquote(s)) else s for s in path.split("/"))


RawHeaders = Sequence[tuple[str, str]] | Sequence[tuple[bytes, bytes]]
"""A request's headers as a server has them: text, or bytes as sent (decoded as latin-1)."""

_KEYED: Final = hashlib.blake2b(key=secrets.token_bytes(16), digest_size=16)
"""Keyed once per process; each digest starts from a copy (much cheaper than keying anew)."""


def fingerprint(kind: str, name: str, value: str) -> bytes:
    """A salted digest of one header (``kind`` ``h``, name lower-cased) or parameter (``q``).

    Entries keep these instead of the values: a matcher can ask "was this header sent?"
    (an Authorization included) while no journal, repr or message can show what was sent.
    """
    digest = _KEYED.copy()
    digest.update(f"{kind}\0{name}\0{value}".encode("utf-8", "surrogateescape"))
    return digest.digest()


def as_text(value: str | bytes) -> str:
    """A header name or value as text (bytes as sent are latin-1, as HTTP/1.1 has them)."""
    return value if isinstance(value, str) else value.decode("latin-1")


@lru_cache(maxsize=64)  # a load test sends the same headers again and again
def _header_prints(
    headers: tuple[tuple[str, str] | tuple[bytes, bytes], ...], authorization: str | None
) -> frozenset[bytes]:
    prints = {fingerprint("h", as_text(k).lower(), as_text(v)) for k, v in headers[:MAX_HEADERS]}
    if authorization is not None:  # given apart by servers that read it apart
        prints.add(fingerprint("h", "authorization", authorization))
    return frozenset(prints)


@lru_cache(maxsize=1024)  # and asks for the same few sessions
def _cached_param_print(name: str, value: str) -> bytes:
    return fingerprint("q", name, value)


def _param_fingerprint(name: str, value: str) -> bytes:
    """A parameter's fingerprint; cached for short ones only, so the cache stays small."""
    if len(name) + len(value) <= MAX_SESSION_ID_LENGTH:
        return _cached_param_print(name, value)
    return fingerprint("q", name, value)


Shown = tuple[str | None, dict[str, list[str]], frozenset[bytes]]
"""How the journal shows a request's query: its ``n``, the other parameters (masked), and the
fingerprints of the parameters kept (:func:`fingerprint`)."""


def shown_args(args: Iterable[tuple[str, str]], is_key: Callable[[str], bool]) -> Shown:
    """``n`` and the query as the journal shows them: bounded, every value but ``n`` masked."""
    query: dict[str, list[str]] = {}
    n = None
    kept = dropped = 0
    note = ""
    prints: set[bytes] = set()
    for name, value in args:
        if name == CUT:  # what the server did not read (explain.py)
            note = cut(value, 100)
        elif name == SESSION_PARAM and n is None:
            n = shown_param(name, value, is_key)[1]
            prints.add(_param_fingerprint(name, value))
        elif kept < MAX_PARAMS:
            kept += 1
            prints.add(_param_fingerprint(name, value))
            first = name != SESSION_PARAM  # a repeated n is masked: it could be anything
            shown, masked = shown_param(name, value, is_key) if first else (name, mask(value))
            query.setdefault(shown, []).append(masked)
        else:  # bounded: hostile query strings hold tens of thousands of parameters
            dropped += 1
    if dropped or note:
        query[CUT] = [", ".join(t for t in (dropped and f"{dropped} more parameter(s)", note) if t)]
    return n, query, frozenset(prints)


@dataclass(frozen=True, slots=True)
class Entry:
    """One journaled request. Query values other than ``n`` are masked: keys get sent there."""

    time: float
    method: str
    path: str
    n: str | None
    query: dict[str, list[str]]
    authorization: str | None
    status: int | None  # None: the client got no status line (a reset, its own timeout)
    outcome: str
    latency_ms: float | None = None  # time to answer, as the mock or the proxy measured it
    fault: str | None = None
    """What the client got instead of a whole answer: reset, truncated, malformed or timeout."""
    violations: tuple[str, ...] = ()  # contract breaches of a proxied answer (proxy.py)
    fingerprints: frozenset[bytes] = field(default=frozenset(), repr=False, compare=False)
    """Salted digests of the headers and parameters sent (:func:`fingerprint`), never shown."""

    def sent(self, kind: str, name: str, value: str) -> bool:
        """Whether this request sent header (``h``) or parameter (``q``) ``name`` as ``value``."""
        return fingerprint(kind, name, value) in self.fingerprints

    def to_json(self) -> dict[str, Any]:
        shown = asdict(self)
        del shown["fingerprints"]
        return shown


class EntryParts(NamedTuple):
    """An :class:`Entry`'s fields, in its order, masked and bounded already: what a journal keeps.

    A journal keeps these and builds the entries when they are read: building a frozen
    dataclass costs more than the rest of journaling a request, and most entries are never read
    (a named tuple is a tuple: no dearer to build). Nothing in them is a secret
    (:func:`entry_parts` masks and digests before they are kept). A shared store keeps the first
    ten fields, in this order, as a JSON array (:func:`entry_head`, :func:`decode_entry`).
    """

    time: float
    method: str
    path: str
    n: str | None
    query: dict[str, list[str]]
    authorization: str | None
    status: int | None
    outcome: str
    latency_ms: float | None
    fault: str | None
    violations: tuple[str, ...]
    fingerprints: frozenset[bytes]


_new = tuple.__new__
"""Builds a named tuple from a tuple of its fields in order: a NamedTuple's own ``__new__`` is
a Python function, 0.2 µs more per request on the hot path (benchmarks/bench_connection.py)."""


class Kept(NamedTuple):
    """An entry's parts and the journal's generation when its request arrived."""

    generation: int
    parts: EntryParts


def untrusted(method: str, path: str, status: int | None, outcome: str) -> bool:
    """Whether any web page could have sent this request, so it goes to the bounded ring.

    A ``no-cors`` fetch or a form reaches any path with any method but carries no
    Authorization: what is not ``GET``/``HEAD /e``, or is refused with a 401 the mock decided
    (not a scripted one), is such a request. Real entries (an accepted key's) are never evicted
    by them.
    """
    return (
        path != ENDPOINT_PATH
        or method not in _API_METHODS
        or (status == 401 and outcome != "scripted")
    )


_API_METHODS: Final = frozenset({"GET", "HEAD"})


class EntryFields(TypedDict, total=False):
    """What :func:`make_entry` and :meth:`Journal.record` take (``method``... are required)."""

    method: Required[str]
    path: Required[str]
    args: Required[Iterable[tuple[str, str]]]
    authorization: Required[str | None]
    status: Required[int | None]
    outcome: Required[str]
    is_key: Callable[[str], bool]
    latency_ms: float | None
    fault: str | None
    violations: tuple[str, ...]
    headers: RawHeaders
    shown: Shown | None


@dataclass
class Journal:
    """Keeps the newest ``size`` entries; older ones fall off, so memory stays flat.

    Requests any web page can send (:func:`untrusted`) go to a ring of their own
    (:data:`UNTRUSTED_KEPT` entries): a page flooding the mock with keyless requests or
    unknown paths evicts only those. :meth:`entries` merges both rings in time order.

    Each entry is bounded too (:data:`MAX_PARAMS` parameters, values masked or cut with
    :data:`CUT`), so the journal's size in bytes is bounded whatever the requests hold.
    """

    size: int = 1000
    _entries: deque[Kept] = field(init=False, repr=False)
    _refused: deque[Kept] = field(init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _generation: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._entries = deque(maxlen=self.size)
        self._refused = deque(maxlen=UNTRUSTED_KEPT)

    @property
    def generation(self) -> int:
        """Changes at each ``clear()``: a request answered after it started is dropped."""
        return self._generation

    def record(self, *, generation: int | None = None, **fields: Unpack[EntryFields]) -> None:
        """Journal a request; ``is_key`` tells a configured API key wherever it was sent.

        ``shown`` is :func:`shown_args` of ``args``, when the caller has it already (a load
        test sends one query again and again); the entries then share it, read-only.

        ``generation`` is :attr:`generation` when the request arrived: a request still in
        flight when the journal was cleared (a delay from an earlier test) is not journaled.
        """
        self.add(make_parts(fields), generation)

    def add(self, parts: EntryParts, generation: int | None = None) -> None:
        """Keep an entry's :class:`EntryParts` (from :func:`entry_parts`); see :meth:`record`.

        No lock: a deque's append is atomic. An entry of an earlier generation (its request
        arrived before a ``clear()``) is kept with it and never read (:meth:`_current`).
        """
        kept = _new(Kept, (self._generation if generation is None else generation, parts))
        refused = untrusted(parts.method, parts.path, parts.status, parts.outcome)
        (self._refused if refused else self._entries).append(kept)

    def _current(self) -> list[EntryParts]:
        """The parts of this generation's entries, oldest first (copies first: a deque copied
        whole is atomic, while iterating it races the appends)."""
        generation = self._generation
        entries, refused = list(self._entries), list(self._refused)
        if refused:
            entries = list(heapq.merge(entries, refused, key=_time))
        return [parts for kept, parts in entries if kept == generation]

    def entries(self) -> list[Entry]:
        with self._lock:
            kept = self._current()
        return [_entry(parts) for parts in kept]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._refused.clear()
            self._generation += 1

    def __len__(self) -> int:
        with self._lock:
            return len(self._current())


def _time(kept: Kept) -> float:
    return kept.parts.time


def entry_parts(
    method: str,
    path: str,
    authorization: str | None,
    status: int | None,
    outcome: str,
    shown: Shown,
    headers: RawHeaders = (),
    latency_ms: float | None = None,
    fault: str | None = None,
    violations: tuple[str, ...] = (),
) -> EntryParts:
    """An entry's :class:`EntryParts`: ``shown`` is :func:`shown_args` of its query (masked), the
    Authorization header is masked, headers and parameters are kept as digests only."""
    n, query, params = shown
    return _new(
        EntryParts,
        (
            time.time(),
            method,
            path if len(path) <= MAX_PATH_CHARS else cut(path, MAX_PATH_CHARS),
            n,
            query,
            mask_authorization(authorization),
            status,
            outcome,
            latency_ms,  # rounded when read (round() costs more than the rest of a field)
            fault,
            violations,
            _header_prints(tuple(headers), authorization) | params,
        ),
    )


def make_parts(fields: EntryFields) -> EntryParts:
    """An entry's parts from its fields (see :func:`make_entry`), not yet an :class:`Entry`."""
    shown = fields.get("shown")
    if shown is None:
        shown = shown_args(fields["args"], fields.get("is_key", _no_key))
    return entry_parts(
        fields["method"],
        fields["path"],
        fields["authorization"],
        fields["status"],
        fields["outcome"],
        shown,
        fields.get("headers", ()),
        fields.get("latency_ms"),
        fields.get("fault"),
        fields.get("violations", ()),
    )


def _entry(parts: EntryParts) -> Entry:
    """The entry of kept parts, its latency rounded to the microsecond."""
    latency = parts.latency_ms
    if latency is None:
        return Entry(*parts)
    return Entry(*parts._replace(latency_ms=round(latency, 3)))


def _no_key(_: str) -> bool:
    return False


def make_entry(**fields: Unpack[EntryFields]) -> Entry:
    """One journal entry, masked and bounded (a shared state journals it elsewhere).

    ``shown`` is :func:`shown_args` of ``args``, when the caller has it already (a load test
    sends one query again and again); the entries then share it, read-only.
    """
    return _entry(make_parts(fields))


# A shared store keeps an entry as a JSON array of its first ten parts, in their order: the
# request's (the head, built before the store decides), then the answer's (the tail, the one
# the store picked; its latency is null: the store journals before the answer exists).
def entry_head(parts: EntryParts) -> str:
    """The entry's JSON array up to its answer's fields, ending with a comma."""
    request = [parts.time, parts.method, parts.path, parts.n, parts.query, parts.authorization]
    return json.dumps(request, ensure_ascii=False)[:-1] + ","


@lru_cache(maxsize=256)  # a handful of outcomes, built for every request to /e
def entry_tail(outcome: Outcome) -> str:
    """The end of an entry's JSON array: status, outcome, latency (null), fault."""
    return json.dumps([outcome.status, outcome.outcome, None, outcome.fault])[1:]


def decode_entry(text: str) -> Entry:
    """An entry a shared store kept (:func:`entry_head` and :func:`entry_tail` joined)."""
    at, method, path, n, query, authorization, status, said, latency, fault = json.loads(text)
    kept = EntryParts(
        at, method, path, n, query, authorization, status, said, latency, fault, (), frozenset()
    )
    return _entry(kept)
