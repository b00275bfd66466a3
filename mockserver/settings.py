"""The mock's settings: one dataclass, every field also a CLI flag and a VERDICT_MOCK_* variable."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

from contract_tests.spec import SESSION_LIFETIME_SECONDS
from mockserver.generate import DEFAULT_SEED
from mockserver.ratelimit import RateLimit

DEFAULT_API_KEY: Final = "verdict-mock-local-key"
"""The key the mock accepts when none is configured; for local use only, so printed in full."""

ENV_PREFIX: Final = "VERDICT_MOCK_"


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8080
    threads: int = 8
    api_keys: tuple[str, ...] = (DEFAULT_API_KEY,)
    seed: str = DEFAULT_SEED
    secret: str = ""  # signs minted ids; empty: derived from the seed (fine for local use)
    scenario: Path | None = None
    rate_limit: RateLimit = field(default_factory=lambda: RateLimit(6000, 60.0))
    session_lifetime: float = float(SESSION_LIFETIME_SECONDS)
    log_level: str = "info"
    accept_any_session: bool = False
    control: bool = True
    demo_sessions: bool = True
    journal_size: int = 1000

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port {self.port} is not between 0 and 65535")
        if self.threads < 1 or self.journal_size < 1:
            raise ValueError("threads and journal size must be at least 1")
        if not self.session_lifetime > 0:
            raise ValueError("the session lifetime must be a positive number of seconds")
        if not self.api_keys or not all(self.api_keys):
            raise ValueError("at least one non-empty API key is needed")

    @property
    def signing_secret(self) -> str:
        return self.secret or f"verdict-mock-secret:{self.seed}"

    def with_env(self, environ: Mapping[str, str]) -> Settings:
        """Return these settings overridden by ``VERDICT_MOCK_*`` variables in ``environ``."""
        changes: dict[str, object] = {}
        for name, parse in _ENV_PARSERS.items():
            raw = environ.get(ENV_PREFIX + name.upper())
            if raw is not None and raw != "":
                try:
                    changes[name] = parse(raw)
                except ValueError as exc:
                    raise ValueError(f"{ENV_PREFIX}{name.upper()}: {exc}") from None
        return replace(self, **changes)  # type: ignore[arg-type]


def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{raw!r} is not a boolean (use 1/0, true/false)")


LOG_LEVELS: Final = ("debug", "info", "warning", "error")


def _level(raw: str) -> str:
    if raw.lower() not in LOG_LEVELS:
        raise ValueError(f"{raw!r} is not one of {', '.join(LOG_LEVELS)}")
    return raw.lower()


def _keys(raw: str) -> tuple[str, ...]:
    keys = tuple(k.strip() for k in raw.split(",") if k.strip())
    if not keys:
        raise ValueError("no API key given")
    return keys


_ENV_PARSERS: Final[dict[str, Callable[[str], object]]] = {
    "host": str,
    "port": int,
    "threads": int,
    "api_keys": _keys,
    "seed": str,
    "secret": str,
    "scenario": Path,
    "rate_limit": RateLimit.parse,
    "session_lifetime": float,
    "log_level": _level,
    "accept_any_session": _bool,
    "control": _bool,
    "demo_sessions": _bool,
    "journal_size": int,
}
