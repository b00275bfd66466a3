"""The state one mock server owns: keys, sessions, and the store of its per-call state (rate-limit
windows, journal, scripts, clock offset, expiry marks, mint counter): this process's memory by
default, or a store several processes share (``--state``, redisstate.py)."""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from verdict_contract.core.errors import SettingsError
from verdict_contract.core.extras import require_extra
from verdict_contract.core.rates import RateLimit
from verdict_contract.core.redact import KeyFinder, Redactor, secret_index, sent_credentials
from verdict_contract.core.spec import VERDICTS, VerdictKind

from .model.generate import VerdictGenerator
from .model.scenario import Scenario, ScenarioError, demo_sessions, load_scenario
from .model.scripts import admits, script_bytes
from .model.sessions import Session, SessionCodec, SessionSpec, SpecError, Step
from .model.tenants import OPERATOR, Tenant, load_tenants
from .model.traffic import Traffic
from .settings import DEFAULT_API_KEY, Settings, env_var
from .store.backend import StateUnavailable, secrets_of
from .store.primitives import MemoryStore, Store

if TYPE_CHECKING:
    from .store.redisstate import RedisStore

log = logging.getLogger("mockserver.state")

READ_CACHE_SIZE = 4096
"""Decoded session ids remembered (ids are at most 256 characters: a few MB at most)."""


def masks_for(keys: KeyFinder, authorization: str | None) -> Callable[[str], bool]:
    """What a request's entry and log line mask: a text holding a part of one of ``keys``, or
    of the credential it sent (a key of this mock or not: a client's secret all the same; as
    sent, not encoded: the client wrote those forms itself)."""
    sent = [each.encode("utf-8", "surrogateescape") for each in sent_credentials(authorization)]
    theirs = KeyFinder.of(sent, encoded=False)
    return (lambda text: keys.finds(text) or theirs.finds(text)) if sent else keys.finds


def mock_time(real: float, offset: float) -> float:
    """The mock's clock: the host's time plus the ``offset`` its ``advance`` calls moved."""
    return real + offset


# One object per id, not one per request (--row any-id: 119k instructions, 204k without)
@lru_cache(maxsize=READ_CACHE_SIZE)
def _any_session(session_id: str) -> Session:
    """The session ``--accept-any-session`` serves for an unknown id (``<verdict>-...`` picks
    the verdict)."""
    kind = session_id.partition("-")[0]
    verdict: VerdictKind | None = next((v for v in VERDICTS if v == kind), None)
    return Session(session_id, SessionSpec(verdict=verdict), None)


class ClockMove(NamedTuple):
    """One ``advance(seconds)`` of the mock's clock, at a real time."""

    at: float
    seconds: float


def _sleep(seconds: float) -> None:
    time.sleep(seconds)  # looked up at each call, so tests may patch time.sleep


