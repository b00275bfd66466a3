"""The control API's guard: Host, Origin and token, so a web page cannot drive a local mock.

A page the developer visits can reach ``127.0.0.1`` with a cross-site ``POST`` (CSRF) or a name
of its own that resolves there (DNS rebinding). The checks, their order and the dashboard's
cookie (an HMAC of the token, ``HttpOnly``, ``SameSite=Strict``) are told in docs/mock.md.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from functools import cache
from typing import Final, NamedTuple

from flask import Response, g, request

from verdict_contract.core.hosts import is_loopback
from verdict_contract.core.redact import Secret, mask, secret_index

from ..settings import Settings, env_var
from ..state import MockState
from .answers import SCOPE, error_response, state_of
from .dashboard import token_page

TOKEN_HEADER: Final = "X-Mock-Token"  # noqa: S105 - a header name, not a secret
TENANT_HEADER: Final = "X-Mock-Tenant"
"""With the operator's token: the tenant a control call acts for (``--tenants``)."""
TOKEN_PARAM: Final = "token"  # noqa: S105 - a parameter name
DASHBOARD_PATH: Final = "/_mock/"
"""The one page that also takes the token from its query, so a browser can open it."""
COOKIE_PREFIX: Final = "verdict_mock_dashboard"
COOKIE_MAX_AGE: Final = 30 * 24 * 3600
"""A bookmark keeps working for a month after the last visit with the token."""
_COOKIE_PURPOSE: Final = b"verdict-mock dashboard cookie, v1"

LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "[::1]")
log = logging.getLogger("mockserver.guard")


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
    own = host_header.lower()
    return origin is None or origin.strip().lower() in (f"http://{own}", f"https://{own}")


def cookie_name(host_header: str) -> str:
    """The cookie's name, per port: cookies ignore ports, and two mocks may run side by side."""
    _, colon, port = host_header.strip().rpartition(":")
    return f"{COOKIE_PREFIX}_{port if colon and port.isdigit() else 'default'}"


def cookie_value(token: Secret) -> str:
    """What the cookie holds: an HMAC of the token (it opens the dashboard, it is not the token)."""
    return hmac.new(token.reveal().encode(), _COOKIE_PURPOSE, hashlib.sha256).hexdigest()


class Holder(NamedTuple):
    """A control token and the state it opens: the operator's, or a tenant's."""

    token: Secret
    state: MockState


def holders(state: MockState) -> list[Holder]:
    """Every control token the mock takes: the operator's (``--control-token``), each tenant's."""
    token = state.settings.control_token
    found = [] if token is None else [Holder(token, state)]
    tenants = list(state.tenants.values())[1:]  # the operator's own comes first
    return found + [Holder(t.tenant.control_token, t) for t in tenants if t.tenant is not None]


def holder_of(sent: str | None, known: list[Holder], *, cookie: bool = False) -> Holder | None:
    """The holder whose token (or dashboard cookie) was sent; each compared in constant time."""
    tokens = [(cookie_value(h.token) if cookie else h.token.reveal()).encode() for h in known]
    index = secret_index(sent or "", tokens)
    return None if index is None else known[index]


def _open_dashboard(token: Secret) -> Response:
    """``GET /_mock/?token=<token>``: set the cookie, then show ``/_mock/`` without the query."""
    response = Response(status=303, headers={"Location": DASHBOARD_PATH})
    response.set_cookie(
        cookie_name(request.headers.get("Host", "")),
        cookie_value(token),
        max_age=COOKIE_MAX_AGE,
        path=DASHBOARD_PATH,
        secure=request.is_secure,
        httponly=True,
        samesite="Strict",
    )
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


def _token_refused(wrong_query: bool = False) -> Response:
    """401: for a browser the page that says how to open the dashboard, else the JSON error;
    ``wrong_query``: opened with a ``?token=`` that is not the mock's (never shown)."""
    if "text/html" in request.headers.get("Accept", ""):
        return token_page(wrong=wrong_query)
    if wrong_query:
        message = (
            f"the token in {DASHBOARD_PATH}?{TOKEN_PARAM}= is not this mock's control token; "
            f"use the one it was started with (--control-token or {env_var('control_token')})"
        )
    else:
        message = (
            f"the control API needs the token set with --control-token, in the {TOKEN_HEADER} "
            f"header (a browser: open {DASHBOARD_PATH}?token=<token> once)"
        )
    return error_response(401, "control_token_required", message)


