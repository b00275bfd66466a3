"""The request journal: a bounded record of the calls to /e, with secrets masked."""

from __future__ import annotations

import heapq
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any, Final

from verdict_contract.core.redact import mask
from verdict_contract.core.spec import SESSION_PARAM
from verdict_contract.mockserver.sessions import MAX_SESSION_ID_LENGTH

MAX_PARAMS: Final = 20
"""Query parameters kept per entry; the rest are counted under :data:`CUT`."""
MAX_SCHEME_CHARS: Final = 20
FAILED_AUTH_KEPT: Final = 100
"""Entries of requests refused for a missing or wrong key, kept in their own ring: any web page
can send those (a ``no-cors`` fetch carries no Authorization), so they never evict the rest."""
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


Shown = tuple[str | None, dict[str, list[str]]]
"""How the journal shows a request's query: its ``n``, and the other parameters (masked)."""


def shown_args(args: Iterable[tuple[str, str]], is_key: Callable[[str], bool]) -> Shown:
    """``n`` and the query as the journal shows them: bounded, every value but ``n`` masked."""
    query: dict[str, list[str]] = {}
    n = None
    kept = dropped = 0
    note = ""
    for name, value in args:
        if name == CUT:  # what the server did not read (explain.py)
            note = cut(value, 100)
        elif name == SESSION_PARAM and n is None:
            n = shown_param(name, value, is_key)[1]
        elif kept < MAX_PARAMS:
            kept += 1
            first = name != SESSION_PARAM  # a repeated n is masked: it could be anything
            shown, masked = shown_param(name, value, is_key) if first else (name, mask(value))
            query.setdefault(shown, []).append(masked)
        else:  # bounded: hostile query strings hold tens of thousands of parameters
            dropped += 1
    if dropped or note:
        query[CUT] = [", ".join(t for t in (dropped and f"{dropped} more parameter(s)", note) if t)]
    return n, query


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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Journal:
    """Keeps the newest ``size`` entries; older ones fall off, so memory stays flat.

    Requests refused with a non-scripted 401 go to a ring of their own
    (:data:`FAILED_AUTH_KEPT` entries): a page flooding the mock with keyless requests
    evicts only those. :meth:`entries` merges both rings in time order.

    Each entry is bounded too (:data:`MAX_PARAMS` parameters, values masked or cut with
    :data:`CUT`), so the journal's size in bytes is bounded whatever the requests hold.
    """

    size: int = 1000
    _entries: deque[Entry] = field(init=False)
    _refused: deque[Entry] = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _generation: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._entries = deque(maxlen=self.size)
        self._refused = deque(maxlen=FAILED_AUTH_KEPT)

    @property
    def generation(self) -> int:
        """Changes at each ``clear()``: a request answered after it started is dropped."""
        return self._generation

    def record(
        self,
        *,
        method: str,
        path: str,
        args: Iterable[tuple[str, str]],
        authorization: str | None,
        status: int | None,
        outcome: str,
        is_key: Callable[[str], bool] = lambda _: False,
        latency_ms: float | None = None,
        fault: str | None = None,
        violations: tuple[str, ...] = (),
        generation: int | None = None,
        shown: Shown | None = None,
    ) -> None:
        """Journal a request; ``is_key`` tells a configured API key wherever it was sent.

        ``shown`` is :func:`shown_args` of ``args``, when the caller has it already (a load
        test sends one query again and again); the entries then share it, read-only.

        ``generation`` is :attr:`generation` when the request arrived: a request still in
        flight when the journal was cleared (a delay from an earlier test) is not journaled.
        """
        n, query = shown if shown is not None else shown_args(args, is_key)
        entry = Entry(
            time.time(),
            method,
            cut(path, MAX_SESSION_ID_LENGTH),
            n,
            query,
            mask_authorization(authorization),
            status,
            outcome,
            None if latency_ms is None else round(latency_ms, 3),
            fault,
            violations,
        )
        with self._lock:
            if generation is None or generation == self._generation:
                refused = status == 401 and outcome != "scripted"
                (self._refused if refused else self._entries).append(entry)

    def entries(self) -> list[Entry]:
        with self._lock:
            if not self._refused:
                return list(self._entries)
            return list(heapq.merge(self._entries, self._refused, key=lambda e: e.time))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._refused.clear()
            self._generation += 1

    def __len__(self) -> int:
        return len(self._entries) + len(self._refused)
