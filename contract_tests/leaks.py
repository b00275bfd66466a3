"""What an answer gives away: the caller's credential (a breach), stack traces, internal addresses.

A service that reflects the key it was sent, whole or in part, in a body, a header or the reason
phrase, as it is, JSON-escaped in a string of the body (``\\u0073\\u006b…``), percent-encoded or
base64-encoded, breaks §5 (the key is a server-side secret): whoever logs or
shows that answer holds the key. So does one that gives the key to every caller. A stack
trace or a private address in an error body breaks no clause, but a reviewer wants to see it:
those are advisories, listed on their own and failing a run only on request.
"""

from __future__ import annotations

import json
import re
from typing import NamedTuple
from urllib.parse import unquote

import httpx

from verdict_contract.core.keyforms import base64_forms, hex_forms
from verdict_contract.core.redact import KeyFinder, folded

MIN_FRAGMENT = 8
"""The fewest consecutive characters of a key that count as reflecting it (a mask shows 4)."""
MIN_KEY = 6
"""Keys shorter than this cannot be told from ordinary text; they are not looked for."""
SCANNED = 65536
"""Only the first this many characters of an error body are searched for advisories; a
credential is looked for in the whole body (which the client caps at 1 MiB)."""

STACK_TRACE = re.compile(
    r"Traceback \(most recent call last\)"  # Python
    r'|File "[^"\n]+", line \d+'  # Python frames
    r"|^\s+at [\w$.<>]+\(.*\)\s*$"  # Java, .NET, JavaScript frames
    r"|\.(?:java|kt|scala|cs|js|ts|go|rb|php):\d+"  # a source file and line
    r"|goroutine \d+ \["  # Go
    r"|Exception in thread ",  # Java
    flags=re.MULTILINE,
)
INTERNAL_ADDRESS = re.compile(
    r"(?<![\d.])(?:10\.\d{1,3}\.\d{1,3}\.\d{1,3}"
    r"|172\.(?:1[6-9]|2\d|3[01])\.\d{1,3}\.\d{1,3}"
    r"|192\.168\.\d{1,3}\.\d{1,3})(?![\d.])"
    r"|\b[\w-]+(?:\.[\w-]+)*\.(?:internal|local|lan|corp|intranet)\b",
)


def _excused(run: str, key: str, known: str) -> bool:
    """A run the service says whatever the credential (its name in ``Server``, its own words)
    is its text, not a reflection, however long: the mock's public key ``verdict-mock-local-key``
    shares 12 characters with its ``Server: verdict-mock``. The whole key is never excused: in
    every answer, it is the key given to every caller."""
    return len(run) < len(key) and run in known


def longest_fragment(text: str, key: str, known: str = "") -> int:
    """The longest run of ``key``'s characters in ``text`` that is not the service's own text.

    ``known`` is what the service says whatever the credential: see :func:`_excused`.
    """
    shortest = MIN_FRAGMENT if len(key) >= MIN_FRAGMENT else len(key)
    best = 0
    for start in range(len(key) - shortest + 1):
        length = shortest
        while start + length <= len(key) and key[start : start + length] in text:
            if length > best and not _excused(key[start : start + length], key, known):
                best = length
            length += 1
    return best


def _json_strings(raw: bytes) -> list[str]:
    """Every string of a JSON body once decoded, object keys and values at any depth; none if
    the body is not JSON. Escapes (``\\u0073``) hide a key from a search of the raw text."""
    try:
        stack: list[object] = [json.loads(raw)]
    except (ValueError, RecursionError):
        return []
    strings = []
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            strings.append(value)
        elif isinstance(value, dict):
            strings += value
            stack += value.values()
        elif isinstance(value, list):
            stack += value
    return strings


class Place(NamedTuple):
    """Where an answer can show a credential, and that place read as sent and decoded."""

    where: str
    readings: dict[str, str]
    """How it was read (``""``: as sent) -> the text so read."""


FOLDED = " (in capitals or full-width)"
"""How a reading folded by :func:`.redact.folded` is named: read against the key folded."""


