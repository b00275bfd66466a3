"""One journal entry whose every shown field holds a value of its own, and what it shows.

The Redis round trip (``test_luascripts.py``) and the entry's own tests (``test_journal.py``)
read the same one.
"""

from __future__ import annotations

from typing import Any

from verdict_contract.mockserver.model.answer import Outcome, Served
from verdict_contract.mockserver.store.journal import JournalEntry

SERVED = Served("refused", True, 8, ("extra",))
READING = Outcome(
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
    reading=READING,
    elapsed_ms=None,  # a shared store journals before the answer exists
)
EXPECTED: dict[str, Any] = {
    **{name: getattr(ENTRY, name) for name in ("time", "method", "path", "n", "query")},
    "authorization": ENTRY.authorization,
    **{name: getattr(READING, name) for name in READING._fields if name != "served"},
    **SERVED._asdict(),
    "latency_ms": None,
    "violations": (),
}
