"""The state one mock server owns: keys, sessions, limiter, journal and scripts."""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache

from verdict_contract.core.spec import VERDICTS
from verdict_contract.mockserver.generate import VerdictGenerator
from verdict_contract.mockserver.journal import Journal
from verdict_contract.mockserver.ratelimit import RateLimiter
from verdict_contract.mockserver.scenario import (
    Scenario,
    ScenarioError,
    demo_sessions,
    load_scenario,
)
from verdict_contract.mockserver.scripts import ScriptBook, script_bytes
from verdict_contract.mockserver.sessions import Session, SessionCodec, SessionSpec, SpecError
from verdict_contract.mockserver.settings import Settings

READ_CACHE_SIZE = 4096
"""Decoded session ids remembered (ids are at most 256 characters: a few MB at most)."""


def key_in(keys: tuple[bytes, ...], key: str) -> bool:
    """Whether ``key`` is one of ``keys``, compared in constant time (no early exit on a match)."""
    candidate = key.encode("utf-8", "surrogateescape")
    matched = False
    for known in keys:
        matched |= hmac.compare_digest(candidate, known)
    return matched


def _sleep(seconds: float) -> None:
    time.sleep(seconds)  # looked up at each call, so tests may patch time.sleep


@dataclass
class MockState:
    settings: Settings
    codec: SessionCodec = field(init=False)
    generator: VerdictGenerator = field(init=False)
    limiter: RateLimiter = field(init=False)
    journal: Journal = field(init=False)
    scripts: ScriptBook = field(default_factory=ScriptBook, init=False)
    scenario: Scenario = field(default_factory=Scenario, init=False)
    _keys: tuple[bytes, ...] = field(default=(), init=False)
    _named: dict[str, Session] = field(default_factory=dict, init=False)
    delay: Callable[[float], None] = field(default_factory=lambda: _sleep, init=False, repr=False)
    """How a scripted delay waits; in-process transports replace it (see testing.py)."""
    _apply_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    skew: float = field(default=0.0, init=False)
    """Seconds the mock's clock is ahead of the real one (:meth:`advance`); reset clears it."""
    _expired: set[str] = field(default_factory=set, init=False, repr=False)
    _minted: int = field(default=0, init=False, repr=False)
    _mint_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _read: Callable[[str], Session | None] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.codec = SessionCodec(self.settings.signing_secret)
        # A minted id decodes to the same session every time: checking its signature once per
        # id (of the last READ_CACHE_SIZE) keeps minted sessions as fast as named ones.
        self._read = lru_cache(maxsize=READ_CACHE_SIZE)(self.codec.read)
        self.generator = VerdictGenerator(self.settings.seed)
        self.limiter = RateLimiter(self.settings.rate_limit, clock=self.monotonic)
        self.journal = Journal(self.settings.journal_size)
        if self.settings.scenario is not None:
            self.scenario = load_scenario(self.settings.scenario)
        self.apply(self.scenario)

    def apply(self, scenario: Scenario) -> None:
        """Install a (re)loaded scenario: its keys, rate limit and named sessions."""
        with self._apply_lock:  # the file watcher and SIGHUP may reload at once
            self._apply(scenario)

    def _apply(self, scenario: Scenario) -> None:
        named = demo_sessions(time.time()) if self.settings.demo_sessions else {}
        named.update(scenario.sessions)
        for session in scenario.sessions.values():  # refuse now what could never be served
            try:
                self.generator.verdict(session.id, session.spec)
            except SpecError as exc:
                raise ScenarioError(f"sessions.{session.id}: {exc}") from None
        named_bytes = sum(script_bytes(s.spec.script) for s in named.values())
        if named_bytes > self.scripts.capacity:
            raise ScenarioError(
                f"the scenario's scripts take {named_bytes} bytes; the mock holds at most "
                f"{self.scripts.capacity} bytes of scripts: shorten them"
            )
        keys = scenario.api_keys or self.settings.api_keys
        self.scenario = scenario
        self._keys = tuple(k.encode() for k in keys)
        self._named = named
        self.limiter.relimit(scenario.rate_limit or self.settings.rate_limit)
        for session in named.values():  # named sessions get their scripts afresh
            self.scripts.load(session.id, session.spec.script, force=True)

    def reset(self) -> None:
        """Forget journal, counters, scripts and clock changes; named sessions get their scripts."""
        self.journal.clear()
        self.scripts.clear()
        self.skew = 0.0
        with self._mint_lock:
            self._minted = 0
        self._expired.clear()
        self.limiter.reset()
        self.apply(self.scenario)

    def __repr__(self) -> str:
        # Keys, secret and codec stay out of reprs (pytest -l prints fixtures' locals).
        return f"MockState(settings={self.settings!r}, journal_entries={len(self.journal)})"

    def now(self) -> float:
        """Wall-clock time as the mock sees it (expiry, minting)."""
        return time.time() + self.skew

    def monotonic(self) -> float:
        """Monotonic time as the mock sees it (the rate limiter's windows)."""
        return time.monotonic() + self.skew

    def advance(self, seconds: float) -> None:
        """Move the mock's clock forward: sessions age, rate-limit windows pass; no sleeping."""
        if not seconds >= 0:
            raise ValueError(f"advance() takes seconds >= 0; got {seconds!r}")
        self.skew += seconds

    def expire(self, session_id: str) -> None:
        """Make one session answer 404 as expired from now on (until reset)."""
        self._expired.add(session_id)

    def is_expired(self, session: Session) -> bool:
        return session.id in self._expired or session.expired(
            self.now(), self.settings.session_lifetime
        )

    @property
    def api_keys(self) -> tuple[str, ...]:
        return tuple(k.decode() for k in self._keys)

    def key_ok(self, key: str) -> bool:
        """Compare against every key in constant time (no early exit on a match)."""
        return key_in(self._keys, key)

    @property
    def key_bytes(self) -> tuple[bytes, ...]:
        """The keys, as :func:`key_in` takes them (a cache may be keyed on this tuple)."""
        return self._keys

    @property
    def named(self) -> dict[str, Session]:
        return self._named

    def lookup(self, session_id: str) -> Session | None:
        """Find a session: named, then minted, then (if enabled) any id at all."""
        session = self._named.get(session_id) or self._read(session_id)
        if session is None and self.settings.accept_any_session:
            kind = session_id.partition("-")[0]
            verdict = next((v for v in VERDICTS if v == kind), None)
            session = Session(session_id, SessionSpec(verdict=verdict), None)
        return session

    def mint(self, spec: SessionSpec) -> Session:
        """Mint a session; without a key its body is drawn from (seed, mint number since reset)."""
        if not spec.key:
            with self._mint_lock:  # two mints at once must not share a number (and a body)
                self._minted += 1
                number = self._minted
            spec = replace(spec, key=f"m{number}")
        session = self.codec.mint(spec, now=self.now())
        self.generator.verdict(session.id, spec)  # an impossible spec fails now, with 422
        self.scripts.load(session.id, spec.script)
        return session
