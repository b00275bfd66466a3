"""The mock's settings, each declared once: its type, default, help, parser and flag on its field.

The CLI flags (:mod:`.cli`), the ``VERDICT_MOCK_*`` variables (:func:`from_env`) and the table
in docs/mock.md (generated and kept true by a test) all derive from these fields.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import Field, dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from types import UnionType
from typing import Any, Final, get_args, get_origin, get_type_hints
from urllib.parse import urlsplit

from verdict_contract.core.errors import SettingsError
from verdict_contract.core.parsing import host_name, one_of, parse_bool, port, positive_int, seconds
from verdict_contract.core.rates import RateLimit
from verdict_contract.core.redact import KeyFinder, Secret, mask
from verdict_contract.core.spec import SESSION_LIFETIME_SECONDS
from verdict_contract.core.suggest import scheme_hint

from .model.generate import DEFAULT_SEED
from .model.scenariofile import MAX_SCENARIO_BYTES
from .store.backend import DEFAULT_STATE_TTL, STATE_NAME, StateURL

DEFAULT_API_KEY: Final = "verdict-mock-local-key"
"""The key the mock accepts when none is configured; for local use only, so printed in full."""

ENV_PREFIX: Final = "VERDICT_MOCK_"
LOG_LEVELS: Final = ("debug", "info", "warning", "error")
LOG_FORMATS: Final = ("text", "json")  # json: one object a line, for a log collector
SERVERS: Final = ("async",)
"""``async``: the mock's own server (asyncserver.py); docs/servers.md says why it is the one."""


@dataclass(frozen=True)
class Option:
    """How one setting is read from people: help text, parser, and how its default reads."""

    help: str
    parse: Callable[[str], Any]
    metavar: str | None = None
    documented_default: str | None = None  # the default as documented, when str(default) is not it
    needs: str | None = None  # the setting this one means nothing without (checked once merged)
    repeatable: bool = False  # a flag given once per value; its variable is comma-separated

    def flag(self, name: str, default: object) -> str:
        """The command-line flag: ``--name``, or ``--no-name`` for a setting that is on."""
        dashed = name.replace("_", "-")
        if default is True:
            return f"--no-{dashed}"
        return f"--{dashed.removesuffix('s')}" if self.repeatable else f"--{dashed}"


def _setting(
    default: Any,
    help: str,
    parse: Callable[[str], Any] = parse_bool,
    metavar: str | None = None,
    documented_default: str | None = None,
    needs: str | None = None,
) -> Any:
    """One setting's field: ``parse`` reads one value (on/off by default), a tuple default makes
    it repeatable; the field's annotation is the type ``Settings(...)`` checks."""
    option = Option(help, parse, metavar, documented_default, needs, isinstance(default, tuple))
    return field(default=default, metadata={"option": option})


def _key(raw: str, what: str = "API key") -> str:
    if not raw.strip():
        raise ValueError(f"a non-empty {what} is needed")
    return raw.strip()


def _token(raw: str) -> Secret:
    return Secret(_key(raw, "control token"))


def _proxy_address(raw: str) -> str:
    """An address or network whose X-Forwarded-For is trusted (``*``: any)."""
    raw = raw.strip()
    if raw != "*":
        try:
            ipaddress.ip_network(raw, strict=False)
        except ValueError:
            raise ValueError(f"{raw[:60]!r} is not an IP address, a network or *") from None
    return raw


