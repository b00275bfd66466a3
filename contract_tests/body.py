"""Reading an answer as strictly as the strictest real client, and one answer per session.

Python's ``json`` accepts what ``JSON.parse`` in a browser and strict parsers reject (``NaN``,
``Infinity``) and keeps the last of duplicate keys silently; RFC 8259 forbids a byte order mark
and anything but UTF-8 on the wire. Everything else JSON allows (any white space, key order,
escapes) is accepted.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass
from email.message import Message
from typing import Any

import httpx

from verdict_contract.core.redact import CUT

QUOTED = 80
"""Characters of a body that is not JSON quoted in its failure (then ``…``: masked beside it)."""

SESSION_NAMED = re.compile(r"\bsession '([^'\n]+)'")
"""A session as a failure names it (:meth:`Answer.where`), read back for CI annotations."""


class BodyError(ValueError):
    """The body is not JSON a strict client reads: the message says why, precisely."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for name, value in pairs:
        if name in seen:
            raise BodyError(
                f"duplicate key {name!r} in one object (RFC 8259 §4 wants unique names; "
                "strict parsers reject it, others silently keep one of the values)"
            )
        seen[name] = value
    return seen


def _no_constant(name: str) -> Any:
    raise BodyError(f"{name} is not JSON (RFC 8259 §6; a browser's JSON.parse rejects it)")


def strict_json(raw: bytes) -> object:
    """Decode ``raw`` as RFC 8259 JSON text, rejecting what a strict client rejects."""
    if raw.startswith(codecs.BOM_UTF8):
        raise BodyError(
            "the body starts with a byte order mark (RFC 8259 §8.1: must not; "
            "JSON.parse rejects it)"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(
            f"the body is not UTF-8 (RFC 8259 §8.1): {exc.reason} at byte {exc.start}"
        ) from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        quoted = text if len(text) <= QUOTED else text[:QUOTED] + CUT  # masked beside the cut
        raise BodyError(
            f"the body is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno} "
            f"(received {quoted!r})"
        ) from None
    except RecursionError:
        raise BodyError("the body nests JSON too deeply to read") from None


def media_type(response: httpx.Response) -> str:
    message = Message()
    message["content-type"] = response.headers.get("content-type", "")
    return message.get_content_type()


def is_json(media: str) -> bool:
    """``application/json`` or any JSON media type (RFC 6839 ``+json``: ``…vnd.x.v7+json``)."""
    kind, _, subtype = media.partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


@dataclass(frozen=True)
class Answer:
    """What one fresh session's ``GET /e`` gave: a response, or why there is none."""

    session: str
    response: httpx.Response | None
    problem: str | None = None  # the connection broke, or the run is throttled
    throttled: bool = False
    curl: str = ""

    @property
    def status(self) -> int | None:
        return self.response.status_code if self.response is not None else None

    def body(self) -> tuple[object, str | None]:
        """The decoded body and None, or None and why it is not a JSON verdict object."""
        if self.response is None:
            return None, self.problem
        try:
            decoded = strict_json(self.response.content)
        except BodyError as exc:
            return None, str(exc)
        if not isinstance(decoded, dict):
            return None, f"the body is JSON but not an object: received {type(decoded).__name__}"
        return decoded, None

    def verdict(self) -> dict[str, Any] | None:
        """The verdict object of a 200 answer whose body reads as one; else None."""
        if self.status != 200:
            return None
        body, _ = self.body()
        return body if isinstance(body, dict) else None

    def coverage(self) -> dict[str, Any]:
        """What the summary counts of this session: checked or not, and the kind it had."""
        verdict = self.verdict() or {}
        kind, conclusive = verdict.get("verdict"), verdict.get("conclusive")
        return {
            "n": self.session,
            "checked": not self.throttled,
            "status": self.status,
            "verdict": kind if isinstance(kind, str) else None,
            "conclusive": conclusive if isinstance(conclusive, bool) else None,
        }

    def where(self) -> str:
        return f"session {self.session!r}"  # SESSION_NAMED reads it back

    def replay(self) -> str:
        return f"\n    replay: {self.curl}" if self.curl else ""
