"""Client habits read from a journal: what a consumer's client does that the spec advises against.

Reported beside coverage, never failing a run by default. Each habit names the session (masked)
and what happened; times are read on the mock's clock (``advance()`` moves it, no sleeping).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from email.utils import parsedate_to_datetime
from typing import Final, NamedTuple

from verdict_contract.core.redact import mask
from verdict_contract.core.spec import ENDPOINT_PATH

from .journal import JournalEntry

HABITS: Final[dict[str, str]] = {
    "refetch": "a session fetched again after a 200: a verdict never changes, cache it (§8)",
    "early_retry": "the same key sent again before a 429's Retry-After ran out (§7)",
    "retry_after_401": "a key refused with 401 sent again (§5)",
    "key_outside_header": "the API key sent outside the Authorization header (§5)",
}


class ClockMove(NamedTuple):
    """One ``advance(seconds)`` of the mock's clock, at a real time."""

    at: float
    seconds: float


class Habit(NamedTuple):
    id: str
    session: str  # masked
    detail: str


def on_mock_clock(at: float, moves: Sequence[ClockMove]) -> float:
    """A real time as the mock's clock read it then (the moves made before it added)."""
    return at + sum(move.seconds for move in moves if move.at <= at)


def _retry_deadline(entry: JournalEntry, at: float) -> float | None:
    """When a 429's Retry-After runs out, on the mock's clock; None without a readable one."""
    value = (entry.retry_after or "").strip()
    if value.isdigit():
        return at + int(value)
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None


def _session(entry: JournalEntry) -> str:
    return mask(entry.n) if entry.n else "(no session)"


def _key_outside_header(entry: JournalEntry, keys: Iterable[str]) -> bool:
    for key in keys:
        shown = mask(key)
        names = [name for name in entry.query if not name.startswith("…")] + ["n"]
        if any(entry.sent("q", name, key) for name in names):
            return True
        if shown != "…" and (shown in entry.query or shown in entry.path.split("/")):
            return True  # a bare ?<key>, or the key as a path segment (journal.shown_path)
    return False


def habits(
    entries: Sequence[JournalEntry], keys: Iterable[str] = (), moves: Sequence[ClockMove] = ()
) -> list[Habit]:
    """The habits the requests of one test show, once per habit and session."""
    keys = tuple(keys)
    found: dict[tuple[str, str], Habit] = {}
    served: set[str | None] = set()  # sessions answered with a verdict
    refused: set[str] = set()  # Authorization headers (masked) answered 401
    limited: dict[str | None, float] = {}  # Authorization (masked) -> Retry-After deadline

    def note(habit_id: str, entry: JournalEntry, detail: str) -> None:
        found.setdefault((habit_id, _session(entry)), Habit(habit_id, _session(entry), detail))

    for entry in entries:
        if _key_outside_header(entry, keys):
            note("key_outside_header", entry, f"{entry.method} with the key in the URL")
        if entry.path != ENDPOINT_PATH:
            continue
        at = on_mock_clock(entry.time, moves)
        auth = entry.authorization
        if entry.n in served and entry.status != 401:
            note("refetch", entry, "fetched again after a 200: cache the verdict (§8)")
        if auth is not None and auth in refused:
            note("retry_after_401", entry, f"key {auth} sent again after a 401")
        deadline = limited.get(auth)
        if deadline is not None and at < deadline:
            early = deadline - at
            note("early_retry", entry, f"sent {early:.1f} s before the 429's Retry-After ran out")
        if entry.status == 200 and entry.verdict is not None:
            served.add(entry.n)
        elif entry.status == 401 and auth is not None:
            refused.add(auth)
        elif entry.status == 429:
            deadline = _retry_deadline(entry, at)
            if deadline is not None:
                limited[auth] = deadline
    return list(found.values())
