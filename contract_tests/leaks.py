"""What an answer gives away: the caller's credential (a breach), stack traces, internal addresses.

A service that reflects the key it was sent, whole or in part, in a body or a header breaks §5
(the key is a server-side secret): whoever logs or shows that answer holds the key. A stack
trace or a private address in an error body breaks no clause, but a reviewer wants to see it:
those are advisories, listed on their own and failing a run only on request.
"""

from __future__ import annotations

import re

import httpx

MIN_FRAGMENT = 8
"""The fewest consecutive characters of a key that count as reflecting it (a mask shows 4)."""
MIN_KEY = 6
"""Keys shorter than this cannot be told from ordinary text; they are not looked for."""
SCANNED = 65536
"""Only the first this many characters of a body are searched (bodies are small)."""

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


def longest_fragment(text: str, key: str, known: str = "") -> int:
    """The longest run of ``key``'s characters in ``text`` that ``known`` does not hold too.

    ``known`` is what the service says whatever the credential (its name in ``Server``, its
    own words): a run found there too is the service's text, not a reflection.
    """
    shortest = MIN_FRAGMENT if len(key) >= MIN_FRAGMENT else len(key)
    best = 0
    for start in range(len(key) - shortest + 1):
        length = shortest
        while start + length <= len(key) and key[start : start + length] in text:
            if length > best and key[start : start + length] not in known:
                best = length
            length += 1
    return best


def _text(response: httpx.Response) -> str:
    headers = "\n".join(f"{name}: {value}" for name, value in response.headers.items())
    return f"{headers}\n{response.text[:SCANNED]}"


def reflection(
    response: httpx.Response,
    key: str,
    sent: str | None = None,
    baseline: httpx.Response | None = None,
) -> str | None:
    """Where ``response`` reflects ``key`` (or the whole credential ``sent``); None if nowhere.

    ``baseline`` is an answer to a call without any credential: what it holds is the
    service's own text. The answer never quotes the key: it says where, and how much of it.
    """
    if len(key) < MIN_KEY:
        return None
    known = _text(baseline) if baseline is not None else ""
    places = [(f"header {name}", value) for name, value in response.headers.items()]
    places.append(("body", response.text[:SCANNED]))
    found = []
    for where, text in places:
        length = longest_fragment(text, key, known)
        if length:
            whole = "the whole key" if length == len(key) else f"{length} characters of the key"
            found.append(f"{where} holds {whole}")
        elif sent and len(sent) >= MIN_KEY and sent in text and sent not in known:
            found.append(f"{where} holds the credential it was sent")
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
