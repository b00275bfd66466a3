"""What the mock answered, counted on the event loop with plain numbers, read by its metrics.

The async server answers ``/e`` on its event loop alone, so these count there without a lock
(under 0.2 µs a request, not a ``prometheus_client`` metric's lock); ``/_mock/metrics`` copies
them when scraped (one step under the GIL).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Final

from .answer import Result

LATENCY_BOUNDS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
"""The latency histogram's upper bounds in seconds: sub-millisecond answers to 60 s delays."""


class Traffic:
    """Answers by status and outcome as the journal reads them (a reset has no status), and a
    latency histogram; one per mock, on its loop."""

    __slots__ = ("answers", "buckets", "latency_sum")

    def __init__(self) -> None:
        self.answers: dict[tuple[int | None, str], int] = {}
        self.buckets = [0] * (len(LATENCY_BOUNDS) + 1)  # per bound, then past the last (+Inf)
        self.latency_sum = 0.0

    def count(self, result: Result, seconds: float) -> None:
        """One answer sent: its :attr:`.answer.Answer.result` (call it on the event loop only)."""
        key = (result.status, result.outcome)
        self.answers[key] = self.answers.get(key, 0) + 1
        self.buckets[bisect_left(LATENCY_BOUNDS, seconds)] += 1
        self.latency_sum += seconds
