"""The control API's guard: the checks that keep a web page from driving a local mock.

A page the developer visits can reach ``127.0.0.1`` from their browser: with a simple cross-site
``POST`` (CSRF), or with a name of its own that resolves to ``127.0.0.1`` (DNS rebinding). So
every call to the ``control`` blueprint (see :func:`guard_control`, its ``before_request``)
passes three checks, in this order, each refusing with the documented JSON error shape:

1. ``Host``: when bound to loopback (or given ``--allowed-host``), only loopback names and the
   allowed names: 421.
2. ``Origin``: absent (``curl``, scripts) or the mock's own: else 403.
3. the control token, when one is set: ``X-Mock-Token: <token>`` on every call, or
   ``?token=<token>`` on ``GET /_mock/`` (the dashboard page, so a browser can open it): else 401.
"""

from __future__ import annotations

import hmac
from typing import Final

from flask import Response, request

from verdict_contract.core.hosts import is_loopback
from verdict_contract.mockserver.settings import Settings, env_var
from verdict_contract.mockserver.web import error_response, state_of

TOKEN_HEADER: Final = "X-Mock-Token"  # noqa: S105 - a header name, not a secret
TOKEN_PARAM: Final = "token"  # noqa: S105 - a parameter name
DASHBOARD_PATH: Final = "/_mock/"
"""The one page that also takes the token from its query, so a browser can open it."""

LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "[::1]")


def host_name(host_header: str) -> str:
    """The name part of a ``Host`` header: ``[::1]:8080`` -> ``[::1]``, ``a:80`` -> ``a``."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() else host


def host_allowed(host_header: str, settings: Settings) -> bool:
    """The Host check: anything goes unless bound to loopback or given allowed names."""
    if not settings.allowed_hosts and not is_loopback(settings.host):
        return True
    name = host_name(host_header)
    return is_loopback(name) or name.rstrip(".") in settings.allowed_hosts


def origin_allowed(origin: str | None, host_header: str) -> bool:
    """No ``Origin`` (not a browser) or the mock's own; ``null`` and every other site are not."""
    if origin is None:
        return True
    return origin.strip().lower() in (
        f"http://{host_header.lower()}",
        f"https://{host_header.lower()}",
    )


def token_sent(settings: Settings) -> bool:
    """Whether this request carries the control token (compared in constant time)."""
    if settings.control_token is None:
        return True
    sent = request.headers.get(TOKEN_HEADER)
    if sent is None and request.method in ("GET", "HEAD") and request.path == DASHBOARD_PATH:
        sent = request.args.get(TOKEN_PARAM)
    expected = settings.control_token.reveal().encode()
    return hmac.compare_digest((sent or "").encode("utf-8", "surrogateescape"), expected)


def guard_control() -> Response | None:
    """``before_request`` of the control blueprint: None lets the call through."""
    settings = state_of().settings
    host = request.headers.get("Host", "")
    if not host_allowed(host, settings):
        names = ", ".join((*LOOPBACK_NAMES, *settings.allowed_hosts))
        return error_response(
            421,
            "misdirected_request",
            f"the control API answers to the hosts {names} (more with --allowed-host); "
            f"received Host {host_name(host)[:100]!r}",
        )
    if not origin_allowed(request.headers.get("Origin"), host):
        return error_response(
            403,
            "cross_origin_refused",
            "the control API refuses calls from web pages of other origins; "
            f"received Origin {request.headers.get('Origin', '')[:100]!r}",
        )
    if not token_sent(settings):
        return error_response(
            401,
            "control_token_required",
            f"the control API needs the token set with --control-token, in the {TOKEN_HEADER} "
            "header",
        )
    return None


def exposure_warning(settings: Settings) -> str | None:
    """The warning for a control API open to the network with no token, or None."""
    if not settings.control or settings.control_token is not None or is_loopback(settings.host):
        return None
    return (
        f"WARNING: the control API (/_mock/) is reachable from the network on {settings.host} "
        "with no token: anyone who can reach this port can mint sessions and read the journal. "
        f"Set --control-token (or {env_var('control_token')}), or pass --no-control."
    )