def _upstream(raw: str) -> str:
    parts = urlsplit(raw.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        shown = f"…@{raw.rpartition('@')[2]}" if "@" in raw else raw  # no user nor password
        hint = scheme_hint(shown, otherwise=" such as https://staging.example")
        raise ValueError(f"{shown!r} is not an http(s) URL{hint}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(
            "give the base URL only: no ?query, #fragment or credentials (see --upstream-key)"
        )
    return raw.strip().rstrip("/")


@dataclass(frozen=True)
class Settings:
    """Everything a mock server is configured by (the defaults serve the demo sessions)."""

    host: str = _setting("127.0.0.1", "address to bind", str, "HOST")
    port: int = _setting(8080, "port (0 picks a free one)", port, "PORT")
    threads: int = _setting(8, "worker threads", positive_int, "N")
    api_keys: tuple[str, ...] = _setting((DEFAULT_API_KEY,), "accepted API key", _key, "KEY")
    seed: str = _setting(DEFAULT_SEED, "seed of the generated verdicts", str, "SEED")
    secret: str = _setting(
        "", "secret that signs minted session ids", str, "SECRET", "derived from the seed"
    )
    scenario: Path | None = _setting(
        None, "YAML or JSON scenario, reloaded on change or SIGHUP", Path, "FILE"
    )
    rate_limit: RateLimit = _setting(
        RateLimit(6000, 60.0),
        "per-key budget: N requests per SECONDS (10/1, 600/60), or off",
        RateLimit.parse,
        "N/SECONDS",
    )
    session_lifetime: float = _setting(
        float(SESSION_LIFETIME_SECONDS), "session lifetime", seconds, "SECONDS"
    )
    log_level: str = _setting(
        "info", f"log level ({', '.join(LOG_LEVELS)})", one_of(*LOG_LEVELS), "LEVEL"
    )
    log_format: str = _setting(
        "text", "log lines as text, or json (one object a line)", one_of(*LOG_FORMATS), "FORMAT"
    )
    journal_size: int = _setting(1000, "requests kept in the journal", positive_int, "N")
    accept_any_session: bool = _setting(False, "serve a verdict for every unknown id (hides 404s)")
    control: bool = _setting(True, "the /_mock/ control API")
    demo_sessions: bool = _setting(True, "the demo-* sessions")
    proxy_to: str | None = _setting(
        None, "forward GET /e to this service and check its answers", _upstream, "URL", "off"
    )
    upstream_key: Secret | None = _setting(
        None,
        "API key the proxy sends upstream (default: the client's own header)",
        Secret,
        "KEY",
        needs="proxy_to",
    )
    proxy_strict: bool = _setting(
        False,
        "answer 502 when the upstream breaks the contract, sends a body that is not JSON or "
        "reflects the key it was sent",
        needs="proxy_to",
    )
    proxy_timeout: float = _setting(10.0, "longest upstream wait, then 504", seconds, "SECONDS")
    record: Path | None = _setting(
        None, "write the proxied sessions to this scenario file", Path, "FILE", needs="proxy_to"
    )
    record_max_bytes: int = _setting(
        MAX_SCENARIO_BYTES,
        "largest recording, in bytes (at most what --scenario reads); sessions beyond are "
        "refused, journaled and logged",
        positive_int,
        "BYTES",
    )
    control_token: Secret | None = _setting(
        None, "token every control call must send as X-Mock-Token", _token, "TOKEN"
    )
    allowed_hosts: tuple[str, ...] = _setting(
        (), "Host name the control API answers besides loopback names", host_name, "NAME"
    )
    forwarded_allow_ips: tuple[str, ...] = _setting(
        (),
        "address or network of a proxy whose X-Forwarded-For names the client in the access log "
        "(* for any)",
        _proxy_address,
        "IP",
    )
    max_body: int = _setting(
        1024 * 1024, "largest request body accepted, in bytes (413 beyond)", positive_int, "BYTES"
    )
    max_connections: int = _setting(
        1000, "connections held at once (past it, 503 unless one sits idle 2 s)", positive_int, "N"
    )
    access_log: bool = _setting(False, "log one line per request (common log format, keys masked)")
    server: str = _setting(
        "async",
        f"HTTP server ({', '.join(SERVERS)}; see docs/servers.md)",
        one_of(*SERVERS),
        metavar="NAME",
    )
    state: StateURL = _setting(
        StateURL("memory"),
        "where limiter, journal, scripts and clock live: memory, or redis://HOST:PORT/DB (a "
        "Redis Cluster too; redis+sentinel://HOST:PORT/SERVICE for Sentinel) shared by every "
        "mock with the same secret",
        StateURL.parse,
        "URL",
    )
    workers: int = _setting(
        1, "processes sharing the port (SO_REUSEPORT); more than 1 needs --state", positive_int, "N"
    )
    grace_seconds: float = _setting(
        5.0, "on SIGTERM, how long requests under way may take to finish", seconds, "SECONDS"
    )
    state_ttl: float = _setting(
        float(DEFAULT_STATE_TTL),
        "seconds an idle mock's keys stay in Redis (--state); each request or control call "
        "renews them",
        seconds,
        "SECONDS",
        "86400 (1 day)",
    )
    state_name: str | None = _setting(
        None,
        "name shown in the mock's Redis keys, verdict-mock:{NAME.<digest>}:… (letters, digits, "
        ". _ -); without it: the digest alone",
        str,
        "NAME",
    )
    tenants: Path | None = _setting(
        None,
        "YAML or JSON file of the teams sharing this mock, each with its own sessions, clock, "
        "journal and rate limit (docs/servers.md); reloaded on change or SIGHUP",
        Path,
        "FILE",
        needs="control_token",
    )

    @classmethod
    def parse(cls, **raw: str | Sequence[str]) -> Settings:
        """Settings from strings, each read as its flag reads it (a repeatable one: any sequence
        of strings), then checked as ``Settings(...)`` is: ``Settings.parse(rate_limit="2/60")``."""
        return cls(**raw)  # type: ignore[arg-type]  # __post_init__ reads the strings

    def __post_init__(self) -> None:
        for item in fields(self):  # a string is read as its variable reads it
            object.__setattr__(self, item.name, _checked(item, getattr(self, item.name)))
        if not self.api_keys or not all(self.api_keys):
            raise SettingsError("at least one non-empty API key is needed")
        for index, key in enumerate(self.api_keys):
            if not _SENDABLE_KEY.fullmatch(key):
                raise SettingsError(
                    f"Settings(api_keys=...): key #{index + 1} ({mask(key)}) cannot be sent in an "
                    "Authorization header (received: spaces at an end or characters outside "
                    "printable ASCII; documented: a Bearer token), so every request would be a 401"
                )
        for name, option, _ in options():
            needed = option.needs
            if needed and _is_set(getattr(self, name)) and not _is_set(getattr(self, needed)):
                raise SettingsError(f"{describe(name)} needs {describe(needed)}: give both")
        if not 0 < self.record_max_bytes <= MAX_SCENARIO_BYTES:
            raise SettingsError(
                f"--record-max-bytes must be from 1 to {MAX_SCENARIO_BYTES}, the most --scenario "
                "reads (a larger recording could not be replayed)"
            )
        if self.upstream_key is not None and not self.upstream_key.reveal().strip():
            raise SettingsError("the upstream key is empty")
        if problem := state_problem(self):  # --state and the settings that go with it
            raise SettingsError(problem)

    def __repr__(self) -> str:
        # Keys and the signing secret never print (pytest -l shows fixtures' locals).
        printed = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _UNPRINTED}
        keys = ", ".join(mask(k) for k in self.api_keys)
        secret = ", secret=…" if self.secret else ""
        values = ", ".join(f"{name}={value!r}" for name, value in printed.items())
        return f"Settings({values}, api_keys=({keys}){secret})"

    @property
    def signing_secret(self) -> str:
        return self.secret or f"verdict-mock-secret:{self.seed}"

    def with_env(self, environ: Mapping[str, str]) -> Settings:
        """These settings overridden by the ``VERDICT_MOCK_*`` variables in ``environ``."""
        return replace(self, **from_env(environ))  # type: ignore[arg-type]


