"""What the contract suite runs against: its options, resolved and checked once.

A configuration mistake becomes a :class:`pytest.UsageError` of one readable line.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, NamedTuple, TypeVar
from urllib.parse import urlsplit

import pytest

from verdict_contract.core.hosts import is_loopback_address
from verdict_contract.core.parsing import output_file, parse_bool, positive_int, seconds
from verdict_contract.core.rates import RateLimit
from verdict_contract.core.redact import Redactor, Secret, masked_url
from verdict_contract.core.suggest import scheme_hint

from .transport import DEFAULT_CALL_TIMEOUT

NO_INI = frozenset({"api_key", "control_token"})
"""A key or a token does not belong in a file that is checked in: the flag or the variable."""

TARGET_KINDS = ("auto", "mock", "live")
"""``--verdict-target-kind``: tell the bundled mock by its signature (auto), or say which."""

DEFAULT_TIMEOUT = 10.0
DEFAULT_WAIT_BUDGET = 60.0


class Option(NamedTuple):
    """One option of the suite: its name (its flag is ``--verdict-`` and the name, its ini key
    ``verdict_`` and the name), its help, how pytest reads it, and its variable if it is not
    ``VERDICT_`` and the name."""

    name: str
    help: str
    metavar: str | None = None
    action: str | None = None
    default: object = None
    choices: tuple[str, ...] | None = None
    variable: str | None = None

    @property
    def env(self) -> str:
        return self.variable or f"VERDICT_{self.name.upper()}"


OPTIONS: Final = (
    Option(
        "api_key",
        "API key for the target; sent only in the Authorization header, never printed",
        metavar="KEY",
    ),
    Option(
        "control_token",
        "a verdict-mock target's --control-token (for its control API)",
        metavar="TOKEN",
        variable="VERDICT_MOCK_CONTROL_TOKEN",  # the mock's own: one export serves both
    ),
    Option(
        "session_id",
        "a fresh session id (collected < 15 min ago), repeatable; the variable is comma-separated",
        metavar="ID",
        action="append",
        default=[],  # argparse appends to a copy
        variable="VERDICT_SESSION_IDS",
    ),
    Option("expired_session_id", "a session id collected 15 minutes ago or more", metavar="ID"),
    Option("session_factory", "called to obtain a fresh session id", metavar="MODULE:CALLABLE"),
    Option(
        "probe_rate_limit",
        "opt-in: send at most N requests expecting a 429 (the only check provoking one)",
        metavar="N",
    ),
    Option(
        "request_timeout",
        f"timeout of each request, default {DEFAULT_TIMEOUT:g}",
        metavar="SECONDS",
    ),
    Option(
        "call_timeout",
        f"the most one call may take in all, default {DEFAULT_CALL_TIMEOUT:g} (or the request "
        "timeout if longer)",
        metavar="SECONDS",
    ),
    Option(
        "wait_budget",
        f"the most the whole run waits on 429s, default {DEFAULT_WAIT_BUDGET:g}; past it "
        "checks end as throttled",
        metavar="SECONDS",
    ),
    Option(
        "allow_insecure_http",
        "allow sending the key over plain http to a non-loopback host (variable: 1)",
        action="store_true",
    ),
    Option(
        "check_key_in_url",
        "also check a live target refuses the key in a URL: sends the key there, so use a "
        "throwaway key (variable: 1)",
        action="store_true",
    ),
    Option("report", "write a Markdown report to PATH", metavar="PATH"),
    Option("html_report", "the report as one HTML page", metavar="PATH"),
    Option(
        "allow_partial",
        "pass a run that could check only some sessions given (exit 0, not incomplete: 10) "
        "(variable: 1)",
        action="store_true",
    ),
    Option(
        "require_every_kind",
        "fail the run as incomplete (exit 10) when a verdict kind was never seen (variable: 1)",
        action="store_true",
    ),
    Option(
        "fail_on_advisory",
        "fail the run (exit 1) on advisories: a 429 without Retry-After, a Retry-After that "
        "lies, a stack trace or internal address in an error body (variable: 1)",
        action="store_true",
    ),
    Option(
        "target_kind",
        "auto (default): the mock told by its signature; mock or live: say which",
        metavar="auto|mock|live",
        choices=TARGET_KINDS,
    ),
    Option(
        "ca_bundle",
        "a PEM file of CA certificates to trust for https (a private CA); SSL_CERT_FILE also "
        "works, REQUESTS_CA_BUNDLE is not read",
        metavar="PATH",
    ),
    Option(
        "max_rate",
        "send at most N requests per SECONDS, shared by all xdist workers (a known limit)",
        metavar="N/SECONDS",
    ),
)
"""Every option of the suite, declared once: its flag, variable and ini key derive from it."""

ENV: Final = {option.name: option.env for option in OPTIONS}
"""Each option's environment variable, by name."""


