"""The optional access log (``--access-log``): one common-log-format line per request, keys
masked, control characters escaped (docs/mock.md tells the line).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from ipaddress import IPv4Network, IPv6Network, ip_address, ip_network
from typing import TYPE_CHECKING, Any, Final, NamedTuple
from urllib.parse import parse_qsl

from werkzeug.wsgi import ClosingIterator

from verdict_contract.core.redact import mask, masked_path, printable

from ..model.answer import NO_STATUS
from ..state import MockState, authorized
from ..store.journal import masked_param
from .guard import TOKEN_PARAM, holder_of, holders

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

log = logging.getLogger("mockserver.access")

MAX_TARGET_CHARS: Final = 1000
CUT: Final = "…(cut)"


def request_target(environ: WSGIEnvironment, is_key: Callable[[str], bool]) -> str:
    """The path and query of a request as the log shows them: values masked, length bounded."""
    path = masked_path(environ.get("PATH_INFO", "")[: MAX_TARGET_CHARS + 1], is_key)  # as shown
    query: str = environ.get("QUERY_STRING", "")
    if query:
        pairs = parse_qsl(query[: MAX_TARGET_CHARS * 4], keep_blank_values=True)
        # the control token (the dashboard's link): not one character of it
        masked = ((k, "…") if k == TOKEN_PARAM else masked_param(k, v, is_key) for k, v in pairs)
        path = f"{path}?{'&'.join(f'{k}={v}' for k, v in masked)}"
    return path if len(path) <= MAX_TARGET_CHARS else path[:MAX_TARGET_CHARS] + CUT


class LoggedAnswer(NamedTuple):
    """What a line says of an answer: ``seconds`` None when none was sent, ``user`` a tenant."""

    status: str
    size: int
    user: str = "-"
    seconds: float | None = None


def log_line(environ: WSGIEnvironment, served: LoggedAnswer, state: MockState) -> str:
    """``client - user [time] "request" status bytes seconds``, every key of ``state`` masked."""
    stamp = time.strftime("%d/%b/%Y:%H:%M:%S %z")
    masks = state.masks(environ.get("HTTP_AUTHORIZATION"))
    request = (
        f"{environ.get('REQUEST_METHOD', '-')} {request_target(environ, masks)} "
        f"{environ.get('SERVER_PROTOCOL', '-')}"
    ).replace('"', "%22")
    remote = client_of(environ, state.settings.forwarded_allow_ips)  # X-Forwarded-For: as sent
    remote = mask(remote) if masks(remote) else remote
    took = "-" if served.seconds is None else f"{served.seconds:.6f}"
    status = served.status.split(" ")[0]
    line = f'{remote} - {served.user} [{stamp}] "{request}" {status} {served.size or "-"} {took}'
    return printable(line)


MAX_HOP_CHARS: Final = 64


def client_of(environ: Mapping[str, Any], trusted: tuple[str, ...]) -> str:
    """The peer's address, or behind ``trusted`` proxies the right-most X-Forwarded-For address
    that is not a trusted proxy's (all of them trusted: the left-most), as uvicorn reads it."""
    remote: str = environ.get("REMOTE_ADDR") or "-"
    forwarded = environ.get("HTTP_X_FORWARDED_FOR")
    if not trusted or forwarded is None or not _trusted(remote, trusted):
        return remote
    hops = [hop.strip()[:MAX_HOP_CHARS] for hop in forwarded[:MAX_TARGET_CHARS].split(",")]
    return next((hop for hop in reversed(hops) if not _trusted(hop, trusted)), hops[0]) or "-"


def _networks(trusted: tuple[str, ...]) -> tuple[IPv4Network | IPv6Network, ...]:
    return tuple(ip_network(allowed, strict=False) for allowed in trusted if allowed != "*")


def _trusted(host: str, trusted: tuple[str, ...]) -> bool:
    if "*" in trusted:
        return True
    try:
        address = ip_address(host)
    except ValueError:
        return False
    return any(address in network for network in _networks(trusted))


def tenant_label(state: MockState, authorization: str | None, token: str | None = None) -> str:
    """The log's user field: the tenant of a control call's ``token``, else of its API key."""
    if not state.tenants:
        return "-"
    if token is not None:
        holder = holder_of(token, holders(state))
        return "-" if holder is None else holder.state.tenant_name
    owner = state.tenant_of(authorization)
    return owner.tenant_name if authorized(owner, authorization) else "-"


class AccessLog:
    """Log one line per request to ``mockserver.access``."""

    def __init__(self, app: WSGIApplication, state: MockState) -> None:
        self.app = app
        self.state = state

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        status, started = ["-"], time.perf_counter()
        authorization = environ.get("HTTP_AUTHORIZATION")
        control = environ.get("PATH_INFO", "").startswith("/_mock/")
        token = environ.get("HTTP_X_MOCK_TOKEN") if control else None
        user = tenant_label(self.state, authorization, token)

        def start(code: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            status[0] = code
            return start_response(code, headers, exc_info)

        try:
            body = self.app(environ, start)
        except BaseException:  # e.g. a scripted reset: the client got no answer
            log.info("%s", log_line(environ, LoggedAnswer(NO_STATUS, 0, user), self.state))
            raise

        size = 0

        def counted() -> Iterator[bytes]:
            nonlocal size
            for chunk in body:
                size += len(chunk)
                yield chunk

        def close() -> None:  # the line is logged when the body is closed, whatever its close does
            try:
                getattr(body, "close", lambda: None)()
            finally:
                served = LoggedAnswer(status[0], size, user, time.perf_counter() - started)
                log.info("%s", log_line(environ, served, self.state))

        return ClosingIterator(counted(), close)
