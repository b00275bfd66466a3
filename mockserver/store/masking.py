"""How a request is shown in the journal: bounded, keys masked, headers and parameters kept
as salted digests only (for matchers), so no journal, repr or message can show a secret."""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Final
from urllib.parse import unquote

from verdict_contract.core.redact import mask
from verdict_contract.core.spec import SESSION_PARAM

from ..model.sessions import MAX_SESSION_ID_LENGTH

MAX_PARAMS: Final = 20
"""Query parameters kept per entry; the rest are counted under :data:`CUT`."""
MAX_SCHEME_CHARS: Final = 20
MAX_HEADERS: Final = 64
"""Request headers fingerprinted per entry (for :meth:`~.verify.JournalChecks.calls` matchers)."""
MAX_PATH_CHARS: Final = 200
"""A path other than ``/e`` (a wrong one) is kept cut to this length."""
CUT: Final = "…(cut)"
"""The marker where the journal cut a value (or, as a query name, dropped parameters)."""


def cut(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its start and :data:`CUT`."""
    return text if len(text) <= limit else text[:limit] + CUT


@lru_cache(maxsize=64)  # a load test sends one header again and again
def mask_authorization(header: str | None) -> str | None:
    """Keep the scheme of an Authorization header and mask its credentials."""
    if header is None:
        return None
    scheme, _, credentials = header.strip().partition(" ")
    if not credentials:
        return mask(scheme) if scheme else ""
    return f"{cut(scheme, MAX_SCHEME_CHARS)} {mask(credentials.strip())}"


_PLAIN_NAME = re.compile(r"[a-z_]{1,20}")
"""Query parameter names shown as they are; anything else might be a secret."""


def shown_param(
    name: str, value: str, is_key: Callable[[str], bool] = lambda _: False
) -> tuple[str, str]:
    """A query parameter as output shows it: ``n`` (cut), plain names; other values masked."""
    if name == SESSION_PARAM:
        return name, mask(value) if is_key(value) else cut(value, MAX_SESSION_ID_LENGTH)
    # a key may arrive as a value (?api_key=...) or as a bare name (?<key>)
    plain = _PLAIN_NAME.fullmatch(name) and not is_key(name)
    return (name if plain else mask(name)), mask(value)


def shown_path(path: str, is_key: Callable[[str], bool]) -> str:
    """A request's path as output shows it: a segment that is an API key (as sent, or
    percent-decoded) is masked; a client that put its key in the path gets a 404 for it."""
    if not path.count("/") or not any(is_key(s) or is_key(unquote(s)) for s in path.split("/")):
        return path
    return "/".join(mask(s) if is_key(s) or is_key(unquote(s)) else s for s in path.split("/"))


RawHeaders = Sequence[tuple[str, str]] | Sequence[tuple[bytes, bytes]]
"""A request's headers as a server has them: text, or bytes as sent (decoded as latin-1)."""

_KEYED: Final = hashlib.blake2b(key=secrets.token_bytes(16), digest_size=16)
"""Keyed once per process; each digest starts from a copy (much cheaper than keying anew)."""


def fingerprint(kind: str, name: str, value: str) -> bytes:
    """A salted digest of one header (``kind`` ``h``, name lower-cased) or parameter (``q``).

    Entries keep these instead of the values: a matcher can ask "was this header sent?"
    (an Authorization included) while no journal, repr or message can show what was sent.
    """
    digest = _KEYED.copy()
    digest.update(f"{kind}\0{name}\0{value}".encode("utf-8", "surrogateescape"))
    return digest.digest()


def as_text(value: str | bytes) -> str:
    """A header name or value as text (bytes as sent are latin-1, as HTTP/1.1 has them)."""
    return value if isinstance(value, str) else value.decode("latin-1")


@lru_cache(maxsize=64)  # a load test sends the same headers again and again
def header_prints(
    headers: tuple[tuple[str, str] | tuple[bytes, bytes], ...], authorization: str | None
) -> frozenset[bytes]:
    prints = {fingerprint("h", as_text(k).lower(), as_text(v)) for k, v in headers[:MAX_HEADERS]}
    if authorization is not None:  # given apart by servers that read it apart
        prints.add(fingerprint("h", "authorization", authorization))
    return frozenset(prints)


@lru_cache(maxsize=1024)  # and asks for the same few sessions
def _cached_param_print(name: str, value: str) -> bytes:
    return fingerprint("q", name, value)


def _param_fingerprint(name: str, value: str) -> bytes:
    """A parameter's fingerprint; cached for short ones only, so the cache stays small."""
    if len(name) + len(value) <= MAX_SESSION_ID_LENGTH:
        return _cached_param_print(name, value)
    return fingerprint("q", name, value)


Shown = tuple[str | None, dict[str, list[str]], frozenset[bytes]]
"""How the journal shows a request's query: its ``n``, the other parameters (masked), and the
fingerprints of the parameters kept (:func:`fingerprint`)."""


def shown_args(args: Iterable[tuple[str, str]], is_key: Callable[[str], bool]) -> Shown:
    """``n`` and the query as the journal shows them: bounded, every value but ``n`` masked."""
    query: dict[str, list[str]] = {}
    n = None
    kept = dropped = 0
    note = ""
    prints: set[bytes] = set()
    for name, value in args:
        if name == CUT:  # what the server did not read (explain.py)
            note = cut(value, 100)
        elif name == SESSION_PARAM and n is None:
            n = shown_param(name, value, is_key)[1]
            prints.add(_param_fingerprint(name, value))
        elif kept < MAX_PARAMS:
            kept += 1
            prints.add(_param_fingerprint(name, value))
            first = name != SESSION_PARAM  # a repeated n is masked: it could be anything
            shown, masked = shown_param(name, value, is_key) if first else (name, mask(value))
            query.setdefault(shown, []).append(masked)
        else:  # bounded: hostile query strings hold tens of thousands of parameters
            dropped += 1
    if dropped or note:
        query[CUT] = [", ".join(t for t in (dropped and f"{dropped} more parameter(s)", note) if t)]
    return n, query, frozenset(prints)
