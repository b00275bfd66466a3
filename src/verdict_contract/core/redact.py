"""Keeping API keys out of output: a masking rule, a secret holder and a redactor for text."""

from __future__ import annotations

import base64
import contextlib
import hmac
import logging
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, NamedTuple
from urllib.parse import quote, quote_plus, unquote, urlsplit, urlunsplit

from .keyforms import base64_forms, hex_forms

# C0, DEL and C1 as \xNN, and the backslash too, so that a "\x1b" sent as text stays apart.
_ESCAPED: Final = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x5C, *range(0x7F, 0xA0))}


def printable(text: str) -> str:
    """``text`` with every control character (and the backslash) escaped, for a log line."""
    return escaped(text.translate(_ESCAPED))


def escaped(text: str) -> str:
    """``text`` with each character a terminal, a CI runner or a renderer would act on (a
    control, a line separator, a bidi override, a lone surrogate) written ``\\uXXXX``."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else f"\\u{ord(char):04x}" for char in text)


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


def mask_credentials(value: str) -> str:
    """An ``Authorization`` value as output shows it: its scheme (``Bearer``, ``Basic``: letters
    only, fewer than :data:`FRAGMENT`: more could be a key's) and the last 4 characters of its
    credentials; anything else, a bare key included, masked whole."""
    scheme, _, credentials = value.strip().partition(" ")
    credentials = credentials.strip()
    if credentials and scheme.isalpha() and len(scheme) < FRAGMENT:
        return f"{scheme} {mask(credentials)}"
    return mask(value.strip()) if value.strip() else ""


def secret_index(sent: str, known: Sequence[bytes]) -> int | None:
    """Which of ``known`` (keys, tokens) was ``sent``: every one is compared, in constant time,
    so the time taken tells nothing of a secret, nor of which one matched."""
    candidate = sent.encode("utf-8", "surrogateescape")
    found = None
    for index, expected in enumerate(known):
        if hmac.compare_digest(candidate, expected) and found is None:
            found = index
    return found


class KeyFinder(NamedTuple):
    """Whether a text holds a secret or a part of one: what journals and logs mask. A part is
    any run of :data:`FRAGMENT` bytes of the secret in a row, or of its base64 or hex forms
    (``encoded``); a secret shorter than that is found whole. Not constant time: nothing is
    decided on it but what a record shows. A tuple: compared by value, hashed in C (a cache
    keys on it at every request)."""

    runs: frozenset[bytes] = frozenset()
    whole: tuple[bytes, ...] = ()

    @classmethod
    def of(cls, secrets: Iterable[bytes], encoded: bool = True) -> KeyFinder:
        runs: set[bytes] = set()
        whole: list[bytes] = []
        for secret in filter(None, secrets):
            if len(secret) < FRAGMENT:
                whole.append(secret)
                continue
            text = secret.decode("utf-8", "surrogateescape")
            hexes = [form for form in hex_forms(text) if len(form) == 2 * len(secret)]  # 4 bytes
            forms = [folded(text), *base64_forms(text), *hexes] if encoded else []
            for form in (secret, *(each.encode("utf-8", "surrogatepass") for each in forms)):
                runs.update(form[i : i + FRAGMENT] for i in range(len(form) - FRAGMENT + 1))
        return cls(frozenset(runs), tuple(whole))

    def __repr__(self) -> str:  # a run is a part of a key
        return f"KeyFinder({len(self.runs)} runs, {len(self.whole)} short secrets)"

    def finds(self, text: str) -> bool:
        """Whether ``text`` holds one of the secrets, or a part of one, as it is,
        percent-decoded (twice: ``%254B`` is a ``K``) or with its JSON escapes undone."""
        once = unquote(text) if "%" in text else text
        twice = unquote(once) if "%" in once else once
        unescaped = _UNICODE_ESCAPE.sub(_unescaped, twice) if "\\u" in twice else twice
        forms = {text, once, twice, unescaped}  # and each in capitals or full-width: folded
        return any(self._holds(form) for form in forms | {folded(form) for form in forms})

    def _holds(self, text: str) -> bool:
        sent = text.encode("utf-8", "surrogatepass")  # a lone surrogate too (a JSON escape's)
        runs = self.runs
        return any(secret in sent for secret in self.whole) or any(
            sent[i : i + FRAGMENT] in runs for i in range(len(sent) - FRAGMENT + 1)
        )


_UNICODE_ESCAPE: Final = re.compile(r"\\{1,2}u([0-9A-Fa-f]{4})")
"""A JSON string's escape of one character (``\\u0073``), doubled as a ``repr`` shows it."""


def _unescaped(escape: re.Match[str]) -> str:
    return chr(int(escape[1], 16))


def sent_credentials(authorization: str | None) -> list[str]:
    """The credentials of an ``Authorization`` value, whatever its scheme (``Bearer <key>``,
    ``Token <key>``, a bare ``<key>``; ``Basic``: the user and the password, either may be the
    key), each long enough to be a secret (a shorter one would mask plain words)."""
    scheme, _, credential = (authorization or "").strip().rpartition(" ")
    found = [credential]
    if scheme.strip().lower() == "basic":  # base64 of user:password, padded or not
        with contextlib.suppress(ValueError):
            padded = credential + "=" * (-len(credential) % 4)
            found += base64.b64decode(padded, validate=True).decode().split(":", 1)
    return [each for each in found if len(each) >= FRAGMENT]


PLAIN_HEADERS = frozenset(
    {
        "accept",
        "accept-encoding",
        "connection",
        "content-length",
        "content-type",
        "host",
        "user-agent",
    }
)
"""Headers that hold no secret (they frame a request, or name its client): shown as sent."""


def masked_header(name: str, value: str) -> str:
    """A request header's value as output shows it: a plain one (:data:`PLAIN_HEADERS`) as
    sent, ``Authorization`` by :func:`mask_credentials`, any other masked (a key can be sent in
    any header)."""
    lowered = name.lower()
    if lowered == "authorization":
        return mask_credentials(value)
    return value if lowered in PLAIN_HEADERS else mask(value)


_PLAIN_NAME = re.compile(r"[a-z_]{1,20}")
"""Query parameter names shown as they are; anything else might be a secret."""


def masked_name(name: str, is_key: Callable[[str], bool] = lambda _: False) -> str:
    """A query parameter's name as output shows it: a plain one as sent, any other masked (a key
    may arrive as a bare name, ``?<key>``, as well as a value)."""
    return name if _PLAIN_NAME.fullmatch(name) and not is_key(name) else mask(name)


def masked_path(path: str, is_key: Callable[[str], bool]) -> str:
    """A request's path as output shows it: a segment that holds an API key (as sent, or
    percent-decoded) is masked, or the whole path if a key holds a "/"; a client that put its
    key in the path gets a 404 for it."""
    if not is_key(path) and not is_key(unquote(path)):
        return path
    segments = path.split("/")
    if not any(is_key(s) or is_key(unquote(s)) for s in segments):
        return mask(path)
    return "/".join(mask(s) if is_key(s) or is_key(unquote(s)) else s for s in segments)


def masked_url(url: str) -> str:
    """A URL as output shows it: its user info and fragment left out, every query value masked
    (a key can be sent in any parameter, ``n`` included)."""
    parts = urlsplit(url)
    pairs = (pair.partition("=") for pair in parts.query.split("&") if pair)
    query = "&".join(
        masked_name(name) + sep + (mask(value) if sep else "") for name, sep, value in pairs
    )
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, query, ""))