def from_env(environ: Mapping[str, str]) -> dict[str, object]:
    """The settings the ``VERDICT_MOCK_*`` variables give, parsed but not yet checked together."""
    changes: dict[str, object] = {}
    for name, option, _ in options():
        if not (raw := environ.get(env_var(name))):
            continue
        try:
            if option.repeatable:
                values = [v for v in raw.split(",") if v.strip()]
                if not values:
                    raise ValueError("no value given (a comma-separated list)")
                changes[name] = tuple(option.parse(v) for v in values)
            else:
                changes[name] = option.parse(raw)
        except ValueError as exc:
            raise SettingsError(f"{env_var(name)}: {exc}") from None
    return changes


def _is_set(value: object) -> bool:
    return value is not None and value is not False and value != ()


def describe(name: str) -> str:
    """A setting as people give it: ``--record (VERDICT_MOCK_RECORD)``."""
    option, default = next((o, d) for n, o, d in options() if n == name)
    return f"{option.flag(name, default)} ({env_var(name)})"


_CHOICES: Final = {"server": SERVERS, "log_level": LOG_LEVELS, "log_format": LOG_FORMATS}
"""The settings read with ``one_of``: a value given as it is is checked too."""

_UNPRINTED: Final = ("api_keys", "secret")
"""Settings whose values never print: ``repr`` masks the keys, and a refused value shows as …"""

_SENDABLE_KEY = re.compile(r"[!-~]([ -~]*[!-~])?")
"""A key a client can send as ``Bearer <key>``: printable ASCII, no space at either end."""