@dataclass
class MockState:
    settings: Settings
    tenant: Tenant | None = None
    """The team this state is of (``--tenants``); None: the operator's, the mock's own."""
    operator: MockState | None = None
    """A tenant's: the operator's state (whose Redis connections its store uses, whose list of
    every tenant's keys its journal masks)."""
    codec: SessionCodec = field(init=False)
    generator: VerdictGenerator = field(init=False)
    limit: RateLimit = field(init=False)
    """The rate limit in force (the scenario's, else the settings')."""
    scenario: Scenario = field(default_factory=Scenario, init=False)
    key_bytes: tuple[bytes, ...] = field(default=(), init=False)
    """The API keys, as :func:`secret_index` takes them."""
    named: dict[str, Session] = field(default_factory=dict, init=False)
    """The named sessions: the demo ones and the scenario's."""
    delay: Callable[[float], None] = field(default_factory=lambda: _sleep, init=False)
    """How a scripted delay waits; in-process transports replace it (testing/inprocess.py)."""
    _apply_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    store: Store = field(init=False)
    """Where the per-call state lives: :attr:`memory`, or :attr:`shared`."""
    memory: MemoryStore = field(init=False)
    """The per-call state in this process (unused with a shared store)."""
    shared: RedisStore | None = field(default=None, init=False)
    """A store shared with other processes (``--state``); None: this process's memory."""
    offset_read: float = field(default=0.0, init=False)
    """The store's clock offset as last read: a hit is counted on it (primitives.Ask.key)."""
    _read: Callable[[str], Session | None] = field(init=False)
    traffic: Traffic = field(default_factory=Traffic, init=False)
    """What the async server answered, counted on its loop (``/_mock/metrics`` reads it)."""
    scenario_problem: str | None = field(default=None, init=False)
    """Why the last edit of the scenario file was rejected (None once one is applied)."""
    tenants_problem: str | None = field(default=None, init=False)
    """Why the last edit of the tenants file was rejected (None once one is applied)."""
    clock_moves: deque[ClockMove] = field(default_factory=lambda: deque(maxlen=1000), init=False)
    """This process's last 1000 :meth:`advance` calls since the last reset: the journal's real
    times read on the mock's clock (:func:`.coverage.on_mock_clock`)."""
    tenants: dict[str, MockState] = field(default_factory=dict, init=False)
    """The operator's state only: every tenant's state by name, its own first (``--tenants``);
    empty without tenants."""
    _every_key: tuple[bytes, ...] = field(default=(), init=False)
    secrets: tuple[str, ...] = field(default=(), init=False)
    """Every key, token and password journals and logs mask (:meth:`_mask`; never printed)."""
    retired: tuple[str, ...] = field(default=(), init=False)  # tenants' keys and tokens gone
    key_finder: KeyFinder = field(default=KeyFinder(), init=False)  # a part of one, in a text
    redactor: Redactor = field(default_factory=Redactor, init=False)  # a proxy's: masks them
    _key_owners: tuple[MockState, ...] = field(default=(), init=False)  # each key's, in order

    def __post_init__(self) -> None:
        self.codec = SessionCodec(self.signing_secret)
        # A minted id's signature checked once (--row minted: 120k a GET /e with it, 256k without)
        self._read = lru_cache(maxsize=READ_CACHE_SIZE)(self.codec.read)
        self.generator = VerdictGenerator(self.settings.seed)
        self.limit = self.settings.rate_limit
        self.store = self.memory = MemoryStore(self.settings.journal_size)
        if not self.settings.state.is_memory:
            state = f"--state {self.settings.state.label} ({env_var('state')})"
            for package in ("redis", "hiredis"):  # the [redis] extra: one line if missing
                require_extra(package, state)
            from .store.redisstate import RedisStore

            if not self.settings.secret and self.tenant is None:
                log.warning(
                    "--state %s with the default signing secret: anyone can forge this mock's "
                    "session ids and read its Redis keys, and every mock left on defaults "
                    "shares this state. Give the mocks that share it one secret of their own: "
                    "VERDICT_MOCK_SECRET=$(python3 -c 'import secrets; "
                    "print(secrets.token_urlsafe(32))') (or --secret)",
                    self.settings.state.label,
                )

            name = self.settings.state_name
            if self.tenant is not None:  # its own keys, in a slot of its own on a cluster
                name = f"{name}.{self.tenant.name}" if name else self.tenant.name
            self.store = self.shared = RedisStore(
                self.settings.state,
                self.signing_secret,
                self.settings.journal_size,
                ttl=self.settings.state_ttl,
                name=name,
                connections=None if self.operator is None else self.operator.shared,
            )
        if self.settings.scenario is not None:
            self.scenario = load_scenario(self.settings.scenario)
        self.apply(self.scenario)
        if self.shared is not None:
            self._warn_of_drift(self.shared)
        if self.tenant is None and self.settings.tenants is not None:
            if self.settings.proxy_to is not None:
                raise SettingsError(
                    "--tenants with --proxy-to: a proxied /e is the real service's, which has "
                    "no tenants of the mock's; run one mock per team to proxy"
                )
            self.load_tenants(self.read_tenants(self.settings.tenants))

    @property
    def signing_secret(self) -> str:
        """What signs its minted ids and names its Redis keys: a tenant's, of its name and token."""
        secret, tenant = self.settings.signing_secret, self.tenant
        if tenant is None:
            return secret
        own = f"tenant {tenant.name} {tenant.control_token.reveal()}".encode()
        return hmac.new(secret.encode(), own, hashlib.sha256).hexdigest()

    @property
    def tenant_name(self) -> str:
        return OPERATOR if self.tenant is None else self.tenant.name

    def read_tenants(self, path: Path) -> dict[str, Tenant]:  # beside the operator's secrets
        return load_tenants(path, self.api_keys, self.settings.control_token, DEFAULT_API_KEY)

    def load_tenants(self, tenants: dict[str, Tenant]) -> None:
        """Serve these tenants (the tenants file, loaded or reloaded) beside the operator's: one
        kept, with its token, keeps its state (sessions, journal, clock) under the file's keys
        and rate limit; one gone from the file, or given another token, is no longer served."""
        with self._apply_lock:
            states: dict[str, MockState] = {OPERATOR: self}
            for name, tenant in tenants.items():
                state = self.tenants.get(name)
                token = state.tenant.control_token if state and state.tenant else None
                if state is None or token != tenant.control_token:  # a new token: a new state
                    state = MockState(self.settings, tenant, self)
                else:
                    state.tenant = tenant
                    state.apply(state.scenario)
                states[name] = state
            gone = [state for name, state in self.tenants.items() if states.get(name) is not state]
            was, self.tenants = self.secrets, states
            self._index_keys()
            kept = set(self.secrets)  # once, not per secret
            if retired := tuple(secret for secret in was if secret not in kept):
                self.retired = (*self.retired, *retired)  # still masked: stale clients send them
                if (past := len(self.retired) - 1000) > 0:  # the newest 1000 kept; said
                    log.warning("%d keys or tokens of tenants removed long ago unmasked", past)
                    self.retired = self.retired[past:]
                self._index_keys()
        for state in gone:  # no longer served: its connections to Redis go
            state.close()

    def _index_keys(self) -> None:
        """Note whose each key is, for :meth:`tenant_of` (the operator's keys may change with
        its scenario, a tenant's with the tenants file)."""
        states = self.tenants.values()
        self._every_key = tuple(key for state in states for key in state.key_bytes)
        self._key_owners = tuple(state for state in states for _ in state.key_bytes)
        for state in states:
            state._mask()

    def unwritable(self) -> dict[str, StateUnavailable]:
        """Why each store this mock answers from would not take a write now, by tenant (each
        tenant's in its own slot on a cluster: one may be lost while the others are served)."""
        problems = {s.tenant_name: s.store.writable() for s in self.tenants.values() or [self]}
        return {name: problem for name, problem in problems.items() if problem is not None}

    def tenant_of(self, authorization: str | None) -> MockState:
        """The state a ``/e`` call belongs to: its key's tenant's, else this one (compared in
        constant time with every key of every tenant)."""
        key = bearer_token(authorization) if self._key_owners else None
        index = None if key is None else secret_index(key, self._every_key)
        return self if index is None else self._key_owners[index]

    def _mask(self) -> None:
        """Note what journals and logs mask: every tenant's keys (``--tenants``; else this
        state's), every control token, the upstream's key (``--upstream-key``), the Redis's
        password; the default key (public: the banner prints it) whole only."""
        operator = self.operator or self
        tokens = [state.tenant.control_token for state in operator.tenants.values() if state.tenant]
        secrets = [self.settings.upstream_key, self.settings.control_token, *tokens]
        keys = [key.decode() for key in operator._every_key or self.key_bytes]
        shared = [secret.reveal() for secret in secrets if secret is not None]
        self.secrets = (*keys, *shared, *secrets_of(self.settings.state), *operator.retired)
        private = [secret for secret in self.secrets if secret != DEFAULT_API_KEY]
        found = KeyFinder.of(secret.encode() for secret in private)
        self.key_finder = found._replace(whole=(*found.whole, DEFAULT_API_KEY.encode()))
        if self.settings.proxy_to is not None:  # "verdict-mock" (a Server header) is no key's
            self.redactor = Redactor(known="verdict-mock", cuts=False).joined(private)

    def masks(self, authorization: str | None) -> Callable[[str], bool]:
        """What a request's entry and log line mask (:func:`masks_for` of :attr:`key_finder`)."""
        return masks_for(self.key_finder, authorization)

    def _warn_of_drift(self, shared: RedisStore) -> None:
        """Say loudly if the processes sharing this state answer otherwise than this one would:
        another rate limit, lifetime, journal size or set of keys (never the keys themselves)."""
        keys = hashlib.sha256(b"\n".join(sorted(self.key_bytes)) + self.codec.secret.encode())
        answering = {
            "rate_limit": str(self.limit),
            "session_lifetime": repr(self.settings.session_lifetime),
            "journal_size": str(self.settings.journal_size),
            "api_keys": keys.hexdigest()[:16],
        }
        if differ := shared.drift(answering):
            listed = "; ".join(
                f"{name} {differ[name]} there, {answering[name]} here"
                if name != "api_keys"
                else "another set of API keys"
                for name in differ
            )
            log.error(
                "--state %s is shared with processes that answer otherwise: %s. Requests will "
                "be answered differently by process; start every process sharing a state with "
                "the same settings",
                shared.label,
                listed,
                extra={"fields": {"state": shared.label, "differ": sorted(differ)}},
            )

    def apply(self, scenario: Scenario) -> None:
        """Install a (re)loaded scenario: its keys, rate limit and named sessions; a named session
        whose spec did not change keeps what is left of its script (``reset`` restarts all)."""
        with self._apply_lock:  # the file watcher and SIGHUP may reload at once
            self._apply(scenario)
            if self.tenants:
                self._index_keys()
        for state in list(self.tenants.values())[1:]:  # every tenant serves the scenario
            state.apply(scenario)

    def report_tenants(self, problem: str | None) -> None:
        """Note why an edit of the tenants file was rejected, or None once one is applied."""
        self.tenants_problem = problem

    def report_scenario(self, problem: str | None) -> None:
        """Note why a scenario edit was rejected, or None once one is applied (see health)."""
        self.scenario_problem = problem

    def _apply(self, scenario: Scenario, fresh: bool = False) -> None:
        named = demo_sessions(time.time()) if self.settings.demo_sessions else {}
        named.update(scenario.sessions)
        for session in scenario.sessions.values():  # refuse now what could never be served
            try:
                self.generator.verdict(session.id, session.spec)
            except SpecError as exc:
                raise ScenarioError(f"sessions.{session.id}: {exc}") from None
        named_bytes = sum(script_bytes(s.spec.script) for s in named.values())
        if not admits(0, 0, named_bytes, self.store.capacity):  # the rule of every script
            raise ScenarioError(
                f"the scenario's scripts take {named_bytes} bytes; the mock holds at most "
                f"{self.store.capacity} bytes of scripts: shorten them"
            )
        keys = self.tenant.api_keys if self.tenant else scenario.api_keys or self.settings.api_keys
        previous = self.named
        self.scenario = scenario
        self.key_bytes = tuple(k.encode() for k in keys)
        self._mask()
        self.named = named
        own = self.tenant.rate_limit if self.tenant is not None else None
        self.limit = own or scenario.rate_limit or self.settings.rate_limit
        changed = {
            session.id: session.spec.script
            for session in named.values()
            if fresh or session.id not in previous or previous[session.id].spec != session.spec
        }
        changed.update(dict.fromkeys(previous.keys() - named.keys(), ()))  # removed: script goes
        self.store.load_named(changed)

    def reset(self) -> None:
        """Forget journal, counters, scripts and clock changes; named sessions get their scripts."""
        with self._apply_lock:
            self.clock_moves.clear()
            self.store.reset({s.id: s.spec.script for s in self.named.values()})
            self._apply(self.scenario, fresh=True)

    def close(self) -> None:
        """Close its connections to the shared state, its tenants' too (a mock ends in-process)."""
        if self.shared is not None:
            self.shared.close()

    def __repr__(self) -> str:
        # Keys, secret and codec stay out of reprs (pytest -l prints fixtures' locals).
        tenant = "" if self.tenant is None else f", tenant={self.tenant.name!r}"
        return f"MockState(settings={self.settings!r}, state={self.store.label!r}{tenant})"

    @property
    def skew(self) -> float:
        """Seconds the mock's clock is ahead of the real one (:meth:`advance`); reset clears it."""
        return self.store.offset()

    def now(self) -> float:
        """Wall-clock time as the mock sees it (expiry, minting)."""
        return mock_time(time.time(), self.store.offset())

    def advance(self, seconds: float) -> None:
        """Move the mock's clock forward: sessions age, rate-limit windows pass; no sleeping."""
        if not seconds >= 0:
            raise ValueError(f"advance() takes seconds >= 0; got {seconds!r}")
        self.store.advance(seconds)
        self.clock_moves.append(ClockMove(time.time(), seconds))

    def minted_scripts_left(self) -> dict[str, tuple[Step, ...]]:
        """The steps still unused of every minted session's script (every process's, with a
        shared state)."""
        return {i: left for i, left in self.store.scripts_left().items() if i not in self.named}

    @property
    def api_keys(self) -> tuple[str, ...]:
        return tuple(k.decode() for k in self.key_bytes)

    def lookup(self, session_id: str) -> Session | None:
        """Find a session: named, then minted, then (if enabled) any id at all."""
        session = self.named.get(session_id) or self._read(session_id)
        if session is None and self.settings.accept_any_session:
            session = _any_session(session_id)
        return session

    def body(self, session: Session) -> bytes:
        """What ``session`` answers with: its recorded body, or its verdict as JSON."""
        recorded = session.spec.recorded
        return recorded.body if recorded else self.generator.render(session.id, session.spec)

    def mint(self, spec: SessionSpec) -> Session:
        """Mint a session; without a key its body is drawn from (seed, mint number since reset)."""
        if not spec.key:
            spec = replace(spec, key=f"m{self.store.next_mint()}")
        session = self.codec.mint(spec, now=self.now())
        self.generator.verdict(session.id, spec)  # an impossible spec fails now, with 422
        if spec.script:
            self.store.load_script(session.id, spec.script)
        return session


def bearer_token(header: str | None) -> str | None:
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def authorized(state: MockState, authorization: str | None) -> str | None:
    """The request's key if the mock accepts it (compared in constant time), else None."""
    key = bearer_token(authorization)
    return key if key is not None and secret_index(key, state.key_bytes) is not None else None