class KeyHeaders(dict[str, str]):
    """Request headers that carry a key (``Authorization: Bearer <key>``), sent as any dict is;
    their ``repr`` masks the credentials (:func:`mask_credentials`), so that a failing assert
    on a call made with them, or ``pytest -l``, prints no key."""

    def __repr__(self) -> str:
        shown = {
            name: mask_credentials(value) if name.lower() == "authorization" else value
            for name, value in self.items()
        }
        return repr(shown)


SHORT = 4
"""Secrets shorter than this are masked only where they stand alone."""
FRAGMENT = 8
MAX_RUN_SECRET = 512
"""A longer secret (a client's made-up credential) is looked for whole only: its runs would
cost a regex of that many alternatives per form, per request."""
"""Any run of this many characters of a secret in a row, or more, is masked wherever it shows."""
CUT = "…"
"""How a value cut for display ends (or is cut in the middle)."""

_ESCAPE = re.compile(
    r"%[0-7][0-9A-Fa-f]|%[C-Fc-f][0-9A-Fa-f](?:%[89ABab][0-9A-Fa-f]){1,3}"
    r"|\\{1,2}u[0-9A-Fa-f]{4}|\\[\"\\/]|\+"
)
"""What hides a secret's characters in output: percent-encoding (ASCII, or a character's UTF-8
bytes: a full-width key), JSON string escapes (``\\u0073``, doubled in a ``repr``), ``+`` for a
space (``quote_plus``)."""


