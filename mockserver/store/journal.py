"""The request journal: a bounded record of the calls to /e, with secrets masked."""

from __future__ import annotations

import heapq
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any, Final, NamedTuple, Required, TypedDict, Unpack

from verdict_contract.core.spec import ENDPOINT_PATH

from ..model.answer import Served
from ..model.steps import Outcome
from .shown import (
    MAX_PATH_CHARS,
    RawHeaders,
    Shown,
    cut,
    fingerprint,
    header_prints,
    mask_authorization,
    shown_args,
)

UNTRUSTED_KEPT: Final = 100
"""Entries of requests any web page can send (no valid key, or a path or method the API does not
take; see :attr:`EntryParts.untrusted`), kept in a ring of their own, so they never evict the
rest."""


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
    decided_by: str = "logic"
    """``script`` if a scripted step decided the answer (a status, a fault, a standing step),
    ``logic`` if the mock's own rules did (a delay step only delays the logic's answer)."""
    verdict: str | None = None  # what the client was served whole (a 2xx verdict body)...
    conclusive: bool | None = None
    schema: int | None = None
    extra_fields: tuple[str, ...] = ()  # ...and its top-level fields the spec does not list
    retry_after: str | None = None  # the Retry-After header sent, as sent
    delay_ms: int | None = None  # a scripted delay waited out before answering
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
    """An :class:`Entry`'s fields, masked and bounded already: what a journal keeps.

    A journal keeps these and builds the entries when they are read: building a frozen
    dataclass costs more than the rest of journaling a request, and most entries are never read
    (a named tuple costs little more than a tuple). The answer's fields stay the one
    :class:`~.steps.Outcome` the answer object holds (``reading``), spread out when read.
    Nothing in them is a secret (:func:`entry_parts` masks and digests before they are kept).
    A shared store keeps the request's fields and the answer's as a JSON array
    (:func:`entry_head`, :func:`entry_tail`, :func:`decode_entry`).
    """

    time: float
    method: str
    path: str
    n: str | None
    query: dict[str, list[str]]
    authorization: str | None
    reading: Outcome
    latency_ms: float | None
    violations: tuple[str, ...]
    header_prints: frozenset[bytes]  # the entry's fingerprints: these and the parameters'
    param_prints: frozenset[bytes]  # (two sets, each shared by a cache: their union is built
    # when the entry is read; per request it cost 5% of /e: benchmarks/bench_instructions.py)
    untrusted: bool
    """Whether any web page could have sent this request, so it goes to the bounded ring.

    A ``no-cors`` fetch or a form reaches any path with any method but carries no
    Authorization: what is not ``GET``/``HEAD /e``, or is refused with a 401 the mock decided
    (not a scripted one), is such a request. Real entries (an accepted key's) are never evicted
    by them. Decided once, by :func:`entry_parts`, for both stores.
    """
    generation: int
    """The journal's generation when the request arrived: an entry of an earlier one (its
    request arrived before a ``clear()``) is never read."""

    @property
    def status(self) -> int | None:
        return self.reading.status

    @property
    def outcome(self) -> str:
        return self.reading.outcome

    @property
    def fault(self) -> str | None:
        return self.reading.fault


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
    _entries: deque[EntryParts] = field(init=False, repr=False)
    _refused: deque[EntryParts] = field(init=False, repr=False)
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
        self.add(make_parts(fields, self._generation if generation is None else generation))

    def add(self, parts: EntryParts) -> None:
        """Keep an entry's :class:`EntryParts` (from :func:`entry_parts`); see :meth:`record`.

        No lock: a deque's append is atomic. An entry of an earlier generation (its request
        arrived before a ``clear()``) is kept and never read (:meth:`_current`).
        """
        (self._refused if parts.untrusted else self._entries).append(parts)

    def _current(self) -> list[EntryParts]:
        """The parts of this generation's entries, oldest first (copies first: a deque copied
        whole is atomic, while iterating it races the appends)."""
        generation = self._generation
        entries, refused = list(self._entries), list(self._refused)
        if refused:
            entries = list(heapq.merge(entries, refused, key=_time))
        return [parts for parts in entries if parts.generation == generation]

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


def _time(parts: EntryParts) -> float:
    return parts.time


def entry_parts(
    method: str,
    path: str,
    authorization: str | None,
    reading: Outcome,
    shown: Shown,
    headers: RawHeaders = (),
    latency_ms: float | None = None,
    violations: tuple[str, ...] = (),
    generation: int = 0,
) -> EntryParts:
    """An entry's :class:`EntryParts`: ``shown`` is :func:`shown_args` of its query (masked), the
    Authorization header is masked, headers and parameters are kept as digests only;
    ``reading`` is the answer's (:func:`.steps.outcome`); ``generation``: the journal's when the
    request arrived."""
    n, query, params = shown
    untrusted = (  # the rule of :attr:`EntryParts.untrusted`, its one place
        path != ENDPOINT_PATH
        or method not in _API_METHODS
        or (reading.status == 401 and reading.outcome != "scripted")
    )
    return EntryParts(
        time.time(),
        method,
        path if len(path) <= MAX_PATH_CHARS else cut(path, MAX_PATH_CHARS),
        n,
        query,
        mask_authorization(authorization),
        reading,
        latency_ms,  # rounded when read (round() costs more than the rest of a field)
        violations,
        header_prints(tuple(headers), authorization),
        params,
        untrusted,
        generation,
    )


