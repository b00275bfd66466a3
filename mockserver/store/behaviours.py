"""The spec's answer space as behaviour ids, and the one function naming those of an entry.

A consumer's tests meet these answers (``pytest --verdict-coverage`` counts them, and
``GET /_mock/coverage`` shows a running mock's). The ids are stable and documented
(docs/plugin.md): a report, a JSON file or ``--verdict-require-coverage`` names them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from verdict_contract.core.spec import ENDPOINT_PATH, SCHEMA_VERSION, VERDICT_OUTCOMES

from .journal import JournalEntry

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
_FAULTS: Final = frozenset({"reset", "truncated", "malformed", "timeout"})


def behaviours(entry: JournalEntry) -> tuple[str, ...]:
    """The behaviour ids a journal entry is: what the client met, by the spec's answer space.

    Only ``GET``/``HEAD /e`` count: a wrong path or method is not an answer of the API. One
    entry may be several (a verdict with an unexpected ``schema`` and an extra field).
    """
    if entry.path != ENDPOINT_PATH or entry.method not in ("GET", "HEAD"):
        return ()
    met: list[str] = []
    if entry.fault in _FAULTS:
        met.append(f"fault.{entry.fault}")
    if entry.delay_ms and entry.fault is None:
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
