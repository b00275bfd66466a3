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

    def load(self, session_id: str, steps: tuple[Step, ...]) -> None:
        """Give the id a script (an empty one removes what it had)."""
        with self._lock:
            if not steps:
                self._scripts.pop(session_id, None)
                return
            self._scripts[session_id] = deque(steps)
            self._scripts.move_to_end(session_id)
            while len(self._scripts) > self.capacity:
                self._scripts.popitem(last=False)

    def next_step(self, session_id: str) -> Step | None:
        """Consume and return the next scripted step for the id, if any is left."""
        with self._lock:
            steps = self._scripts.get(session_id)
            if not steps:
                return None
            step = steps.popleft()
            if not steps:
                del self._scripts[session_id]
            return step

    def clear(self) -> None:
        with self._lock:
            self._scripts.clear()