def __tracebackhide__(excinfo: Any) -> bool:
    """pytest leaves out a refused setting's frames here: their locals hold the keys (``-l``)."""
    return excinfo is not None and bool(excinfo.errisinstance(SettingsError))


@cache
def _kinds() -> dict[str, tuple[Any, bool]]:
    """Each setting's type and whether it may be None, read from the annotations."""
    kinds: dict[str, tuple[Any, bool]] = {}
    for name, hint in get_type_hints(Settings).items():
        optional = isinstance(hint, UnionType) and type(None) in get_args(hint)
        (kind,) = [a for a in get_args(hint) if a is not type(None)] if optional else [hint]
        kinds[name] = (get_origin(kind) or kind, optional)
    return kinds


def _checked(item: Field[Any], raw: object) -> object:
    """``raw`` as the setting holds it, a string read as its variable reads it; a value of the
    wrong type is refused now, not on every request."""
    kind, optional = _kinds()[item.name]
    try:
        if raw is None and optional:
            return raw
        if kind is tuple:
            value = (raw,) if isinstance(raw, str) else raw
            if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
                raise TypeError("a sequence of strings")
            for one in value:  # each checked as its flag reads it (the value kept as given)
                item.metadata["option"].parse(one)
            return tuple(value)
        value = raw
        if isinstance(raw, str) and kind is not str:
            value = item.metadata["option"].parse(raw)
        accepted = (int, float) if kind is float else kind
        if not isinstance(value, accepted) or (isinstance(value, bool) and kind is not bool):
            name_of_kind = "a number" if kind is float else kind.__name__
            raise TypeError(f"{name_of_kind}, or a string as {env_var(item.name)} takes it")
        if kind in (int, float) and not isinstance(raw, str):  # bounded as its flag is
            item.metadata["option"].parse(repr(value))
        if value not in _CHOICES.get(item.name, (value,)):
            raise ValueError(f"one of {', '.join(_CHOICES[item.name])}")
    except (TypeError, ValueError) as exc:
        printed = "…" if item.name in _UNPRINTED or kind is Secret else repr(raw)[:60]
        raise SettingsError(
            f"Settings({item.name}=...): received {printed}; documented: {exc}"
        ) from None
    return value


def env_var(name: str) -> str:
    return ENV_PREFIX + name.upper()


def options() -> Iterator[tuple[str, Option, object]]:
    """``(name, option, default)`` of every setting, in declaration order."""
    for item in fields(Settings):
        yield item.name, item.metadata["option"], item.default


def documented_default(option: Option, default: object) -> str:
    if option.documented_default is not None:
        return option.documented_default
    if isinstance(default, bool):
        return "on" if default else "off"
    if default is None or default == ():
        return "none"
    if isinstance(default, tuple):
        return ", ".join(map(str, default))
    if isinstance(default, float) and default.is_integer():
        return str(int(default))  # 900, as the spec writes it
    return str(default)


def state_problem(settings: Settings) -> str | None:
    """What is wrong with --state and the settings that go with it, if anything (never a
    secret): what several processes can share exactly (README: Which server)."""
    workers = settings.workers
    if workers > 1 and settings.state.is_memory:
        return (
            f"--workers {workers} needs --state redis://HOST:PORT/DB: in memory, each process "
            "would keep its own rate limit, scripts and journal (a 10/60 limit would let up to "
            f"{10 * workers} through)"
        )
    if workers > 1 and not hasattr(socket, "SO_REUSEPORT"):
        return "--workers needs SO_REUSEPORT, which this OS does not have"
    if not settings.state.is_memory and settings.proxy_to is not None:
        return "--proxy-to journals in its own process: it does not take --state"
    name = settings.state_name
    secrets = [s for s in (settings.secret, *settings.api_keys) if s != DEFAULT_API_KEY]
    holds = KeyFinder.of(s.encode() for s in secrets if len(s) >= 4).finds  # 8 in a row
    if name is not None and (holds(name) or settings.signing_secret in name):
        return (  # the name is in every key: anyone who lists the Redis's keys reads it
            "Settings(state_name=...): the name holds the secret or an API key; documented: a "
            "name that anyone who lists the Redis's keys may read"
        )
    if name is not None and not STATE_NAME.fullmatch(name):
        return (
            f"Settings(state_name=...): received {name[:70]!r}; documented: 1 to 64 letters, "
            "digits, '.', '_' or '-'"
        )
    return None