T = TypeVar("T")


def flag(name: str) -> str:
    """The command-line spelling of an option: every option of ours starts with ``--verdict-``."""
    return "--verdict-" + name.replace("_", "-")


BASE_URL_ENV = "PYTEST_BASE_URL"


def own_words() -> str:
    """What the suite writes whatever the key: its options, variables and ini keys, its
    command's and package's names. A run of a key inside them tells nothing of the key, so the
    redactor leaves it (``-verdict-`` of a key ``sk-live-verdict-…`` in an option's name)."""
    names = [flag(n) for n in ENV] + [f"verdict_{n}" for n in ENV] + list(ENV.values())
    package = ["verdict-contract", "verdict_contract.contract_tests", "verdict-mock"]
    return "\n".join([*names, *package, "verdict_contract/contract_tests"])


def add_options(parser: pytest.Parser, own_base_url: bool = True) -> None:
    """Register the suite's options; each also reads the environment variable in ENV.

    ``--base-url`` is pytest-base-url's option where that plugin is installed; elsewhere the
    suite declares the same option itself (same flag, variable and ini key), so that neither a
    dependency nor an install adds ``--base-url`` to an integrator's own pytest runs.
    """
    group = parser.getgroup("verdict-contract", "Explain API contract suite (verdict-contract)")
    if own_base_url:
        group.addoption(
            "--base-url",
            metavar="URL",
            dest="base_url",
            default=os.environ.get(BASE_URL_ENV) or None,
            help=f"the Explain API under test (the bundled mock without one) [{BASE_URL_ENV}]",
        )
        parser.addini("base_url", help="the Explain API under test (--base-url wins)")

    for option in OPTIONS:
        name, help = option.name, option.help
        kwargs = {"metavar": option.metavar, "action": option.action, "choices": option.choices}
        read = {key: value for key, value in kwargs.items() if value is not None}
        dest = f"verdict_{name}"
        group.addoption(
            flag(name), dest=dest, default=option.default, help=f"{help} [{option.env}]", **read
        )
        if name not in NO_INI:
            parser.addini(dest, help=f"{help} (ini; {flag(name)} wins)")


@dataclass(frozen=True)
class SuiteConfig:
    """The suite's options after defaults, environment and validation."""

    base_url: str | None
    api_key: Secret | None
    session_ids: tuple[str, ...]
    expired_session_id: str | None
    session_factory: Callable[..., str | None] | None
    probe_rate_limit: int | None
    request_timeout: float
    wait_budget: float = DEFAULT_WAIT_BUDGET
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    check_key_in_url: bool = False
    report: str | None = None
    html_report: str | None = None
    mock_target: bool = False  # the URL answers the mock's control API
    allow_partial: bool = False
    require_every_kind: bool = False
    fail_on_advisory: bool = False
    ca_bundle: str | None = None
    max_rate: RateLimit | None = None  # N requests per SECONDS, for the whole run
    control_token: Secret | None = None  # a verdict-mock target's (its control API's)

    def described(self) -> list[str]:
        """The options of this run as a report shows them (never the key)."""
        if self.base_url is None:
            lines = ["the bundled mock (sessions minted, one per verdict kind)"]
        elif self.mock_target:
            lines = ["a verdict-mock (sessions minted through its control API)"]
        else:
            lines = [f"sessions given: {len(self.session_ids)}"]
        if self.session_factory is not None:
            lines.append("session factory: yes")
        if self.expired_session_id:
            lines.append("expired session: yes")
        if self.probe_rate_limit:
            lines.append(f"{flag('probe_rate_limit')} {self.probe_rate_limit}")
        lines += [
            f"{flag('request_timeout')} {self.request_timeout:g}",
            f"{flag('call_timeout')} {self.call_timeout:g}",
            f"{flag('wait_budget')} {self.wait_budget:g}",
        ]
        if self.max_rate is not None:
            lines.append(f"{flag('max_rate')} {self.max_rate}")
        if self.ca_bundle:
            lines.append(f"{flag('ca_bundle')} {self.ca_bundle}")
        for name in ("check_key_in_url", "allow_partial", "require_every_kind", "fail_on_advisory"):
            if getattr(self, name):
                lines.append(flag(name))
        return lines


