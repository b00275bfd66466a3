"""A client-side pace: at most N requests per SECONDS for the whole run, split across workers.

A staging service with a known limit is kept under it instead of being discovered through 429s.
Each of W pytest-xdist workers spaces its own requests ``SECONDS * W / N`` apart, so together
they never send more than N in any window of SECONDS, whatever the server's window looks like.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

WORKERS_VARIABLE = "PYTEST_XDIST_WORKER_COUNT"
"""Set by pytest-xdist in each worker: how many share the run's rate."""


def worker_count() -> int:
    """The number of pytest-xdist workers in this run (1 without xdist)."""
    try:
        return max(1, int(os.environ.get(WORKERS_VARIABLE, "1")))
    except ValueError:
        return 1


@dataclass
class Pace:
    """Spaces this process's requests ``interval`` seconds apart (the first goes at once)."""

    interval: float
    _next: float = field(default=0.0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @classmethod
    def of(cls, count: int, seconds: float, workers: int | None = None) -> Pace:
        """The pace of one worker among ``workers`` sharing ``count`` requests per ``seconds``."""
        return cls(seconds * (workers or worker_count()) / count)

    def wait(self) -> float:
        """Sleep until this request may go; returns the seconds slept."""
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            time.sleep(start - now)
        return max(0.0, start - now)