class Span(NamedTuple):
    """Where a run of a secret's characters stands in a text: ``text[start:end]``."""

    start: int
    end: int


def _decoded(text: str) -> tuple[str, list[Span]]:
    """``text`` with its escapes undone, and where each of its characters stands in ``text``."""
    chars: list[str] = []
    spans: list[Span] = []
    at = 0
    for escape in _ESCAPE.finditer(text):
        chars += text[at : escape.start()]
        spans += (Span(i, i + 1) for i in range(at, escape.start()))
        code = escape.group(0)
        if code == "+":
            chars.append(" ")
        elif code.startswith("%"):  # one character, its UTF-8 bytes (a wrong one: as it is)
            chars.append(unquote(code, errors="surrogateescape")[:1])
        elif len(code) >= 6:  # \\u0073
            chars.append(chr(int(code[-4:], 16)))
        else:
            chars.append(code[-1])
        spans.append(Span(escape.start(), escape.end()))
        at = escape.end()
    chars += text[at:]
    spans += (Span(i, i + 1) for i in range(at, len(text)))
    return "".join(chars), spans


def _longest_run(text: str, start: int, secret: str) -> int:
    """How many characters of ``secret`` in a row ``text`` holds from ``start`` (at least
    ``FRAGMENT``: a run was found there)."""
    best = 0
    first = text[start : start + FRAGMENT]
    at = secret.find(first)
    while at != -1:
        length = FRAGMENT
        while (
            start + length < len(text)
            and at + length < len(secret)
            and text[start + length] == secret[at + length]
        ):
            length += 1
        best = max(best, length)
        at = secret.find(first, at + 1)
    return best


def _at_a_cut(text: str, secret: str) -> list[Span]:
    """Runs of 4 to 7 characters of ``secret`` right beside a cut (``…``): a value cut for
    display may have split a longer run there. A mask (``…`` and the last 4) is left as it is."""
    found = []
    for cut in (m.start() for m in re.finditer(CUT, text)):
        before = next(
            (
                k
                for k in range(min(cut, FRAGMENT - 1), SHORT - 1, -1)
                if text[cut - k : cut] in secret
            ),
            0,
        )
        if before:
            found.append(Span(cut - before, cut))
        after = next(
            (
                k
                for k in range(min(len(text) - cut - 1, FRAGMENT - 1), SHORT - 1, -1)
                if text[cut + 1 : cut + 1 + k] in secret
            ),
            0,
        )
        if after and text[cut + 1 : cut + 1 + after] != secret[-SHORT:]:
            found.append(Span(cut + 1, cut + 1 + after))
    return found