def make_parts(fields: EntryFields, generation: int = 0) -> EntryParts:
    """An entry's parts from its fields (see :func:`make_entry`), not yet an :class:`Entry`."""
    shown = fields.get("shown")
    if shown is None:
        shown = shown_args(fields["args"], fields.get("is_key", _no_key))
    reading = Outcome(fields["status"], fields["outcome"], fields.get("fault"))
    return entry_parts(
        fields["method"],
        fields["path"],
        fields["authorization"],
        reading,
        shown,
        fields.get("headers", ()),
        fields.get("latency_ms"),
        fields.get("violations", ()),
        generation,
    )


_NOTHING_SERVED: Final = Served(None, None, None, ())
_NO_PRINTS: Final = frozenset[bytes]()


def _entry(parts: EntryParts) -> Entry:
    """The entry of kept parts, the answer's reading spread out, its latency rounded to the
    microsecond."""
    (at, method, path, n, query, authorization, reading, latency, violations, headers, params,
     _, _) = parts  # fmt: skip
    status, said, fault, decided_by, retry_after, delay_ms, facts = reading
    verdict, conclusive, schema, extra = facts or _NOTHING_SERVED
    return Entry(
        at,
        method,
        path,
        n,
        query,
        authorization,
        status,
        said,
        None if latency is None else round(latency, 3),
        fault,
        decided_by,
        verdict,
        conclusive,
        schema,
        extra,
        retry_after,
        delay_ms,
        violations,
        headers | params,
    )


def _no_key(_: str) -> bool:
    return False


def make_entry(**fields: Unpack[EntryFields]) -> Entry:
    """One journal entry, masked and bounded (a shared state journals it elsewhere).

    ``shown`` is :func:`shown_args` of ``args``, when the caller has it already (a load test
    sends one query again and again); the entries then share it, read-only.
    """
    return _entry(make_parts(fields))


# A shared store keeps an entry as a JSON array: the request's fields and the facts of the
# session's verdict body (the head, built before the store decides), then the answer's (the
# tail, the one the store picked; its latency is null: the store journals before the answer
# exists). A tail says whether its answer served that body: a scripted step's tail is built
# once per script, without the session's body (redisstate.py).
# The store puts the entry's time in front (luascripts._ENTRY_AT), as the request is decided.
def head_past_time(parts: EntryParts, body: Served | None = None) -> str:
    """The entry's JSON array past its time and up to its answer's fields, ending with a comma
    (the same for each request of one kind); ``body``: the facts of the verdict body the
    request's session would be served, if any."""
    request = [
        parts.method,
        parts.path,
        parts.n,
        parts.query,
        parts.authorization,
        parts.reading.served if body is None else body,
    ]
    return json.dumps(request, ensure_ascii=False)[1:-1] + ","


class TailAround(NamedTuple):
    """An entry's tail (:func:`entry_tail`) before and after its ``delay_ms``: a shared store
    joins them around the delay of the step it takes (``null`` for none)."""

    before_delay: str
    after_delay: str

    def joined(self, delay_ms: int | None) -> str:
        return self.before_delay + json.dumps(delay_ms) + self.after_delay


@lru_cache(maxsize=256)  # a handful of outcomes, built for every request to /e
def tail_around(outcome: Outcome) -> TailAround:
    """The end of an entry's JSON array, status, outcome, latency (null), fault, who decided,
    Retry-After, the delay, and whether the answer served the session's verdict body, in two:
    before the delay and after it."""
    status, said, fault, decided_by, retry_after, _, _ = outcome
    with_body = fault is None and status is not None and 200 <= status < 300
    before = [status, said, None, fault, decided_by, retry_after]
    return TailAround(json.dumps(before)[1:-1] + ", ", ", " + json.dumps([with_body])[1:])


@lru_cache(maxsize=256)  # a handful of outcomes, built for every request to /e
def entry_tail(outcome: Outcome) -> str:
    """The end of an entry's JSON array (:func:`tail_around`, its delay in place)."""
    return tail_around(outcome).joined(outcome.delay_ms)


def decode_entry(text: str) -> Entry:
    """An entry a shared store kept: its time, :func:`head_past_time`, :func:`entry_tail`."""
    (at, method, path, n, query, authorization, body, status, said, latency, fault, decided_by,
     retry_after, delay_ms, with_body) = json.loads(text)  # fmt: skip
    facts = None
    if with_body and body is not None:
        verdict, conclusive, schema, extra = body
        facts = Served(verdict, conclusive, schema, tuple(extra))
    reading = Outcome(status, said, fault, decided_by, retry_after, delay_ms, facts)
    kept = EntryParts(
        time=at,
        method=method,
        path=path,
        n=n,
        query=query,
        authorization=authorization,
        reading=reading,
        latency_ms=latency,
        violations=(),
        header_prints=_NO_PRINTS,  # a shared store keeps no fingerprints
        param_prints=_NO_PRINTS,
        untrusted=False,  # (read back: the store kept it in its place already)
        generation=0,
    )
    return _entry(kept)
