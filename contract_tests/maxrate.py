"""A client-side pace: at most N requests per SECONDS for the whole run, split across workers.

A staging service with a known limit is kept under it instead of being discovered through 429s.
Each of W pytest-xdist workers spaces its own requests ``SECONDS * W / N`` apart, so together
they never send more than N in any window of SECONDS, whatever the server's window looks like.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest


def worker_count(config: pytest.Config) -> int:
    """The number of pytest-xdist workers in this run (1 without xdist).

    Read from the worker's ``workerinput``: xdist's environment variables are inherited by any
    pytest started from inside a worker.
    """
    workerinput = getattr(config, "workerinput", None)
    return max(1, int(workerinput["workercount"])) if workerinput is not None else 1


@dataclass
class Pace:
    """Spaces this process's requests ``interval`` seconds apart (the first goes at once)."""

    interval: float
    _next: float = field(default=0.0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @classmethod
    def of(cls, count: int, seconds: float, workers: int = 1) -> Pace:
        """The pace of one worker among ``workers`` sharing ``count`` requests per ``seconds``."""
        return cls(seconds * workers / count)

    def wait(self) -> float:
        """Sleep until this request may go; returns the seconds slept."""
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            time.sleep(start - now)
        return max(0.0, start - now)
