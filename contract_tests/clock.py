"""The suite's clock for the waits it makes on a target: a Retry-After obeyed, a recovery polled.

Only those waits read it. A call's own deadline (:mod:`.transport`) and the pace between calls
(:mod:`.maxrate`) keep the system's time: they bound real sockets and a real rate limit.

The project's tests run the suite against services whose clock they hold (a mock's); they
replace :data:`CLOCK` with one that moves, and moves the service's, when slept on
(``tests/contract_tests/servers.py``), so a test of a 5 s ``Retry-After`` takes no 5 s. Against
a real target nothing replaces it.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """What the suite's waits read and sleep on."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary start, never going back."""
        ...

    def sleep(self, seconds: float) -> None:
        """Return ``seconds`` later."""
        ...


class SystemClock:
    """The system's: :func:`time.monotonic` and :func:`time.sleep`."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


CLOCK: Clock = SystemClock()
"""The clock the suite's waits use; read at each wait, so a replacement takes effect at once."""
