"""Checks on the request journal in the style of respx and WireMock's ``verify``.

:class:`JournalChecks` is mixed into the test mocks (:mod:`.testing`): count the calls for a
session id, assert it was called once, never or ``n`` times, read the last request. A failed
check raises :class:`~verdict_contract.core.errors.VerificationError` (an ``AssertionError``)
saying what was expected and listing what was received; keys are masked as in the journal.
"""

from __future__ import annotations

from verdict_contract.core.errors import VerificationError
from verdict_contract.mockserver.journal import Entry

_SHOWN_ID = 24
"""Minted ids are long signed tokens: messages show their start, enough to tell them apart."""


def short_id(session_id: str | None) -> str:
    if session_id is None:
        return "(no n)"
    return session_id if len(session_id) <= _SHOWN_ID else session_id[:_SHOWN_ID] + "…"


def describe(entry: Entry) -> str:
    """One line per request: method, id, what the client got, and the masked credentials."""
    got = entry.fault if entry.fault else str(entry.status)
    if entry.fault and entry.status is not None:
        got = f"{entry.status}, {entry.fault}"
    auth = entry.authorization if entry.authorization is not None else "no Authorization"
    return f"{entry.method} /e?n={short_id(entry.n)} -> {got} ({entry.outcome}; {auth})"


def _listing(entries: list[Entry]) -> str:
    if not entries:
        return "received no request at all"
    lines = "\n".join(f"  {describe(e)}" for e in entries[-20:])
    more = f"\n  ... and {len(entries) - 20} earlier" if len(entries) > 20 else ""
    return f"received {len(entries)} request(s) in this test:\n{lines}{more}"


class JournalChecks:
    """Verification helpers over ``self.journal`` (the entries of the current test)."""

    @property
    def journal(self) -> list[Entry]:
        raise NotImplementedError

    def calls(self, n: str | None = None) -> list[Entry]:
        """The journaled requests (for session ``n`` if given), oldest first."""
        entries = self.journal
        return entries if n is None else [e for e in entries if e.n == n]

    def call_count(self, n: str | None = None) -> int:
        return len(self.calls(n))

    def last_request(self, n: str | None = None) -> Entry:
        """The newest journaled request (for session ``n`` if given)."""
        calls = self.calls(n)
        if not calls:
            target = "any session" if n is None else f"session n={short_id(n)}"
            raise VerificationError(f"expected a request for {target}; {_listing(self.journal)}")
        return calls[-1]

    def assert_called(self, n: str, times: int | None = None) -> None:
        """Session ``n`` was requested (exactly ``times`` times, if given)."""
        count = self.call_count(n)
        if (times is None and count) or count == times:
            return
        expected = "at least 1 request" if times is None else f"exactly {times} request(s)"
        raise VerificationError(
            f"expected {expected} for session n={short_id(n)}, received {count}; "
            f"{_listing(self.journal)}"
        )

    def assert_called_once(self, n: str) -> None:
        self.assert_called(n, times=1)

    def assert_not_called(self, n: str) -> None:
        self.assert_called(n, times=0)
