"""What the contract suite runs against: its options, resolved and checked once.

A configuration mistake becomes a :class:`pytest.UsageError` of one readable line.
"""

from __future__ import annotations

import importlib
import ipaddress
import os
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest

from verdict_contract.core.envvars import parse_bool
from verdict_contract.core.redact import Secret

ENV = {
    "api_key": "VERDICT_API_KEY",
    "session_id": "VERDICT_SESSION_IDS",
    "expired_session_id": "VERDICT_EXPIRED_SESSION_ID",
    "session_factory": "VERDICT_SESSION_FACTORY",
    "probe_rate_limit": "VERDICT_PROBE_RATE_LIMIT",
    "request_timeout": "VERDICT_REQUEST_TIMEOUT",
    "allow_insecure_http": "VERDICT_ALLOW_INSECURE_HTTP",
}


def add_options(parser: pytest.Parser) -> None:
    """Register the suite's options; each also reads the environment variable in ENV."""
    group = parser.getgroup("verdict-contract", "Explain API contract suite (verdict-contract)")
    group.addoption(
        "--api-key", metavar="KEY", help=f"API key for the target [{ENV['api_key']}]; never printed"
    )
    group.addoption(
        "--session-id",
        action="append",
        default=[],
        metavar="ID",
        help="a fresh session id (collected < 15 min ago), repeatable "
        f"[{ENV['session_id']}, comma-separated]",
    )
    group.addoption(
        "--expired-session-id",
        metavar="ID",
        help=f"a session id collected 15 minutes ago or more [{ENV['expired_session_id']}]",
    )
    group.addoption(
        "--session-factory",
        metavar="MODULE:CALLABLE",
        help=f"called to obtain a fresh session id [{ENV['session_factory']}]",
    )
    group.addoption(
        "--probe-rate-limit",
        metavar="N",
        help="send at most N requests expecting a 429 (opt-in against live "
        f"targets) [{ENV['probe_rate_limit']}]",
    )
    group.addoption(
        "--request-timeout",
        metavar="SECONDS",
        help=f"timeout of each request, default 10 [{ENV['request_timeout']}]",
    )
    group.addoption(
        "--allow-insecure-http",
        action="store_true",
        default=None,
        help="allow sending the key over plain http to a non-loopback host "
        f"[{ENV['allow_insecure_http']}=1]",
    )


@dataclass(frozen=True)
class SuiteConfig:
    """The suite's options after defaults, environment and validation."""

    base_url: str | None
    api_key: Secret | None
    session_ids: tuple[str, ...]
    expired_session_id: str | None
    session_factory: Callable[[], str] | None
    probe_rate_limit: int | None
    request_timeout: float
    mock_target: bool = False  # the URL answers the mock's control API


def _option(config: pytest.Config, name: str) -> str | None:
    """The option's value from the command line, else from its environment variable."""
    value = config.getoption(name)
    if isinstance(value, list):  # repeatable options
        value = ",".join(value)
    if value in (None, ""):
        return os.environ.get(ENV[name]) or None
    return str(value)


def _number(config: pytest.Config, name: str, kind: type[float] | type[int]) -> float | None:
    raw = _option(config, name)
    try:
        value = kind(raw) if raw is not None else None
    except ValueError:
        raise pytest.UsageError(f"--{name.replace('_', '-')}: {raw!r} is not a number") from None
    if value is not None and value <= 0:
        raise pytest.UsageError(f"--{name.replace('_', '-')} must be positive")
    return value


def _base_url(config: pytest.Config) -> str | None:
    # pytest-base-url owns --base-url, PYTEST_BASE_URL and the base_url ini value.
    value = config.getoption("base_url", None) or config.getini("base_url") or None
    return str(value).rstrip("/") if value else None


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_url(url: str) -> None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise pytest.UsageError(f"--base-url {url!r} is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise pytest.UsageError(f"--base-url {url!r} is not an http(s) URL with a host")
    if parts.query or parts.fragment:
        raise pytest.UsageError(f"--base-url {url!r} must not carry a query or fragment")


def _check_transport(url: str, allow_insecure: bool) -> None:
    parts = urlsplit(url)
    if parts.scheme == "http" and not _is_loopback(parts.hostname or "") and not allow_insecure:
        raise pytest.UsageError(
            f"refusing to send the API key over plain http to {parts.hostname}: use https, "
            "or pass --allow-insecure-http if this network is trusted"
        )


def _load_factory(spec: str) -> Callable[[], str]:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise pytest.UsageError(f"--session-factory {spec!r} must look like module:callable")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except Exception as exc:  # any import failure is the user's configuration, said in a line
        raise pytest.UsageError(
            f"--session-factory {spec!r} cannot be loaded: {type(exc).__name__}: {exc}"
        ) from None
    if not callable(factory):
        raise pytest.UsageError(f"--session-factory {spec!r} is not callable")
    return factory  # type: ignore[no-any-return]


def is_mock(base_url: str, timeout: float = 3.0) -> bool:
    """Whether ``base_url`` answers the bundled mock's control API (so it can mint sessions)."""
    import httpx  # here, not at the top: the plugin imports this module in every pytest run

    try:
        response = httpx.get(f"{base_url}/_mock/health", timeout=timeout)
        return response.status_code == 200 and response.json().get("status") == "ok"
    except (httpx.HTTPError, ValueError, AttributeError):
        return False


def load_config(config: pytest.Config) -> SuiteConfig:
    """Resolve and validate the suite's options; raises pytest.UsageError on a mistake."""
    base_url = _base_url(config)
    insecure = parse_bool(_option(config, "allow_insecure_http") or "")
    key = _option(config, "api_key")
    ids = _option(config, "session_id") or ""
    factory = _option(config, "session_factory")
    timeout = _number(config, "request_timeout", float) or 10.0
    probe = _number(config, "probe_rate_limit", int)
    mock_target = False
    if base_url is not None:
        _check_url(base_url)
        mock_target = is_mock(base_url)
        if key is None and not mock_target:
            raise pytest.UsageError(
                f"the live target {base_url} needs an API key: pass --api-key or set "
                f"{ENV['api_key']}"
            )
        _check_transport(base_url, insecure)
    return SuiteConfig(
        base_url=base_url,
        api_key=Secret(key) if key is not None else None,
        session_ids=tuple(i.strip() for i in ids.split(",") if i.strip()),
        expired_session_id=_option(config, "expired_session_id"),
        session_factory=_load_factory(factory) if factory else None,
        probe_rate_limit=int(probe) if probe is not None else None,
        request_timeout=timeout,
        mock_target=mock_target,
    )
