"""How long a 429 asks to wait: ``Retry-After`` as RFC 9110 §10.2.3 writes it, or a backoff.

``Retry-After`` is delay-seconds (digits only) or an HTTP-date (IMF-fixdate, or the obsolete
RFC 850 and asctime forms a recipient must also accept). A value that is neither tells a client
nothing it can act on: the call that met it fails, a breach, not an advisory. A 429
without the field is allowed (spec §7 promises the status, no header): an advisory.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

MAX_RETRIES = 6
"""At most this many waits for one call, whatever Retry-After says (a 0 must not loop)."""
BACKOFF_BASE = 0.5
BACKOFF_CAP = 30.0


def _delay_seconds(text: str) -> float | None:
    return float(text) if text.isascii() and text.isdigit() else None


def _http_date(text: str) -> datetime | None:
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def unreadable_retry_after(value: str | None) -> str | None:
    """Why a ``Retry-After`` cannot be read (RFC 9110 §10.2.3); None if it can, or is absent."""
    if value is None:
        return None
    text = value.strip()
    if _delay_seconds(text) is not None or (text and _http_date(text) is not None):
        return None
    return (
        f"the 429's Retry-After {value[:80]!r} is neither delay-seconds (digits) nor an "
        "HTTP-date (RFC 9110 §10.2.3): no client can read when to retry"
    )


def retry_after_seconds(
    value: str | None, attempt: int, now: datetime | None = None, date: str | None = None
) -> float:
    """The wait RFC 9110 §10.2.3 asks for: delay-seconds or an HTTP-date; else a backoff.

    An HTTP-date is measured against the answer's own ``Date`` header when there is one (the
    server's clock), else against ours. Without a usable value: exponential backoff from
    ``BACKOFF_BASE`` with full jitter, capped at ``BACKOFF_CAP``.
    """
    text = (value or "").strip()
    delay = _delay_seconds(text)
    if delay is not None:
        return delay
    when = _http_date(text) if text else None
    if when is not None:
        reference = (_http_date(date) if date else None) or now or datetime.now(UTC)
        return max(0.0, (when - reference).total_seconds())
    ceiling = min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt)
    return random.uniform(ceiling / 2, ceiling)
