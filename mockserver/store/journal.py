"""The request journal: what each request sent and what it was served, bounded, with secrets
masked (headers and parameters kept as salted digests only, for matchers).
"""

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
from functools import lru_cache
from typing import Any, Final, NamedTuple, cast

from verdict_contract.core.redact import (
    mask,
    mask_credentials,
    masked_header,
    masked_name,
    masked_url,
)
from verdict_contract.core.spec import SESSION_PARAM, VerdictKind, is_api_call

from ..model.answer import Result, Served
from ..model.sessions import MAX_SESSION_ID_LENGTH

# --- how a request is shown ------------------------------------------------------------------

MAX_PARAMS: Final = 20
"""Query parameters kept per entry; the rest are counted under :data:`CUT`."""
MAX_HEADERS: Final = 64
"""Request headers fingerprinted per entry (for :meth:`~.verify.JournalChecks.calls` matchers)."""
MAX_PATH_CHARS: Final = 200
"""A path other than ``/e`` (a wrong one) is kept cut to this length."""
CUT: Final = "…(cut)"
"""The marker where the journal cut a value (or, as a query name, dropped parameters)."""
UNREAD: Final = re.compile(r"\d+ bytes not read \(no valid key\)")  # the server's note, as CUT's


def cut(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its start and :data:`CUT`."""
    return text if len(text) <= limit else text[:limit] + CUT


def masked_param(
    name: str, value: str, is_key: Callable[[str], bool] = lambda _: False
) -> tuple[str, str]:
    """A query parameter as output shows it: ``n`` (cut), plain names; other values masked."""
    if name == SESSION_PARAM:  # only what is shown is looked at (a query may hold 256 KiB)
        shown = cut(value, MAX_SESSION_ID_LENGTH)
        return name, mask(value) if is_key(shown) else shown
    return masked_name(name, is_key), mask(value)


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


class KeptHeaders(NamedTuple):
    """What an entry keeps of a request's headers: its Authorization masked, digests of all."""

    authorization: str | None  # as :func:`~verdict_contract.core.redact.mask_credentials` shows it
    prints: frozenset[bytes]  # :func:`fingerprint` of each header given (the first MAX_HEADERS)


# One load test sends the same headers each time (bench_instructions: 110k a GET /e, 146k without)
@lru_cache(maxsize=64)
def kept_headers(
    headers: tuple[tuple[str, str] | tuple[bytes, bytes], ...], authorization: str | None
) -> KeptHeaders:
    prints = {fingerprint("h", as_text(k).lower(), as_text(v)) for k, v in headers}
    if authorization is None:
        return KeptHeaders(None, frozenset(prints))
    prints.add(fingerprint("h", "authorization", authorization))  # read apart by asyncserver.py
    return KeptHeaders(mask_credentials(authorization), frozenset(prints))


JournaledQuery = tuple[str | None, dict[str, list[str]], frozenset[bytes]]
"""How the journal shows a request's query: its ``n``, the other parameters (masked), and the
fingerprints of the parameters kept (:func:`fingerprint`)."""


def journaled_query(
    args: Iterable[tuple[str, str]], is_key: Callable[[str], bool]
) -> JournaledQuery:
    """``n`` and the query as the journal shows them: bounded, every value but ``n`` masked."""
    query: dict[str, list[str]] = {}
    n = None
    kept = dropped = 0
    note = ""
    prints: set[bytes] = set()
    for name, value in args:
        if name == CUT and UNREAD.fullmatch(value):  # the server's note (a client's is masked)
            note = value
        elif name == SESSION_PARAM and n is None:
            n = masked_param(name, value, is_key)[1]
            prints.add(fingerprint("q", name, value))
        elif kept < MAX_PARAMS:
            kept += 1
            prints.add(fingerprint("q", name, value))
            first = name != SESSION_PARAM  # a repeated n is masked: it could be anything
            label, masked = masked_param(name, value, is_key) if first else (name, mask(value))
            query.setdefault(label, []).append(masked)
        else:  # bounded: hostile query strings hold tens of thousands of parameters
            dropped += 1
    if dropped or note:
        query[CUT] = [", ".join(t for t in (dropped and f"{dropped} more parameter(s)", note) if t)]
    return n, query, frozenset(prints)


# --- the entries, and the journal of this process --------------------------------------------

UNTRUSTED_KEPT: Final = 100
"""Entries of requests any web page can send (no valid key, or a path or method the API does not
take; see :attr:`JournalEntry.untrusted`), kept in a ring of their own, so they never evict the
rest."""


_NOTHING_SERVED: Final = Served(None, None, None, ())
_NO_PRINTS: Final = frozenset[bytes]()


class SentRequest:
    """What an in-process client sent, as it sent it: its method, URL, headers and body (the
    key included: the test's own request, as respx keeps an ``httpx.Request``). Its repr masks
    whatever could hold a key (``masked_url``, ``masked_header``); a plain class, not a tuple,
    so that pytest's diff of two entries shows that repr, not the fields."""

    __slots__ = ("body", "headers", "method", "url")

    def __init__(
        self, method: str, url: str, headers: tuple[tuple[str, str], ...], body: bytes
    ) -> None:
        self.method, self.url, self.headers, self.body = method, url, headers, body

    def header(self, name: str) -> str | None:
        """The value of header ``name`` (any case), the values joined by ``,`` if sent twice."""
        values = [v for k, v in self.headers if k.lower() == name.lower()]
        return ",".join(values) if values else None

    def __repr__(self) -> str:
        headers = tuple((k, masked_header(k, v)) for k, v in self.headers)
        url, body = masked_url(self.url), f"<{len(self.body)} bytes>"
        return f"SentRequest(method={self.method!r}, url={url!r}, headers={headers!r}, body={body})"


class JournalEntry(NamedTuple):
    """One journaled request, as a journal keeps it and a test reads it (both stores).

    Masked and bounded as :func:`make_entry` makes it, so nothing in it is a secret. A named
    tuple, one per request: a frozen dataclass cost more to build than the rest of journaling
    the request.
    """

    time: float
    method: str
    path: str
    n: str | None
    query: dict[str, list[str]]
    authorization: str | None
    result: Result
    """What the client got, read through :attr:`status`, :attr:`verdict`..."""
    elapsed_ms: float | None = None
    """Time to answer as the mock or the proxy measured it (:attr:`latency_ms` rounds it:
    round() costs more per request than the rest of a field)."""
    violations: tuple[str, ...] = ()  # contract breaches of a proxied answer (proxy.py)
    header_prints: frozenset[bytes] = _NO_PRINTS  # salted digests (:func:`fingerprint`) of the
    param_prints: frozenset[bytes] = _NO_PRINTS  # headers and parameters sent, never shown:
    # two sets, each shared by a cache; :attr:`fingerprints` joins them when read (joined per
    # request it cost 5% of /e: benchmarks/bench_instructions.py)
    untrusted: bool = False
    """Whether any web page could have sent this request (:func:`make_entry`): it goes to the
    bounded ring, so such requests never evict an accepted key's."""
    request: SentRequest | None = None
    """In-process (``verdict_respx``, ``verdict_responses``, on the memory state): the request as
    the client sent it, key included (its repr masks it); None over HTTP and on a shared state,
    which keep the masked fields and digests only."""
    seq: int = 0
    """Its place in the journal, given as it is kept: the order requests were journaled in,
    across every process of a shared state (:attr:`time` is the deciding process's clock, which
    another process's may disagree with). The journal is read in this order."""
    generation: int | None = None
    """The journal's generation when the request arrived (each clear moves it): a journal keeps
    the entry only if it was not cleared since. None: kept in the journal of now (a request
    answered at once), and in every entry read back."""

    @property
    def status(self) -> int | None:
        """None: the client got no status line (a reset, its own timeout)."""
        return self.result.status

    @property
    def outcome(self) -> str:
        return self.result.outcome

    @property
    def fault(self) -> str | None:
        """What the client got instead of a whole answer: reset, truncated, malformed or
        timeout."""
        return self.result.fault

    @property
    def decided_by(self) -> str:
        """``script`` if a scripted step decided the answer (a status, a fault, a standing step),
        ``logic`` if the mock's own rules did (a delay step only delays the logic's answer)."""
        return self.result.decided_by

    @property
    def retry_after(self) -> str | None:
        """The Retry-After header sent, as sent."""
        return self.result.retry_after

    @property
    def delay_ms(self) -> int | None:
        """A scripted delay waited out before answering."""
        return self.result.delay_ms

    @property
    def verdict(self) -> VerdictKind | None:
        """The verdict of the 2xx body the client was served whole, if any (a kind the spec
        does not list yet, from a proxied service, as it was sent)."""
        return cast("VerdictKind | None", (self.result.served or _NOTHING_SERVED).verdict)

    @property
    def conclusive(self) -> bool | None:
        return (self.result.served or _NOTHING_SERVED).conclusive

    @property
    def schema(self) -> int | None:
        return (self.result.served or _NOTHING_SERVED).schema

    @property
    def extra_fields(self) -> tuple[str, ...]:
        """The served body's top-level fields that the spec does not list."""
        return (self.result.served or _NOTHING_SERVED).extra_fields

    @property
    def latency_ms(self) -> float | None:
        """Time to answer in milliseconds, to the microsecond."""
        return None if self.elapsed_ms is None else round(self.elapsed_ms, 3)

    @property
    def fingerprints(self) -> frozenset[bytes]:
        """Salted digests of the headers and parameters sent (:func:`fingerprint`)."""
        return self.header_prints | self.param_prints

    def sent(self, kind: str, name: str, value: str) -> bool:
        """Whether this request sent header (``h``) or parameter (``q``) ``name`` as ``value``."""
        return fingerprint(kind, name, value) in self.fingerprints

    def replace(self, **changes: Any) -> JournalEntry:
        """This entry with shown fields changed, by the names :meth:`to_json` shows: a
        request's (``path``...), its answer's (``status``...) or its served body's
        (``verdict``...), as :func:`dataclasses.replace` changes a dataclass; a name it does
        not show (the journal's bookkeeping, ``untrusted``...) is a :class:`TypeError`, on every
        Python (3.13's ``_replace`` raises one where 3.11's raised a ValueError)."""
        if unknown := set(changes) - set(JSON_FIELDS):
            raise TypeError(f"JournalEntry.replace() got unexpected field names: {sorted(unknown)}")
        served = {name: changes.pop(name) for name in Served._fields if name in changes}
        result = {name: changes.pop(name) for name in _RESULT_FIELDS if name in changes}
        if served:
            result["served"] = (self.result.served or _NOTHING_SERVED)._replace(**served)
        if "latency_ms" in changes:
            changes["elapsed_ms"] = changes.pop("latency_ms")
        return self._replace(result=self.result._replace(**result), **changes)

    def to_json(self) -> dict[str, Any]:
        """What the control API and the plugin show of it (no digests, no journal bookkeeping).

        A copy: the query's dict is shared by the entries of one query (a cache), so a caller
        that edits what it was given changes no entry.
        """
        fields = {name: getattr(self, name) for name in JSON_FIELDS}
        fields["query"] = {name: list(values) for name, values in self.query.items()}
        return fields


JSON_FIELDS: Final = (
    "seq",
    "time",
    "method",
    "path",
    "n",
    "query",
    "authorization",
    "status",
    "outcome",
    "latency_ms",
    "fault",
    "decided_by",
    "verdict",
    "conclusive",
    "schema",
    "extra_fields",
    "retry_after",
    "delay_ms",
    "violations",
)
"""An entry's fields as :meth:`JournalEntry.to_json` shows them, in this order."""
_RESULT_FIELDS: Final = frozenset(Result._fields) - {"served"}


class Journal:
    """This process's journal: the newest ``size`` entries, and the newest
    :data:`UNTRUSTED_KEPT` of what any web page can send (:attr:`JournalEntry.untrusted`) in a
    ring of their own, so a page flooding the mock evicts only those. Each entry is bounded
    too, so the journal's bytes are bounded whatever the requests hold.
    """

    def __init__(self, size: int = 1000) -> None:
        self.size = size
        self.generation = 0
        """Moved by each :meth:`clear`: a request answered after it started is dropped."""
        self._seq = 0
        # each entry with its number, given when read (numbered as kept, _replace cost 10%)
        self._entries: deque[tuple[int, JournalEntry]] = deque(maxlen=size)
        self._refused: deque[tuple[int, JournalEntry]] = deque(maxlen=UNTRUSTED_KEPT)
        self._lock = threading.Lock()

    def add(self, entry: JournalEntry) -> bool:
        """Keep an entry, numbered (:attr:`JournalEntry.seq`), unless its request arrived before
        a ``clear()`` (its :attr:`~JournalEntry.generation` is no longer :attr:`generation`: a
        delay from an earlier test)."""
        with self._lock:
            if entry.generation is not None and entry.generation != self.generation:
                return False
            self._seq += 1
            (self._refused if entry.untrusted else self._entries).append((self._seq, entry))
            return True

    def entries(self) -> list[JournalEntry]:
        """Both rings, in the order they were kept."""
        with self._lock:
            kept, refused = list(self._entries), list(self._refused)
        numbered = heapq.merge(kept, refused) if refused else kept  # by number: each its own
        return [entry._replace(seq=seq, generation=None) for seq, entry in numbered]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._refused.clear()
            self.generation += 1

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries) + len(self._refused)


