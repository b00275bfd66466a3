"""The memory store's primitives where threads meet: what the model-based test, one call at a
time, cannot show (tests/mockserver/store/test_stores_alike.py compares the rest with Redis)."""

from __future__ import annotations

import threading
from types import TracebackType

from verdict_contract.mockserver.store.primitives import Ask, MemoryStore


def test_a_hit_is_counted_on_the_clock_its_request_reads() -> None:
    """Another thread moves the clock the moment the store lets go of its lock: the request
    still reads the clock its hit was counted on (as Redis runs ASK in one step)."""
    store = MemoryStore(10)
    lock = threading.Lock()

    class MovedOnRelease:
        def __enter__(self) -> None:
            lock.acquire()

        def __exit__(
            self, *exc: type[BaseException] | BaseException | TracebackType | None
        ) -> None:
            lock.release()
            store._lock = lock  # the next one is the store's own again
            store.advance(60.0)

    store._lock = MovedOnRelease()  # type: ignore[assignment]
    ask = store.run(Ask(True, "a-key", 1000.0, 60.0, now_offset=0.0))
    assert (ask.started, ask.hits, ask.offset) == (1000.0, 1, 0.0)
    assert store.offset() == 60.0