def _option(config: pytest.Config, name: str) -> str | None:
    """The option's value: the command line, else its environment variable, else the ini."""
    value = config.getoption(f"verdict_{name}")
    if isinstance(value, list):  # repeatable options
        value = ",".join(value)
    if value in (None, ""):
        value = os.environ.get(ENV[name]) or None
    if value is None and name not in NO_INI:
        ini = config.getini(f"verdict_{name}")
        value = str(ini).strip() or None
    return None if value is None else str(value)


def _bool(config: pytest.Config, name: str) -> bool:
    raw = _option(config, name) or ""
    try:
        return parse_bool(raw)
    except ValueError as exc:
        raise pytest.UsageError(f"{flag(name)} / {ENV[name]}: {exc}") from None


def _read(config: pytest.Config, name: str, read: Callable[[str], T]) -> T | None:
    """An option's value through its reader (core/parsing.py), or None when not given."""
    raw = _option(config, name)
    try:
        return read(raw) if raw is not None else None
    except ValueError as exc:
        raise pytest.UsageError(f"{flag(name)}: {exc}") from None


def _base_url(config: pytest.Config) -> str | None:
    # --base-url, PYTEST_BASE_URL and the base_url ini value: pytest-base-url's or ours.
    value = config.getoption("base_url", None) or config.getini("base_url") or None
    return str(value).rstrip("/") if value else None


