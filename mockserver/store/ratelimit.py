"""A per-key fixed-window rate limiter that counts exactly under threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from verdict_contract.core.rates import RateLimit


@dataclass
class RateLimiter:
    """Admits or refuses requests per key; state is one counter per key seen.

    Only authenticated keys reach the limiter, so its state is bounded by the configured keys.
    """

    limit: RateLimit
    clock: Callable[[], float] = time.monotonic
    _windows: dict[str, tuple[float, int]] = field(default_factory=dict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def admit(self, key: str) -> float | None:
        """Count a request; return None if admitted, else the seconds until the window resets."""
        limit = self.limit
        if not limit.budget:
            return None
        now = self.clock()
        with self._lock:
            start, count = self._windows.get(key) or (now, 0)
            if now - start >= limit.window:
                start, count = now, 0
            if count >= limit.budget:
                return start + limit.window - now
            self._windows[key] = (start, count + 1)
            return None

    def reset(self, limit: RateLimit | None = None) -> None:
        with self._lock:
            self._windows.clear()
            if limit is not None:
                self.limit = limit

    def relimit(self, limit: RateLimit) -> None:
        """Change the limit and keep the counters (a scenario reload is not a reset)."""
        with self._lock:
            self.limit = limit
