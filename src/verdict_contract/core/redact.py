"""Keeping API keys out of output: a masking rule, a secret holder and a redactor for text."""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, quote_plus


def mask(secret: str) -> str:
    """Show at most the last 4 characters of a secret (none of a short one)."""
    return f"…{secret[-4:]}" if len(secret) >= 12 else "…"


class Secret:
    """A string that does not print itself: ``repr``, ``str`` and f-strings show it masked."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret({mask(self._value)!r})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and hmac.compare_digest(
            other._value.encode(), self._value.encode()
        )

    def __hash__(self) -> int:
        return hash(self._value)


SHORT = 4
"""Secrets shorter than this are masked only where they stand alone."""


@dataclass
class Redactor:
    """Replaces known secrets in text with their masked form."""

    secrets: set[str] = field(default_factory=set)
    short: set[str] = field(default_factory=set)
    """Secrets under 4 characters: masked only where they stand alone, not inside words."""

    def add(self, secret: str) -> None:
        """Register a secret, with the forms it takes once URL-encoded (a key sent in a query)."""
        if not secret:
            return
        if len(secret) < SHORT:
            # Replacing every occurrence of "ab" would mangle ordinary text; standing alone
            # (not inside a word) is how a key of any length shows up in output.
            self.short.update({secret, quote(secret, safe=""), quote_plus(secret)})
            return
        self.secrets.add(secret)
        self.secrets.add(quote(secret, safe=""))
        self.secrets.add(quote_plus(secret))
        self.secrets.add(quote(secret, safe="!$'()*,/:;@"))  # what httpx leaves unescaped

    @property
    def active(self) -> bool:
        return bool(self.secrets or self.short)

    def text(self, text: str) -> str:
        for secret in sorted(self.secrets, key=len, reverse=True):  # longest form first
            if secret in text:
                text = text.replace(secret, mask(secret))
        for secret in sorted(self.short, key=len, reverse=True):
            if secret in text:
                text = re.sub(rf"(?<![\w%+]){re.escape(secret)}(?![\w%+])", mask(secret), text)
        return text

    def redact_logs(self) -> Callable[[], None]:
        """Mask secrets in every log record made from now on; returns the undo."""
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            if self.active:
                message = record.getMessage()
                cleaned = self.text(message)
                if cleaned != message:
                    record.msg, record.args = cleaned, None
            return record

        logging.setLogRecordFactory(factory)
        return lambda: logging.setLogRecordFactory(previous)
