"""The shared state store's calls: counted, and one log line when it goes down, one when back.

Every call to the store reports here (:meth:`Calls.failed` with the 503 it gives, or
:meth:`Calls.answered`); only a change is logged, so a Redis down under load writes two
lines, not one per request. While it is up, :meth:`Calls.answered` reads one attribute
and returns (the hot path pays nothing more); the lock is taken only on a change, so calls from
the event loop and the control API's threads log each change once.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from verdict_contract.core.errors import StateUnavailable

log = logging.getLogger("mockserver.state")


@dataclass
class Outage:
    """The store since it stopped answering: what the first failure said, and what it cost."""

    problem: StateUnavailable
    since: float  # time.monotonic()
    failed: int = 1


class Calls:
    """The store's round trips and failures, and its last known state, logged on each change.

    The event loop counts in ``trips`` and ``errors``, plain ints (one thread); the control
    API's threads in :meth:`blocking`, under a lock (never the hot path's).
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self.outage: Outage | None = None
        self.trips = self.errors = 0
        self._blocking_trips = self._blocking_errors = 0
        self._lock = threading.Lock()

    def blocking(self, failed: bool) -> None:
        """Count one call of a control API's thread."""
        with self._lock:
            self._blocking_trips += 1
            self._blocking_errors += failed

    def totals(self) -> tuple[int, int]:
        """Round trips and failures, of the loop and the threads together."""
        with self._lock:
            return self.trips + self._blocking_trips, self.errors + self._blocking_errors

    def failed(self, problem: StateUnavailable) -> None:
        with self._lock:
            if self.outage is not None:
                self.outage.failed += 1
                return
            self.outage = Outage(problem, time.monotonic())
        log.error(
            "state store down: %s; its calls answer 503 until it is back",
            str(problem).rstrip("."),
            extra={"fields": {"state": self.label, "code": problem.code}},
        )

    def answered(self) -> None:
        if self.outage is None:
            return
        with self._lock:
            outage, self.outage = self.outage, None
        if outage is not None:
            took = time.monotonic() - outage.since
            log.warning(
                "state store back: %s answers again after %.1f s (%d calls failed meanwhile)",
                self.label,
                took,
                outage.failed,
                extra={"fields": {"state": self.label, "failed": outage.failed}},
            )