@dataclass
class Redactor:
    """Replaces known secrets in text with their masked form: any run of 8 of a secret's
    characters or more, as they are, percent-encoded or JSON-escaped, shorter runs beside a
    cut, and the secret base64-encoded (whatever text was encoded around it). Every output of
    the suite is written through :meth:`text`."""

    secrets: set[str] = field(default_factory=set)
    """Each secret as given and in the forms it takes once URL-encoded, masked where whole."""
    runs: dict[str, Run] = field(default_factory=dict)
    """Each secret of ``FRAGMENT`` characters or more (and each of its forms), and its runs."""
    short: set[str] = field(default_factory=set)
    """Secrets under 4 characters: masked only where they stand alone, not inside words."""
    encoded: set[str] = field(default_factory=set)
    """The base64 and hex forms: masked as ``…`` alone (their last 4 characters may be half
    an escape, ``\x5a``, which would break the JSON a mask is written into)."""
    cuts: bool = True
    """Whether a text may hold values cut for display (``…``), a run of 4 to 7 of a secret's
    characters beside each cut then masked: the suite's outputs do; an upstream's body does not
    (and a body of a million cuts cost seconds)."""
    known: str = ""
    """What the output says whatever the secret (its tool's option and package names): a run
    inside it tells nothing of a secret (``-verdict-`` of ``sk-live-verdict-…`` in
    ``--verdict-session-id``) and is left as it is; a longer run is masked whole."""

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
        if FRAGMENT <= len(secret) <= MAX_RUN_SECRET:  # a key echoed encoded, or a part of it
            encoded = [*base64_forms(secret), *hex_forms(secret)]
            size = len(secret.encode())
            for form in (secret, folded(secret)):  # the folded: in capitals, full-width
                self.runs[form] = Run.of(form, FRAGMENT)
            for form in encoded:  # a run of 4 bytes or more: ", 0x6b, " is one, any text's
                self.runs[form] = Run.of(form, max(FRAGMENT, -(-4 * len(form) // size)))
            self.secrets.update(encoded)
            self.encoded.update(encoded)

    def joined(self, secrets: Iterable[str]) -> Redactor:
        """A copy that masks ``secrets`` too (this one as it was)."""
        copy = replace(
            self, secrets={*self.secrets}, runs={**self.runs}, short={*self.short},
            encoded={*self.encoded},
        )  # fmt: skip
        for secret in secrets:
            copy.add(secret)
        return copy

    @property
    def active(self) -> bool:
        return bool(self.secrets or self.short)

    def _spans(self, views: list[View], secret: str, run: Run) -> list[Span]:
        """Where the text of ``views`` holds ``FRAGMENT`` or more of ``secret``'s characters in
        a row, in any of its readings."""
        found = []
        for view, where, folded_view in views:
            if folded_view and not run.in_folded_views:  # a capital of the key's would end a run
                continue
            if not any(anchor in view for anchor in run.anchors):  # most texts hold none
                continue
            match = run.pattern.search(view)
            while match is not None:
                start = match.start()
                end = start + _longest_run(view, start, secret)
                if where is not None:  # back to the escaped text's places
                    found.append(Span(where[start].start, where[end - 1].end))
                else:
                    found.append(Span(start, end))
                match = run.pattern.search(view, end)
        return found

    def text(self, text: str) -> str:
        views = _views(text)
        for secret, run in self.runs.items():
            spans = self._spans(views, secret, run)
            if self.cuts and secret in self.secrets and secret not in self.encoded:  # as given
                spans += _at_a_cut(text, secret)
            if self.known:  # the tool's own words are not the secret's
                spans = [s for s in spans if text[s.start : s.end] not in self.known]
            shown = CUT if secret in self.encoded else mask(secret)
            for span in _merged(spans):
                text = text[: span.start] + shown + text[span.end :]
            if spans:  # read again: its places moved
                views = _views(text)
        for secret in sorted(self.secrets, key=len, reverse=True):  # longest form first
            if secret in text:
                text = text.replace(secret, CUT if secret in self.encoded else mask(secret))
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


class Run(NamedTuple):
    """What finds a secret's (or a form's) runs: ``anchors``, its 4 characters at every 4th
    place (any run holds one, so a text that holds none is passed by ``in`` at C's speed), then
    ``pattern``, which finds each run."""

    anchors: frozenset[str]
    pattern: re.Pattern[str]
    in_folded_views: bool  # looked for there too: the form is its own folding

    @classmethod
    def of(cls, form: str, length: int) -> Run:
        """``form``'s runs of ``length`` characters (at least ``FRAGMENT``)."""
        grams = {form[i : i + length] for i in range(len(form) - length + 1)}
        anchors = frozenset(form[i : i + 4] for i in range(0, len(form) - 3, 4))
        pattern = re.compile("|".join(map(re.escape, sorted(grams))))
        return cls(anchors, pattern, folded(form) == form)


class View(NamedTuple):
    """A reading of a text, and where each of its characters stands in it (None: the same)."""

    text: str
    where: list[Span] | None
    folded_view: bool = False


def _views(text: str) -> list[View]:
    """``text`` as it is, with its escapes undone (twice: ``%2573`` is an ``s``), and each of
    these folded (:func:`folded`)."""
    views = [View(text, None)]
    if _ESCAPE.search(text):
        once, where = _decoded(text)
        views.append(View(once, where))
        if _ESCAPE.search(once):
            twice, again = _decoded(once)
            views.append(
                View(twice, [Span(where[s.start].start, where[s.end - 1].end) for s in again])
            )
    return views + [View(read, v.where, True) for v in views if (read := folded(v.text)) != v.text]


def folded(text: str) -> str:
    """``text`` a character for a character as NFKC and lower case read it (a full-width
    ``Q``, U+FF31, and ``Q`` read ``q``), so a place in it is the same place in ``text``."""
    if text.isascii():
        return text.lower()
    return "".join((unicodedata.normalize("NFKC", char).lower() or char)[0] for char in text)


def _merged(spans: list[Span]) -> list[Span]:
    """Overlapping spans as one, last first (so replacing one keeps the others' places)."""
    merged: list[Span] = []
    for span in sorted(spans):
        if merged and span.start <= merged[-1].end:
            merged[-1] = Span(merged[-1].start, max(merged[-1].end, span.end))
        else:
            merged.append(span)
    return merged[::-1]
