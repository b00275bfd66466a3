"""One journal entry whose every shown field holds a value of its own, and what it shows; and
an entry made from a status and an outcome, as the tests of the journal make many.

The Redis round trip (``store/test_redisstate.py``) and the entry's own tests
(``store/test_journal.py``) read the same one.
"""

from __future__ import annotations

from typing import Any

from verdict_contract.mockserver.model.answer import Result, Served
from verdict_contract.mockserver.store.journal import Journal, JournalEntry, make_entry

SERVED = Served("refused", True, 8, ("extra",))
RESULT = Result(
    status=218,
    outcome="the-outcome",
    fault=None,
    decided_by="script",
    retry_after="7",
    delay_ms=250,
    served=SERVED,
)
ENTRY = JournalEntry(
    time=1234.5,
    method="HEAD",
    path="/e",
    n="the-n",
    query={"q": ["…4321"]},
    authorization="Bearer …9876",
    result=RESULT,
    elapsed_ms=None,  # a shared store journals before the answer exists
)
EXPECTED: dict[str, Any] = {
    **{name: getattr(ENTRY, name) for name in ("seq", "time", "method", "path", "n", "query")},
    "authorization": ENTRY.authorization,
    **{name: getattr(RESULT, name) for name in RESULT._fields if name != "served"},
    **SERVED._asdict(),
    "latency_ms": None,
    "violations": (),
}


def entry(
    status: int | None, outcome: str, fault: str | None = None, **fields: Any
) -> JournalEntry:
    """:func:`make_entry` with its reading made of a status, an outcome and a fault."""
    return make_entry(result=Result(status, outcome, fault), **fields)


def record(journal: Journal, generation: int | None = None, **fields: Any) -> None:
    """Journal an :func:`entry` as a request arriving at ``generation`` (default: now)."""
    journal.add(
        entry(generation=journal.generation if generation is None else generation, **fields)
    )
