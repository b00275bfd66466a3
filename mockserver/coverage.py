"""What a journal shows of a consumer's client: the spec's answer space as stable behaviour ids
(docs/plugin.md), and the habits the spec advises against, read on the mock's clock."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from email.utils import parsedate_to_datetime
from typing import Final, NamedTuple

from verdict_contract.core.redact import mask
from verdict_contract.core.spec import ENDPOINT_PATH, SCHEMA_VERSION, VERDICT_OUTCOMES, is_api_call

from .state import ClockMove
from .store.journal import JournalEntry

BEHAVIOURS: Final[dict[str, str]] = {
    "verdict.contradicted.conclusive": "contradicted, conclusive: act automatically (§2.4)",
    "verdict.contradicted.inconclusive": "contradicted, not conclusive: review (§2.4)",
    "verdict.refused.conclusive": "refused, conclusive (§2.4)",
    "verdict.refused.inconclusive": "refused, not conclusive (§2.4)",
    "verdict.disputed": "disputed (§2.4)",
    "verdict.uncontradicted": "uncontradicted (§2.4)",
    "verdict.insufficient": "insufficient (§2.4)",
    "auth.missing": "401: no Authorization sent (§5)",
    "auth.wrong": "401: a key sent and refused (§5)",
    "notfound.unknown": "404: unknown session (§4)",
    "notfound.expired": "404: session expired (§3)",
    "ratelimit.retry_after": "429 with Retry-After (§7)",
    "ratelimit.no_retry_after": "429 without Retry-After (§7)",
    "fault.reset": "connection reset, no status",
    "fault.truncated": "body cut short",
    "fault.malformed": "body not JSON",
    "fault.timeout": "no answer within the client's timeout",
    "slow": "an answer late by a scripted delay",
    "status.5xx": "a server error (5xx)",
    "schema.unexpected": f"a verdict whose schema is not {SCHEMA_VERSION} (§9.3)",
    "fields.extra": "a verdict with a field the spec does not list (§2.2)",
}
"""Every behaviour id, in the report's order, with what it means."""

BROKEN_CLIENT_ONLY: Final = frozenset({"auth.missing"})
"""What only a client that breaks the spec can meet (a correct one always sends its key):
``--verdict-require-coverage=all`` leaves these out; they can still be required by name."""

_BY_VERDICT: Final[dict[tuple[str, bool], str]] = {
    (row.verdict, row.conclusive): f"verdict.{row.id}" for row in VERDICT_OUTCOMES
}
"""The seven rows of §2.4, named as ``verdict_kind`` names them (``VerdictRow.id``)."""


def behaviours(entry: JournalEntry) -> tuple[str, ...]:
    """The behaviour ids a journal entry is: what the client met, by the spec's answer space;
    only ``GET``/``HEAD /e`` count (a wrong path or method is not an answer of the API)."""
    if not is_api_call(entry.method, entry.path):
        return ()
    met: list[str] = []
    if entry.fault is not None:  # one BEHAVIOURS does not name is left out below
        met.append(f"fault.{entry.fault}")
    elif entry.delay_ms:
        met.append("slow")
    status = entry.status
    if entry.verdict is not None:
        conclusive = bool(entry.conclusive)
        met.append(_BY_VERDICT.get((entry.verdict, conclusive), f"verdict.{entry.verdict}"))
        if entry.schema != SCHEMA_VERSION:
            met.append("schema.unexpected")
        if entry.extra_fields:
            met.append("fields.extra")
    elif status == 401:
        met.append("auth.missing" if entry.authorization is None else "auth.wrong")
    elif status == 404:
        met.append("notfound.expired" if entry.outcome == "expired" else "notfound.unknown")
    elif status == 429:
        met.append(
            "ratelimit.no_retry_after" if entry.retry_after is None else "ratelimit.retry_after"
        )
    elif status is not None and 500 <= status < 600:
        met.append("status.5xx")
    return tuple(b for b in met if b in BEHAVIOURS)


def tally(entries: Iterable[JournalEntry]) -> dict[str, int]:
    """How often each behaviour was met by ``entries``, every id present, in the report's order."""
    counts = dict.fromkeys(BEHAVIOURS, 0)
    for entry in entries:
        for behaviour in behaviours(entry):
            counts[behaviour] += 1
    return counts


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
        masked = mask(key)
        names = [name for name in entry.query if not name.startswith("…")] + ["n"]
        if any(entry.sent("q", name, key) for name in names):
            return True
        if masked != "…" and (masked in entry.query or masked in entry.path.split("/")):
            return True  # a bare ?<key>, or the key as a path segment (core.redact.masked_path)
    return False


def habits(
    entries: Sequence[JournalEntry], keys: Iterable[str] = (), moves: Sequence[ClockMove] = ()
) -> list[Habit]:
    """The habits the requests of one test show, once per habit and session: ``refetch``,
    ``early_retry``, ``retry_after_401`` and ``key_outside_header`` (docs/plugin.md)."""
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
        elif entry.status == 429 and (deadline := _retry_deadline(entry, at)) is not None:
            limited[auth] = deadline
    return list(found.values())
