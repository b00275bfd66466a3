"""The dashboard at ``/_mock/``: one page, its script and style inline, allowed by their hashes.

The page (``static/dashboard.*``, no build step) reads the control API with same-origin
``fetch`` calls. Its Content-Security-Policy allows exactly its own script and style and
connections to this origin: markup that slips into the data (a session id holding
``<script>``) could not run even if it were parsed.
"""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable

from flask import Response

from ..model.sessions import FAULTS, MAX_DELAY_MS, SCRIPT_STATUSES


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _static() -> Traversable:
    return files("verdict_contract.mockserver.web") / "static"


@cache
def page() -> tuple[bytes, str]:
    """The page's HTML and its Content-Security-Policy, assembled once per process."""
    static = _static()
    html, style, script = (
        (static / f"dashboard.{kind}").read_text(encoding="utf-8") for kind in ("html", "css", "js")
    )
    if "</" in script or "</" in style:  # would end the inline element early
        raise ValueError("dashboard.js and dashboard.css must not contain '</'")
    facts = {  # the script steps' short forms, as the schema states them (sessions.py)
        "{{statuses}}": ", ".join(map(str, sorted(SCRIPT_STATUSES))),
        "{{faults}}": ", ".join(sorted(FAULTS)),
        "{{max_delay_ms}}": str(MAX_DELAY_MS),
    }
    for placeholder, value in facts.items():
        html, script = html.replace(placeholder, value), script.replace(placeholder, value)
    policy = "; ".join(
        (
            "default-src 'none'",
            f"script-src {_hash(script)}",
            f"style-src {_hash(style)}",
            "connect-src 'self'",
            "img-src 'self' data:",  # data: for the empty icon only
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        )
    )
    return html.replace("{{style}}", style).replace("{{script}}", script).encode(), policy


def _secured(response: Response, policy: str) -> Response:
    response.headers["Content-Security-Policy"] = policy
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Frame-Options"] = "DENY"
    return response


def token_page(wrong: bool = False) -> Response:
    """The 401 page a browser gets: how to open a token-protected dashboard (no script), or
    (``wrong``) that the ``?token=`` given is not the mock's."""
    name = "token-wrong.html" if wrong else "token-needed.html"
    text = (_static() / name).read_text(encoding="utf-8")
    page = Response(text, 401, content_type="text/html; charset=utf-8")
    return _secured(page, "default-src 'none'; base-uri 'none'; form-action 'none'")


def dashboard() -> Response:
    """``GET /_mock/``: the page (registered on the control blueprint, under its protections)."""
    body, policy = page()
    return _secured(Response(body, content_type="text/html; charset=utf-8"), policy)
