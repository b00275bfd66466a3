"""Rates people type as ``N/SECONDS``: one reader for the mock's limit and the suite's pace."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .redact import FRAGMENT, mask


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
        except ValueError:  # shown whole only if too short to hold a part of a key
            shown = repr(text) if len(text) < FRAGMENT else mask(text)
            raise ValueError(f"rate limit {shown} is not of the form REQUESTS/SECONDS") from None
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
