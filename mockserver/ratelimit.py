"""A per-key fixed-window rate limiter that counts exactly under threads."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RateLimit:
    """``budget`` requests per ``window`` seconds for each key; a budget of 0 turns it off."""

    budget: int
    window: float

    @classmethod
    def parse(cls, text: str) -> RateLimit:
        """Parse ``"600/60"`` (600 requests per 60 s), or ``"off"``/``"0"``.

        The window is never implied: ``"10"`` alone could mean per second or per minute.
        """
        if text.strip().lower() in ("off", "0", "none"):
            return cls(0, 1.0)
        budget, _, window = text.partition("/")
        if not window.strip() and budget.strip().isdigit():
            raise ValueError(
                f"rate limit {text!r} needs its window: REQUESTS/SECONDS, e.g. "
                f"{budget.strip()}/1 for {budget.strip()} a second or {budget.strip()}/60 for "
                f"{budget.strip()} a minute (or off)"
            )
        try:
            limit = cls(int(budget), float(window))
        except ValueError:
            raise ValueError(f"rate limit {text!r} is not of the form REQUESTS/SECONDS") from None
        if limit.budget < 0:
            raise ValueError(f"rate limit {text!r}: REQUESTS must be 0 or more (e.g. 600/60)")
        if not 0 < limit.window < math.inf:
            raise ValueError(
                f"rate limit {text!r}: the window must be a number of seconds above 0 "
                f"(e.g. {limit.budget}/60), or use 'off'"
            )
        return limit

    def __str__(self) -> str:
        return "off" if not self.budget else f"{self.budget}/{self.window:g}"


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
