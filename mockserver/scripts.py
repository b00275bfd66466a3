"""Per-session call scripts: the answers the first calls for an id get before the normal one.

This is the only per-call state of the mock, and it lives in the process: with several
workers each keeps its own copy. Minted sessions' scripts are bounded (oldest dropped first).
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from verdict_contract.mockserver.sessions import Step


@dataclass
class ScriptBook:
    capacity: int = 10_000
    _scripts: OrderedDict[str, deque[Step]] = field(default_factory=OrderedDict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _minted: set[str] = field(default_factory=set, init=False, repr=False)
    """Ids whose script came from a mint (not a scenario): what :meth:`minted_left` reports."""

    def load(self, session_id: str, steps: tuple[Step, ...], minted: bool = False) -> None:
        """Give the id a script (an empty one removes what it had)."""
        with self._lock:
            if not steps:
                self._scripts.pop(session_id, None)
                self._minted.discard(session_id)
                return
            self._scripts[session_id] = deque(steps)
            self._scripts.move_to_end(session_id)
            if minted:
                self._minted.add(session_id)
            while len(self._scripts) > self.capacity:
                self._minted.discard(self._scripts.popitem(last=False)[0])

    def minted_left(self) -> dict[str, tuple[Step, ...]]:
        """The steps still unused of every minted session's script, oldest session first."""
        with self._lock:
            return {i: tuple(s) for i, s in self._scripts.items() if i in self._minted}

    def next_step(self, session_id: str) -> Step | None:
        """Consume and return the next scripted step for the id, if any is left."""
        with self._lock:
            steps = self._scripts.get(session_id)
            if not steps:
                return None
            step = steps.popleft()
            if not steps:
                del self._scripts[session_id]
                self._minted.discard(session_id)
            return step

    def clear(self) -> None:
        with self._lock:
            self._scripts.clear()
            self._minted.clear()
