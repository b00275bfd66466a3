"""Scenario files: named sessions, keys and a rate limit a team shares, reloaded on change.

A scenario is YAML or JSON::

    api_keys: [team-key-1]
    rate_limit: 100/60
    sessions:
      blocked-user: {verdict: contradicted, conclusive: true}
      flaky: {verdict: refused, script: [503, reset]}
      stale: {age_seconds: 901}
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Final, Generic, TypeVar, cast

from verdict_contract.core.errors import ScenarioError as ScenarioError
from verdict_contract.core.rates import RateLimit

from . import scenariofile
from .scenariofile import ProblemAt
from .sessions import Session, SessionSpec, SpecError, parse_spec
from .specschema import first_problem_at

log = logging.getLogger("mockserver.scenario")

DEMO_SESSIONS: Final[dict[str, dict[str, object]]] = {
    "demo-contradicted": {"verdict": "contradicted", "conclusive": True},
    "demo-contradicted-review": {"verdict": "contradicted", "conclusive": False},
    "demo-refused": {"verdict": "refused"},
    "demo-disputed": {"verdict": "disputed"},
    "demo-uncontradicted": {"verdict": "uncontradicted"},
    "demo-insufficient": {"verdict": "insufficient"},
    "demo-expired": {"verdict": "uncontradicted", "age_seconds": 901},
    "demo-rate-limited": {"always": 429},
    "demo-slow": {"verdict": "disputed", "always": {"delay_ms": 3000}},
    "demo-malformed": {"always": "malformed"},
}
"""Sessions served with no options, so ``curl`` works straight after start (docs/mock.md)."""


@dataclass(frozen=True)
class Scenario:
    sessions: Mapping[str, Session] = field(default_factory=dict)
    api_keys: tuple[str, ...] | None = None
    rate_limit: RateLimit | None = None


def named_sessions(specs: Mapping[str, SessionSpec], loaded_at: float) -> dict[str, Session]:
    """Turn named specs into sessions; an age counts back from ``loaded_at``."""
    return {
        name: Session(
            name,
            spec,
            None if spec.age_seconds is None else loaded_at - spec.age_seconds,
            scripted=bool(spec.script),
        )
        for name, spec in specs.items()
    }


@cache  # parsed once: a reset per in-process test re-parsed them, 33% of it (bench_inprocess)
def _demo_specs() -> dict[str, SessionSpec]:
    return {name: parse_spec(raw, name) for name, raw in DEMO_SESSIONS.items()}


def demo_sessions(loaded_at: float) -> dict[str, Session]:
    return named_sessions(_demo_specs(), loaded_at)


def parse_scenario(raw: object, loaded_at: float) -> Scenario:
    """Validate decoded scenario data; raises ScenarioError naming the first problem."""
    problem = first_problem_at(raw)  # the schema: every key and every session's fields
    if problem is not None:
        raise ProblemAt(*problem)
    raw = cast(Mapping[str, Any], raw)
    keys = raw.get("api_keys")
    limit = raw.get("rate_limit")
    if limit is True:
        raise ProblemAt(
            "rate_limit: true (as YAML reads on, yes and true) is not a rate: "
            "write REQUESTS/SECONDS (e.g. 600/60), or off",
            ("rate_limit",),
        )
    if limit is False:  # YAML 1.1 reads a bare `off` (or `no`) as false
        limit = "off"
    try:
        rate_limit = RateLimit.parse(str(limit)) if limit is not None else None
    except ValueError as exc:
        raise ProblemAt(f"rate_limit: {exc}", ("rate_limit",)) from None
    specs = {}
    for name, spec in raw.get("sessions", {}).items():
        if name.encode("utf-8", "replace").decode() != name:  # a lone surrogate, from JSON
            raise ProblemAt(f"session id {name!r} must be valid Unicode text", ("sessions",))
        try:
            specs[name] = parse_spec(spec if spec is not None else {}, f"sessions.{name}")
        except SpecError as exc:
            raise ProblemAt(str(exc), ("sessions", name)) from None
    return Scenario(named_sessions(specs, loaded_at), tuple(keys) if keys else None, rate_limit)


def load_scenario(path: Path) -> Scenario:
    """Read and validate a scenario file (YAML, or JSON by its suffix)."""
    return scenariofile.load(path, lambda raw: parse_scenario(raw, time.time()))


Loaded = TypeVar("Loaded")


@dataclass
class FileWatcher(Generic[Loaded]):
    """Polls a file (a scenario, the tenants) on its own thread and calls ``apply`` with each
    valid new version; an invalid edit is logged and ignored (the last good version stays), and
    ``report`` hears the problem, or None once a version is applied (``/_mock/health``)."""

    path: Path
    load: Callable[[Path], Loaded]
    apply: Callable[[Loaded], None]
    name: str = "scenario"
    interval: float = 1.0
    report: Callable[[str | None], None] = lambda problem: None
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _due: threading.Event = field(default_factory=threading.Event, init=False)  # or stopping
    _seen: tuple[float, int] | None = field(default=None, init=False)

    def _stamp(self) -> tuple[float, int] | None:
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return (stat.st_mtime, stat.st_size)

    def reload(self) -> bool:
        """Load the file now; return whether the new version was applied."""
        self._seen = self._stamp()
        try:
            self.apply(self.load(self.path))
        except ScenarioError as exc:
            log.error("%s not reloaded, keeping the previous one: %s", self.name, exc)
            self.report(str(exc))
            return False
        log.info("%s reloaded from %s", self.name, self.path)
        self.report(None)
        return True

    def start(self) -> None:
        self._seen = self._stamp()
        watcher = f"{self.name.replace(' ', '-')}-watcher"
        threading.Thread(target=self._run, name=watcher, daemon=True).start()

    def request_reload(self) -> None:
        """Have the watcher's thread reload the file soon (SIGHUP): returns at once."""
        self._due.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            due = self._due.wait(self.interval)
            self._due.clear()
            if self._stop.is_set():
                return
            if due or self._stamp() != self._seen:
                try:
                    self.reload()
                except Exception:  # keep watching whatever one reload did
                    log.exception("%s reload failed; keeping the previous one", self.name)

    def stop(self) -> None:
        self._stop.set()
        self._due.set()