def _place(where: str, text: str, json_strings: list[str] | None = None) -> Place:
    readings = {"": text}
    if json_strings:
        readings[" (in its JSON strings, decoded)"] = "\n".join(json_strings)
    for how, read in list(readings.items()):
        if (decoded := unquote(unquote(read))) != read:  # twice: %2573 is an s
            readings[f"{how} (percent-decoded)"] = decoded
    for how, read in list(readings.items()):
        if folded(read) != read:
            readings[how + FOLDED] = folded(read)
    return Place(where, readings)


def _places(response: httpx.Response) -> list[Place]:
    """Where an answer can show a credential: each header, the reason phrase, the whole body
    (also as its decoded JSON strings), each also read percent-decoded."""
    places = [_place(f"header {name}", value) for name, value in response.headers.items()]
    places.append(_place("the reason phrase", response.reason_phrase))
    places.append(_place("body", response.text, _json_strings(response.content)))
    return places


def _text(response: httpx.Response) -> str:
    return "\n".join(text for place in _places(response) for text in place.readings.values())


def reflection(
    response: httpx.Response,
    key: str,
    sent: str | None = None,
    baseline: httpx.Response | None = None,
) -> str | None:
    """Where ``response`` reflects ``key`` (or the whole credential ``sent``); None if nowhere.

    ``baseline`` is an answer to a call without any credential: runs it holds too are
    the service's own text (:func:`_excused`). The whole key, or its base64, is never
    excused: an answer to no credential that holds it gives the key to anyone. The answer
    never quotes the key: it says where, and how much of it.
    """
    if len(key) < MIN_KEY:
        return None
    known = _text(baseline) if baseline is not None else ""
    # 8 characters in a row of an encoding of the key: a part of it encoded is a leak too
    in_base64 = KeyFinder.of((form.encode() for form in base64_forms(key)), encoded=False)
    # of hex run together only (4 bytes): 8 characters of "0x6b, 0x" are one, any array's
    hexes = hex_forms(key)
    in_hex = KeyFinder.of(
        (f.encode() for f in hexes if len(f) == 2 * len(key.encode())), encoded=False
    )
    encoded_sent = base64_forms(sent) if sent and len(sent) >= MIN_KEY else []
    found = []
    for place in _places(response):
        for how, text in place.readings.items():
            where = f"{place.where}{how}"
            is_folded = how.endswith(FOLDED)
            length = longest_fragment(text, folded(key) if is_folded else key, known)
            if length:
                whole = "the whole key" if length == len(key) else f"{length} characters of the key"
                everyone = " (so does an answer to a call without any credential)"
                shared = length == len(key) and key in known
                found.append(f"{where} holds {whole}{everyone if shared else ''}")
            elif in_base64.finds(text):
                found.append(f"{where} holds the key base64-encoded")
            elif in_hex.finds(text) or any(form in text for form in hexes):  # or whole
                found.append(f"{where} holds the key hex-encoded")
            elif sent and len(sent) >= MIN_KEY and sent in text and sent not in known:
                found.append(f"{where} holds the credential it was sent")
            elif any(form in text for form in encoded_sent):
                found.append(f"{where} holds the credential it was sent, base64-encoded")
            else:
                continue
            break  # the place is said once, as first read
    return "; ".join(found) or None


def error_body_advisories(response: httpx.Response) -> list[str]:
    """What an error answer's body shows that it should not: a stack trace, an internal address."""
    if response.status_code < 400:
        return []
    text = response.text[:SCANNED]
    found = []
    trace = STACK_TRACE.search(text)
    if trace is not None:
        found.append(
            f"a {response.status_code} answer's body shows a stack trace "
            f"({trace.group(0).strip()[:60]!r})"
        )
    address = INTERNAL_ADDRESS.search(text)
    if address is not None:
        found.append(
            f"a {response.status_code} answer's body names an internal address "
            f"({address.group(0)!r})"
        )
    return found
