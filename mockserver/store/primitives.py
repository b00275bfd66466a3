"""What the rules ask of a store: a few storage primitives, and the store that keeps them in memory.

A request asks for what it needs one round trip at a time: an :class:`Ask` of primitives, its
answers filled in by the store. :class:`MemoryStore` (here) and :class:`.redisstate.RedisStore`
answer alike. Each primitive is atomic, as Redis runs one script at a time, and the clock a hit
is counted on is the clock its request reads (one step).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from verdict_contract.core.errors import StateUnavailable

from ..model.scripts import ScriptBook
from ..model.sessions import Step
from .backend import MEMORY
from .journal import Journal, JournalEntry


@dataclass(slots=True)
class Ask:
    """One round trip's primitives, and their answers, filled in by the store that runs it
    (:meth:`Store.run`); what is None or False is not asked. The clock read and the hit counted
    are one atomic step."""

    clock: bool = False
    """Read the store's clock: its :attr:`offset` and the journal's :attr:`generation`."""
    key: str | None = None
    """Count a hit of this API key (a store may keep a digest of it) in its fixed window:
    ``window`` seconds from its first hit, ``now`` on the mock's clock; a hit at or past the
    window's end starts a new one. ``now_offset`` is the clock offset ``now`` was read with: if
    the store's clock moved since, nothing is counted (count again on the new clock)."""
    now: float = 0.0
    window: float = 0.0
    now_offset: float = 0.0
    marked: str | None = None
    """Whether this session was expired by hand (``expire``)."""
    take: str | None = None
    """Take this session's next scripted step, if any is left (its bytes freed)."""

    # -- the answers, field for field
    offset: float = 0.0
    """Seconds the mock's clock is ahead of the real one (``advance``)."""
    generation: int = 0
    """The journal's generation: each clear moves it (an entry of an earlier one is not kept)."""
    started: float = 0.0
    """When the key's window started (on the mock's clock)."""
    hits: int = 0
    """The hits counted in the key's window, this one included; 0: none counted."""
    expired: bool = False
    """The session ``marked`` names was expired by hand."""
    step: Step | None = None
    """The step taken."""


Trip = Ask | JournalEntry
"""A round trip: an :class:`Ask`, or journaling an entry (:meth:`Store.append`)."""


class Store(Protocol):
    """Where the per-call state lives: the primitives of ``/e`` and what the control API does."""

    label: str
    capacity: int
    """Bytes of scripts the store holds at most (:func:`.scripts.admits`)."""

    def run(self, ask: Ask) -> Ask:
        """One round trip: ``ask`` with its answers filled in; raises StateUnavailable."""
        ...

    def append(self, entry: JournalEntry) -> bool:
        """Journal an entry in one round trip, unless the journal was cleared since its
        :attr:`~.journal.JournalEntry.generation`: to the journal, or to the ring of what any web
        page can send (``entry.untrusted``), each keeping its newest entries (the oldest go).
        Whether it was kept; raises StateUnavailable."""
        ...

    def submit(self, trip: Trip, done: Callable[[Ask | bool | Exception], None]) -> None:
        """:meth:`run` or :meth:`append` on the event loop: ``done`` is told the answered
        :class:`Ask` (or whether the entry was kept), or the StateUnavailable that stands for it
        (on the loop, never raising)."""

    def offset(self) -> float: ...

    def advance(self, seconds: float) -> None: ...

    def expire(self, session_id: str) -> None: ...

    def next_mint(self) -> int:
        """Count a minted session; its number since the last reset."""
        ...

    def load_script(self, session_id: str, steps: tuple[Step, ...]) -> None:
        """Give a minted session its script; raises ScriptStoreFull if it does not fit."""

    def load_named(self, scripts: Mapping[str, tuple[Step, ...]]) -> None:
        """Give named sessions their scripts (a shared store: unless given them already)."""

    def script_bytes(self) -> int: ...

    def scripts_left(self) -> dict[str, tuple[Step, ...]]:
        """The steps still unused of every session's script (named ones too)."""
        ...

    def entries(self) -> list[JournalEntry]: ...

    def clear_journal(self) -> None: ...

    def journal_length(self) -> int: ...

    def reset(self, scripts: Mapping[str, tuple[Step, ...]]) -> None:
        """Forget everything per-call; named sessions get ``scripts`` afresh."""

    def writable(self) -> StateUnavailable | None:
        """Why a write would fail now (full, read-only, down), or None (readiness)."""

    def close(self) -> None: ...


class MemoryStore:
    """The per-call state in this process: exact with any number of threads in it."""

    label = MEMORY

    def __init__(self, journal_size: int) -> None:
        self.journal = Journal(journal_size)
        self.scripts = ScriptBook()
        self.capacity = self.scripts.capacity
        self.skew = 0.0
        self._windows: dict[str, tuple[float, int]] = {}  # per key (accepted ones only: bounded)
        self._expired: set[str] = set()
        self._minted = 0
        self._lock = threading.Lock()

    def run(self, ask: Ask) -> Ask:
        with self._lock:  # the clock read as the hit is counted on it, as Redis runs ASK
            if ask.clock:
                ask.offset, ask.generation = self.skew, self.journal.generation
            if (key := ask.key) is not None and ask.now_offset == self.skew:  # else it moved
                started, hits = self._windows.get(key) or (ask.now, 0)
                if ask.now - started >= ask.window:
                    started, hits = ask.now, 0
                ask.started, ask.hits = self._windows[key] = started, hits + 1
        if ask.marked is not None:
            ask.expired = ask.marked in self._expired
        if ask.take is not None:
            ask.step = self.scripts.next_step(ask.take)
        return ask

    def append(self, entry: JournalEntry) -> bool:
        return self.journal.add(entry)

    def submit(self, trip: Trip, done: Callable[[Ask | bool | Exception], None]) -> None:
        done(self.run(trip) if type(trip) is Ask else self.append(trip))  # type: ignore[arg-type]

    def offset(self) -> float:
        return self.skew

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.skew += seconds

    def expire(self, session_id: str) -> None:
        self._expired.add(session_id)

    def next_mint(self) -> int:
        with self._lock:  # two mints at once must not share a number (and a body)
            self._minted += 1
            return self._minted

    def load_script(self, session_id: str, steps: tuple[Step, ...]) -> None:
        self.scripts.load(session_id, steps)

    def load_named(self, scripts: Mapping[str, tuple[Step, ...]]) -> None:
        for session_id, steps in scripts.items():  # the scenario's total was checked when read
            self.scripts.load(session_id, steps, force=True)

    def script_bytes(self) -> int:
        return self.scripts.size

    def scripts_left(self) -> dict[str, tuple[Step, ...]]:
        return self.scripts.left()

    def entries(self) -> list[JournalEntry]:
        return self.journal.entries()

    def clear_journal(self) -> None:
        self.journal.clear()

    def journal_length(self) -> int:
        return len(self.journal)

    def reset(self, scripts: Mapping[str, tuple[Step, ...]]) -> None:
        self.journal.clear()
        self.scripts.clear()
        with self._lock:
            self.skew = 0.0
            self._minted = 0
            self._windows.clear()
        self._expired.clear()
        self.load_named(scripts)

    def writable(self) -> StateUnavailable | None:
        return None  # this process's memory: written as long as the process runs

    def close(self) -> None:
        """Nothing to release."""