def make_entry(
    *,
    method: str,
    path: str,
    authorization: str | None,
    result: Result,
    args: Iterable[tuple[str, str]] = (),
    is_key: Callable[[str], bool] = lambda _: False,
    journaled: JournaledQuery | None = None,
    headers: RawHeaders = (),
    latency_ms: float | None = None,
    violations: tuple[str, ...] = (),
    sent: SentRequest | None = None,
    generation: int | None = None,
) -> JournalEntry:
    """A request's :class:`JournalEntry`, the one way one is made (:func:`decode_entry` reads
    back one a shared store kept): its query ``args`` shown masked and bounded
    (:func:`journaled_query`; ``is_key`` tells a configured API key wherever it was sent), or
    ``journaled`` if the caller has it already (a load test sends one query again and again: the
    entries share it, read-only); the Authorization header masked; headers and parameters kept
    as digests only; ``result``: the answer's (:func:`.steps.result_of`); ``generation``: the
    journal's when the request arrived."""
    n, query, params = journaled_query(args, is_key) if journaled is None else journaled
    # The rule of :attr:`JournalEntry.untrusted`, its one place: a no-cors fetch or a form
    # reaches any path with any method, but carries no Authorization (a 401 the mock decided).
    untrusted = not is_api_call(method, path) or (
        result.status == 401 and result.outcome != "scripted"
    )
    bounded = headers if len(headers) <= MAX_HEADERS else headers[:MAX_HEADERS]  # the cache too
    kept = kept_headers(tuple(bounded), authorization)
    return JournalEntry(
        time.time(),
        method,
        path if len(path) <= MAX_PATH_CHARS else cut(path, MAX_PATH_CHARS),
        n,
        query,
        kept.authorization,
        result,
        latency_ms,  # rounded when read (JournalEntry.latency_ms)
        violations,
        kept.prints,
        params,
        untrusted,
        sent,
        0,  # seq: given as the entry is kept (Journal.add; on Redis, the append script)
        generation,
    )


def encode_entry(entry: JournalEntry) -> str:
    """An entry as a shared store keeps it: a JSON array of the fields shown, its answer's
    (:class:`~.answer.Result`'s, in order); its digests and the in-process request left out
    (:func:`decode_entry` reads it back in the same order)."""
    e, (*answer, served) = entry, entry.result
    shown = [e.time, e.method, e.path, e.n, e.query, e.authorization, answer, served]
    return _ENCODE([*shown, e.elapsed_ms, e.violations])


# One encoder: json.dumps with options builds a JSONEncoder per call (a fifth of encode_entry)
_ENCODE: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def decode_entry(kept: str, untrusted: bool = False) -> JournalEntry:
    """An entry a shared store kept: its :attr:`~JournalEntry.seq`, a space, then
    :func:`encode_entry`; ``untrusted``: it was kept in the ring."""
    seq, _, text = kept.partition(" ")
    at, method, path, n, query, auth, answer, served, elapsed, violations = json.loads(text)
    facts = None if served is None else Served._make([*served[:3], tuple(served[3])])
    return JournalEntry(
        at, method, path, n, query, auth, Result._make([*answer, facts]), elapsed,
        tuple(violations), untrusted=untrusted, seq=int(seq),
    )  # fmt: skip
