"""Did you mean…: the closest option to a mistyped one, and a scheme for a URL without one.

One helper for every command line of the project (``verdict-mock``, ``verdict-contract`` and
the suite's pytest options), so a typo is answered in the same words everywhere.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable
from typing import Any, NoReturn
from urllib.parse import urlsplit

from .hosts import is_loopback


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice nearest to ``word`` (difflib), or None when none is near enough."""
    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return matches[0] if matches else None


def unknown_options(args: Iterable[str], known: Iterable[str]) -> list[tuple[str, str | None]]:
    """Each ``--option`` of ``args`` that is not in ``known``, with the closest known one."""
    names = sorted(set(known))
    found = []
    for arg in args:
        if arg == "--":
            break
        name = arg.partition("=")[0]
        if name.startswith("--") and len(name) > 2 and name not in names:
            found.append((name, closest(name, names)))
    return found


def did_you_mean(unknown: Iterable[tuple[str, str | None]]) -> str | None:
    """``unrecognized option --prot: did you mean --port?`` for the first one with a match."""
    for name, match in unknown:
        if match is not None:
            return f"unrecognized option {name}: did you mean {match}?"
    return None


def with_scheme(url: str) -> str | None:
    """``127.0.0.1:8080`` -> ``http://127.0.0.1:8080``; ``staging.example`` -> ``https://…``.

    None when ``url`` has a scheme already (``://``) or no host can be read from it.
    """
    if "://" in url or not url.strip():
        return None
    try:
        host = urlsplit(f"//{url.strip()}").hostname
    except ValueError:
        return None
    if not host:
        return None
    return f"{'http' if is_loopback(host) else 'https'}://{url.strip()}"


def scheme_hint(url: str, otherwise: str = "") -> str:
    """``": did you mean http://…?"`` for a URL without a scheme, else ``otherwise``."""
    fixed = with_scheme(url)
    return f": did you mean {fixed}?" if fixed else otherwise


class SuggestingParser(argparse.ArgumentParser):
    """argparse that answers an unrecognized option with the closest one it knows, naming what
    it did not recognize without its values (those of a misspelt ``--api-key`` are a key); an
    error is one line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # no abbreviations: "--api=<key>" is unrecognized (named, not echoed), not "ambiguous"
        super().__init__(*args, **{"allow_abbrev": False, **kwargs})

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments: "):
            given = message.removeprefix("unrecognized arguments: ").split()
            named = (arg.partition("=")[0] if arg.startswith("-") else "…" for arg in given)
            message = f"unrecognized arguments: {' '.join(named)}"
            matches = [m for _, m in unknown_options(given, self._option_string_actions) if m]
            if matches:
                message = f"{message} (did you mean {matches[0]}?)"
        # one line, without the usage block argparse prints first (--help shows it)
        self.exit(2, f"{self.prog}: error: {message}\n")
