"""Checks on the request journal in the style of respx, responses and WireMock's ``verify``.

A failed check raises :class:`~verdict_contract.core.errors.VerificationError` (an
``AssertionError``) saying what was expected and listing each request received once, keys
masked as in the journal; the checks' own frames are hidden from pytest's traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypedDict

from verdict_contract.core.errors import VerificationError
from verdict_contract.core.redact import mask, mask_credentials
from verdict_contract.core.spec import is_api_call
from verdict_contract.mockserver.state import MockState
from verdict_contract.mockserver.store.journal import (
    JournalEntry,
    cut,
    masked_param,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

_WHOLE_ID: Final = 24  # ids up to this length show whole; a minted token as its start and end
_HEAD, _TAIL = 8, 12  # minted ids share their start (the encoded spec); their signed end differs
_LISTED: Final = 20  # requests listed in a message, newest last; older ones are counted
_SECRET_WORDS: Final = ("auth", "key", "token", "secret", "cookie", "session", "password")


def short_id(session_id: str | None) -> str:
    """A session id as messages show it: whole, or its start and its distinguishing end."""
    if session_id is None:
        return "(no n)"
    if len(session_id) <= _WHOLE_ID:
        return session_id
    return f"{session_id[:_HEAD]}…{session_id[-_TAIL:]}"


def describe(entry: JournalEntry) -> str:
    """One line per request: method, path, id, what the client got, and the masked credentials."""
    got = entry.fault if entry.fault else str(entry.status)
    if entry.fault and entry.status is not None:
        got = f"{entry.status}, {entry.fault}"
    auth = entry.authorization if entry.authorization is not None else "no Authorization"
    where = entry.path if entry.n is None else f"{entry.path}?n={short_id(entry.n)}"
    return f"{entry.method} {where} -> {got} ({entry.outcome}; {auth})"


def _listing(entries: Sequence[JournalEntry]) -> str:
    if not entries:
        return "received no request at all"
    lines = "\n".join(f"  {describe(e)}" for e in entries[-_LISTED:])
    more = f"\n  ... and {len(entries) - _LISTED} earlier" if len(entries) > _LISTED else ""
    return f"the test sent {len(entries)} request(s) in all:\n{lines}{more}"


def _masked_header(name: str, value: str, is_key: Callable[[str], bool]) -> str:
    """An expected header as a message shows it: credentials-like values masked."""
    lowered = name.lower()
    if lowered in ("authorization", "proxy-authorization"):
        return f"{name}: {mask_credentials(value)}"
    if is_key(value) or any(word in lowered for word in _SECRET_WORDS):
        return f"{name}: {mask(value)}"
    return f"{name}: {cut(value, 60)}"


class Matchers(TypedDict, total=False):
    """What a request must have sent to count: each header (name in any case) or parameter."""

    headers: Mapping[str, str] | None
    params: Mapping[str, str] | None


class JournalChecks:
    """The journal of ``self.state`` (this test's requests) and the checks on it."""

    state: MockState

    @property
    def journal(self) -> list[JournalEntry]:
        """This test's requests (keys masked), oldest first; wrong paths and methods too."""
        return self.state.store.entries()

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The journal as JSON objects, as ``GET /_mock/requests`` gives it."""
        return [entry.to_json() for entry in self.journal]

    def calls(self, n: str | None = None, **match: Unpack[Matchers]) -> list[JournalEntry]:
        """The journaled requests, oldest first: all, or session ``n``'s ``GET``/``HEAD /e``
        calls; ``headers`` (names in any case) and ``params`` keep those that sent each with that
        exact value (an ``Authorization`` is matched without the journal ever holding it)."""
        if unknown := sorted(set(match) - Matchers.__optional_keys__):
            raise TypeError(f"unexpected keyword argument(s) {unknown}: not headers or params")
        entries = self.journal
        if n is not None:
            entries = [e for e in entries if e.n == n and is_api_call(e.method, e.path)]
        for name, value in (match.get("headers") or {}).items():
            entries = [e for e in entries if e.sent("h", name.lower(), value)]
        for name, value in (match.get("params") or {}).items():
            entries = [e for e in entries if e.sent("q", name, value)]
        return entries

    def call_count(self, n: str | None = None, **match: Unpack[Matchers]) -> int:
        return len(self.calls(n, **match))

    def last_request(self, n: str | None = None, **match: Unpack[Matchers]) -> JournalEntry:
        """The newest journaled request (for session ``n``, with the matchers, if given)."""
        __tracebackhide__ = True
        calls = self.calls(n, **match)
        if not calls:
            target = self._target(n, match)
            raise VerificationError(f"expected a request for {target}; {_listing(self.journal)}")
        return calls[-1]

    def assert_called(
        self, n: str | None = None, times: int | None = None, **match: Unpack[Matchers]
    ) -> None:
        """Session ``n`` (or anything) was requested, with the matchers (``times`` times)."""
        __tracebackhide__ = True
        count = self.call_count(n, **match)
        if (times is None and count) or count == times:
            return
        expected = "at least 1 request" if times is None else f"exactly {times} request(s)"
        besides = ""
        if match.get("headers") or match.get("params"):
            total = self.call_count(n)
            besides = f" ({total} without the header and parameter matchers)"
        raise VerificationError(
            f"expected {expected} for {self._target(n, match)}, received "
            f"{count}{besides}; {_listing(self.journal)}"
        )

    def assert_called_once(self, n: str | None = None, **match: Unpack[Matchers]) -> None:
        __tracebackhide__ = True
        self.assert_called(n, times=1, **match)

    def assert_not_called(self, n: str | None = None, **match: Unpack[Matchers]) -> None:
        __tracebackhide__ = True
        self.assert_called(n, times=0, **match)

    def assert_no_requests(self) -> None:
        """Nothing at all reached the mock in this test (no path, no method, no session)."""
        __tracebackhide__ = True
        entries = self.journal
        if entries:
            raise VerificationError(f"expected no request at all; {_listing(entries)}")

    def assert_all_scripts_used(self) -> None:
        """Every step of every script minted in this test was answered (as respx's
        ``assert_all_called``)."""
        __tracebackhide__ = True
        left = self.state.minted_scripts_left()
        if not left:
            return
        lines = "\n".join(
            f"  session n={short_id(n)}: {len(steps)} step(s) left: "
            + ", ".join(json.dumps(s.to_json(), separators=(", ", ": ")) for s in steps)
            for n, steps in left.items()
        )
        raise VerificationError(
            f"expected every scripted step to be used; {len(left)} session(s) have steps "
            f"left:\n{lines}\n{_listing(self.journal)}"
        )

    def _target(self, n: str | None, match: Matchers) -> str:
        masks = self.state.key_finder.finds  # a key given as n (arguments swapped): masked
        target = "any request" if n is None else f"session n={mask(n) if masks(n) else short_id(n)}"
        headers, params = match.get("headers"), match.get("params")
        if headers:
            masked = ", ".join(_masked_header(k, v, masks) for k, v in headers.items())
            target += f" with headers {{{masked}}}"
        if params:
            pairs = (masked_param(k, v, masks) for k, v in params.items())
            target += " with params {" + ", ".join(f"{k}={v}" for k, v in pairs) + "}"
        return target