def _check_token(state: MockState) -> Response | None:
    """The token check: None lets the call through, for the state of the token's holder."""
    if state.settings.control_token is None:
        return None
    known = holders(state)
    holder = holder_of(request.headers.get(TOKEN_HEADER), known)
    if holder is not None:
        return _enter(state, holder.state)
    page = request.method in ("GET", "HEAD") and request.path == DASHBOARD_PATH
    if page and TOKEN_PARAM in request.args:
        holder = holder_of(request.args[TOKEN_PARAM], known)
        return _open_dashboard(holder.token) if holder else _token_refused(wrong_query=True)
    cookie = request.cookies.get(cookie_name(request.headers.get("Host", "")))
    holder = holder_of(cookie, known, cookie=True)
    if holder is not None:
        if request.method in ("GET", "HEAD") or request.headers.get("Origin") is not None:
            return _enter(state, holder.state)  # the Origin, when present, is the mock's own
        return error_response(
            403,
            "origin_required",
            "a call that changes state with the dashboard's cookie must carry the mock's own "
            f"Origin (a browser sends it); scripts send the {TOKEN_HEADER} header instead",
        )
    return _token_refused()


def _enter(operator: MockState, holder: MockState) -> Response | None:
    """Act for the holder's tenant; the operator for the one its ``X-Mock-Tenant`` names."""
    name = request.headers.get(TENANT_HEADER)
    if holder is not operator and name is not None and name != holder.tenant_name:
        return error_response(
            403,
            "operator_only",
            f"{TENANT_HEADER} picks a tenant with the operator's token (--control-token); "
            "a tenant's token acts for its own tenant only",
        )
    if holder is operator and name is not None:
        tenant = operator.tenants.get(name)
        if tenant is None:
            return error_response(
                404,
                "unknown_tenant",
                f"received {TENANT_HEADER} {_echoed(name[:50], operator)!r}; documented: one of "
                + (", ".join(operator.tenants) or "none (no --tenants)"),
            )
        holder = tenant
    g.setdefault(SCOPE, holder)
    return None


def _echoed(value: str, state: MockState) -> str:  # a header an error quotes: a secret masked
    return mask(value) if state.key_finder.finds(value) else value


def guard_control() -> Response | None:
    """``before_request`` of the control blueprint: None lets the call through."""
    state = state_of()
    settings = state.settings
    host = request.headers.get("Host", "")
    if not host_allowed(host, settings):
        names = ", ".join((*LOOPBACK_NAMES, *settings.allowed_hosts))
        return error_response(
            421,
            "misdirected_request",
            f"the control API answers to the hosts {names} (more with --allowed-host); "
            f"received Host {_echoed(host_name(host)[:100], state)!r}",
        )
    if not origin_allowed(origin := request.headers.get("Origin"), host):
        refused = "the control API refuses calls from web pages of other origins; received"
        shown = _echoed((origin or "")[:100], state)
        return error_response(403, "cross_origin_refused", f"{refused} Origin {shown!r}")
    proxied = "X-Forwarded-For" in request.headers or "Forwarded" in request.headers
    if proxied and settings.control_token is None:
        _proxied_without_token()
    return _check_token(state)


@cache  # said once a process
def _proxied_without_token() -> None:
    log.warning(
        "a control call came through a proxy (it was forwarded) to a mock with no control token: "
        "whoever reaches the proxy controls the mock. Set --control-token (or %s)",
        env_var("control_token"),
    )


def exposure_warning(settings: Settings) -> str | None:
    """The warning for a control API open to the network with no token, or None."""
    if not settings.control or settings.control_token is not None or is_loopback(settings.host):
        return None
    return (
        f"WARNING: the control API (/_mock/) is reachable from the network on {settings.host} "
        "with no token: anyone who can reach this port can mint sessions and read the journal. "
        f"Set --control-token (or {env_var('control_token')}), or pass --no-control."
    )