def _check_url(url: str, key: str | None) -> None:
    shown = _shown_url(url, key)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise pytest.UsageError(f"--base-url {shown!r} is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        hint = scheme_hint(shown)
        raise pytest.UsageError(f"--base-url {shown!r} is not an http(s) URL with a host{hint}")
    if parts.query or parts.fragment:
        raise pytest.UsageError(f"--base-url {shown!r} must not carry a query or fragment")


def _shown_url(url: str, key: str | None) -> str:
    """A refused URL as its error shows it: no user, password or fragment, query values and the
    key (any 8 of its characters, wherever they are) masked."""
    redactor = Redactor()
    redactor.add(key or "")
    try:
        return redactor.text(masked_url(url))
    except ValueError:  # not even split: nothing of it is shown
        return "…"


def _check_transport(url: str, allow_insecure: bool) -> None:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme == "http" and not is_loopback_address(host) and not allow_insecure:
        local = " (a name is looked up, and a DNS answer may send it elsewhere: 127.0.0.1 is "
        local += "this machine)" if host.endswith(".localhost") else ""
        raise pytest.UsageError(
            f"refusing to send the API key over plain http to {host}{local}: use https, "
            f"or pass {flag('allow_insecure_http')} if this network is trusted"
        )


def _max_rate(config: pytest.Config) -> RateLimit | None:
    """The pace, read as the mock reads ``--rate-limit`` (core/rates.py): a window always given."""
    raw = _option(config, "max_rate")
    if raw is None:
        return None
    try:
        rate = RateLimit.parse(raw)
    except ValueError as error:
        raise pytest.UsageError(f"{flag('max_rate')}: {error}") from None
    if not rate.budget:
        raise pytest.UsageError(
            f"{flag('max_rate')} {raw!r}: N must be above 0 (e.g. 10/1); leave it out for no pace"
        )
    return rate


def _ca_bundle(config: pytest.Config) -> str | None:
    path = _option(config, "ca_bundle")
    if path is not None and not os.path.isfile(path):
        raise pytest.UsageError(f"{flag('ca_bundle')} {path!r} is not a file")
    return path


def _target_kind(config: pytest.Config) -> str:
    kind = (_option(config, "target_kind") or "auto").strip().lower()
    if kind not in TARGET_KINDS:
        raise pytest.UsageError(f"{flag('target_kind')} {kind!r}: choose auto, mock or live")
    return kind


def _load_factory(spec: str) -> Callable[..., str | None]:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise pytest.UsageError(
            f"{flag('session_factory')} {spec!r} must look like module:callable"
        )
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except Exception as exc:  # any import failure is the user's configuration, said in a line
        raise pytest.UsageError(
            f"{flag('session_factory')} {spec!r} cannot be loaded: {type(exc).__name__}: {exc}"
        ) from None
    if not callable(factory):
        raise pytest.UsageError(f"{flag('session_factory')} {spec!r} is not callable")
    return factory  # type: ignore[no-any-return]


def load_config(config: pytest.Config) -> SuiteConfig:
    """Resolve and validate the suite's options; raises pytest.UsageError on a mistake.

    A given URL is reached once, here: a dead, unresolvable, TLS-broken or hung target stops the
    run in one line (within the request timeout) instead of failing every check.
    """
    base_url = _base_url(config)
    insecure = _bool(config, "allow_insecure_http")
    key = _option(config, "api_key")
    token = _option(config, "control_token")
    control_token = None if token is None else Secret(token)
    ids = _option(config, "session_id") or ""
    factory = _option(config, "session_factory")
    timeout = _read(config, "request_timeout", seconds) or DEFAULT_TIMEOUT
    budget = _read(config, "wait_budget", seconds) or DEFAULT_WAIT_BUDGET
    call_timeout = _read(config, "call_timeout", seconds) or max(DEFAULT_CALL_TIMEOUT, timeout)
    probe = _read(config, "probe_rate_limit", positive_int)
    check_key_in_url = _bool(config, "check_key_in_url")
    loaded_factory = _load_factory(factory) if factory else None
    ca_bundle = _ca_bundle(config)
    kind = _target_kind(config)
    max_rate = _max_rate(config)
    mock_target = False
    if base_url is not None:
        _check_url(base_url, key)
        _check_transport(base_url, insecure)
        # Here, not at the top: the hooks import this module in every pytest run.
        from .client import reach

        reached = reach(base_url, timeout, ca_bundle, call_timeout, control_token)
        if reached.cause is not None:
            raise pytest.UsageError(f"cannot reach the target {base_url}: {reached.cause}")
        if reached.token_refused:
            refused = "refused the control token given" if token else "asks for its control token"
            raise pytest.UsageError(
                f"the verdict-mock at {base_url} {refused} (its --control-token): pass "
                f"{flag('control_token')} or set {ENV['control_token']}"
            )
        mock_target = reached.mock
        if kind != "auto":
            mock_target = kind == "mock"
        if key is None and not mock_target:
            raise pytest.UsageError(
                f"the live target {base_url} needs an API key: pass {flag('api_key')} or set "
                f"{ENV['api_key']}"
            )
        if key is not None and not hasattr(config, "workerinput"):  # a mock refuses keys too
            from .preflight import mistake

            given = tuple(i.strip() for i in ids.split(",") if i.strip())
            wrong = mistake(base_url, key, given, timeout, ca_bundle, call_timeout)
            if wrong is not None:
                raise pytest.UsageError(wrong)
        if probe is not None and mock_target:
            from .preflight import probe_short_of_the_limit

            option = f"{flag('probe_rate_limit')} {probe}"
            short = probe_short_of_the_limit(
                base_url, probe, option, timeout, ca_bundle, call_timeout
            )
            if short is not None:
                raise pytest.UsageError(short)
    return SuiteConfig(
        base_url=base_url,
        api_key=Secret(key) if key is not None else None,
        session_ids=tuple(i.strip() for i in ids.split(",") if i.strip()),
        expired_session_id=_option(config, "expired_session_id"),
        session_factory=loaded_factory,
        probe_rate_limit=probe,
        request_timeout=timeout,
        wait_budget=budget,
        call_timeout=call_timeout,
        check_key_in_url=check_key_in_url,
        report=_read(config, "report", output_file),
        html_report=_read(config, "html_report", output_file),
        mock_target=mock_target,
        allow_partial=_bool(config, "allow_partial"),
        require_every_kind=_bool(config, "require_every_kind"),
        fail_on_advisory=_bool(config, "fail_on_advisory"),
        ca_bundle=ca_bundle,
        max_rate=max_rate,
        control_token=control_token,
    )
