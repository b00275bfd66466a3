"""Per-session call scripts: the answers the first calls for an id get before the normal one;
bounded in bytes (:data:`MAX_SCRIPT_BYTES`) in either store: a script that would pass the bound
is refused (a 409 when minting), never made room for by dropping another."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from .sessions import Step

MAX_SCRIPT_BYTES: Final = 16 * 1024 * 1024  # one mock's scripts, as script_bytes counts them
# What each part costs in memory (tracemalloc): a step besides its headers (its object and slot),
# a header besides its characters (its tuple and strings), a script besides its steps (its deque,
# its entries in the book, its session id).
STEP_BYTES: Final = 160
HEADER_BYTES: Final = 128
SCRIPT_BYTES: Final = 1024


def step_costs(steps: Iterable[Step]) -> list[int]:
    """The bytes each step frees as it is answered (the last one the script's too), in order."""
    costs = [
        STEP_BYTES + sum(HEADER_BYTES + len(k) + len(v) for k, v in step.headers or ())
        for step in steps
    ]
    if costs:
        costs[-1] += SCRIPT_BYTES
    return costs


def script_bytes(steps: Iterable[Step]) -> int:
    return sum(step_costs(steps))


class ScriptStoreFull(Exception):
    """A script would pass :data:`MAX_SCRIPT_BYTES`; the message says what to do."""


def admits(held: int, freed: int, needed: int, capacity: int) -> bool:
    """Whether a script of ``needed`` bytes fits, replacing one of ``freed``, beside ``held``."""
    return held - freed + needed <= capacity


def store_full(held: int, needed: int, capacity: int) -> ScriptStoreFull:
    """The refusal of a script that does not fit (a 409 at mint)."""
    return ScriptStoreFull(
        f"the mock holds {held} bytes of scripts and this one needs {needed}; "
        f"it keeps at most {capacity} (steps are freed as they are answered): "
        "POST /_mock/reset, or mint with shorter scripts"
    )


@dataclass
class ScriptBook:
    """The scripts of a store in this process (``--state memory``), a step consumed as answered."""

    capacity: int = field(default_factory=lambda: MAX_SCRIPT_BYTES)  # read when made
    # per session, its steps left, each with the bytes it frees (step_costs)
    _scripts: dict[str, deque[tuple[Step, int]]] = field(default_factory=dict, init=False)
    size: int = field(default=0, init=False)  # bytes held, as script_bytes counts them
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def load(self, session_id: str, steps: tuple[Step, ...], force: bool = False) -> None:
        """Give the id a script (an empty one removes what it had); :class:`ScriptStoreFull` if
        it would pass the bound, unless ``force`` (a scenario's, its total checked when read)."""
        needed = script_bytes(steps)
        with self._lock:
            old = self._scripts.pop(session_id, None)
            freed = sum(cost for _, cost in old) if old else 0
            if not force and not admits(self.size, freed, needed, self.capacity):
                if old:
                    self._scripts[session_id] = old
                raise store_full(self.size, needed, self.capacity)
            self.size -= freed
            if steps:
                self._scripts[session_id] = deque(zip(steps, step_costs(steps), strict=True))
                self.size += needed

    def left(self) -> dict[str, tuple[Step, ...]]:
        """The steps still unused of every session's script."""
        with self._lock:
            return {i: tuple(step for step, _ in left) for i, left in self._scripts.items()}

    def next_step(self, session_id: str) -> Step | None:
        """Consume and return the next scripted step for the id, if any is left."""
        if session_id not in self._scripts:  # most calls: no script, and no lock to take
            return None
        with self._lock:
            steps = self._scripts.get(session_id)
            if not steps:
                return None
            step, cost = steps.popleft()
            self.size -= cost
            if not steps:
                del self._scripts[session_id]
            return step

    def clear(self) -> None:
        with self._lock:
            self._scripts.clear()
            self.size = 0
