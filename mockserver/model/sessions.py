"""Sessions of the mock: what a session id stands for, and ids that carry it, signed: a minted
id is an itsdangerous token holding the session's spec and collection time, so every worker
(and a restart with the same secret) serves it identically without a shared store."""

from __future__ import annotations

import json
import math
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, NotRequired, TypeAlias, TypedDict, cast
from urllib.parse import urlencode

from itsdangerous import BadData, URLSafeSerializer

from verdict_contract.core.errors import SpecError as SpecError
from verdict_contract.core.spec import ENDPOINT_PATH, SESSION_PARAM, VerdictKind, never_conclusive
from verdict_contract.core.suggest import closest

from .answer import DOCUMENTED_FIELDS
from .recorded import Recorded, parse_recorded
from .specschema import first_problem_at, limits

_LIMITS = limits()  # stated once, in schema/mock-scenario.schema.json

MAX_SESSION_ID_LENGTH: Final = _LIMITS.max_id  # a longer ``n`` is a 400 before any lookup
SCRIPT_STATUSES: Final = _LIMITS.statuses  # what a script may answer with bare
FAULTS: Final = _LIMITS.faults  # a reset, a cut body, a body that is not JSON
MAX_DELAY_MS: Final = _LIMITS.max_delay_ms

FaultName = Literal["reset", "truncated", "malformed"]
"""A scripted connection fault, for type checkers (a test keeps it equal to :data:`FAULTS`)."""
ScriptStatus = Literal[401, 404, 429, 500, 503]
"""A status a script may name bare (:data:`SCRIPT_STATUSES`); others go in a :class:`StatusStep`."""


class DelayStep(TypedDict):
    """``{"delay_ms": 2000}``: the session's own answer, that late."""

    delay_ms: int


class StatusStep(TypedDict):
    """``{"status": 503, "headers": {...}, "delay_ms": 500}`` (what :func:`reply` builds)."""

    status: int
    headers: NotRequired[Mapping[str, str]]
    delay_ms: NotRequired[int]


@dataclass(frozen=True)
class Step:
    """One scripted answer: a status (after a delay, if given), a connection fault, or a delay
    before the normal answer."""

    status: int | None = None
    fault: FaultName | None = None
    delay_ms: int = 0
    headers: tuple[tuple[str, str], ...] | None = None
    """Headers of a scripted status, replacing the usual ones (``Retry-After: 1`` of a 429...);
    None sends the usual ones, ``()`` none (a 429 without ``Retry-After``)."""

    def to_json(self) -> object:
        if self.status is None:
            return self.fault if self.fault is not None else {"delay_ms": self.delay_ms}
        if self.headers is None and not self.delay_ms and self.status in SCRIPT_STATUSES:
            return self.status
        step: dict[str, object] = {"status": self.status}
        if self.headers is not None:
            step["headers"] = dict(self.headers)
        if self.delay_ms:
            step["delay_ms"] = self.delay_ms
        return step


ScriptStep: TypeAlias = ScriptStatus | FaultName | DelayStep | StatusStep | Step
"""A script entry as a test writes it: ``429``, ``"reset"``, ``{"delay_ms": 2000}``,
``reply(...)`` or a :class:`Step`; a misspelt one (``"rest"``, ``{"dleay_ms": 200}``) is a type
error in a type-checked test, and a 422 (a :class:`SpecError`) at run time."""


_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")
_HEADER_VALUE = re.compile(r"[\t -~]{0,1024}")
FRAMING_HEADERS: Final = frozenset(
    {"content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer"}
)
"""Headers that frame the connection: the server owns them, a script may not set them."""


def parse_step(raw: object, where: str) -> Step:
    """Parse one script entry: ``429``, ``"reset"``, ``{"delay_ms": 2000}`` or ``{"status": 429,
    "headers": {...}, "delay_ms": 500}``; the schema checks all but each header."""
    problem = first_problem_at(raw, where, "step")
    if problem is not None:
        raise SpecError(problem[0])
    if not isinstance(raw, Mapping):
        return Step(status=raw) if isinstance(raw, int) else Step(fault=cast(FaultName, raw))
    headers = raw.get("headers")  # None: the status's usual headers
    for name, value in (headers or {}).items():
        if not (isinstance(name, str) and _HEADER_NAME.fullmatch(name)):
            raise SpecError(f"{where}.headers: {str(name)[:40]!r} is not a header name")
        if name.lower() in FRAMING_HEADERS:
            raise SpecError(
                f"{where}.headers: {name!r} frames the connection and is set by the server; "
                "a script may not set it"
            )
        if not (isinstance(value, str) and _HEADER_VALUE.fullmatch(value)):
            raise SpecError(
                f"{where}.headers[{name!r}] must be a string of printable characters, "
                "no line breaks"
            )
    return Step(
        status=raw.get("status"),
        delay_ms=raw.get("delay_ms", 0),
        headers=None if headers is None else tuple(headers.items()),
    )


@dataclass(frozen=True)
class SessionSpec:
    """What the caller asked of a session; unset fields are chosen by the generator."""

    verdict: VerdictKind | None = None
    conclusive: bool | None = None
    age_seconds: float | None = None
    script: tuple[Step, ...] = ()
    always: Step | None = None
    fields: str = ""  # top-level overrides as canonical JSON, so the spec stays hashable
    allow_invalid: bool = False
    schema: int | None = None
    """The schema the body announces (None: the current one); another is a future body."""
    extra: str = ""
    """Undocumented top-level fields added to the body, as canonical JSON (see ``fields``)."""
    key: str = ""
    """What the generator draws from instead of the id: the same key, the same body."""
    recorded: Recorded | None = None  # an answer recorded from a real service (recorder.py)

    @property
    def overrides(self) -> dict[str, Any]:
        return dict(json.loads(self.fields)) if self.fields else {}


def _canonical(value: Mapping[str, Any], where: str) -> str:
    """JSON values as canonical JSON text (a spec stays hashable), or a :class:`SpecError`."""
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":")) if value else ""
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode()  # minted, never served
    except UnicodeEncodeError:
        raise SpecError(f"{where} must hold valid Unicode text (a lone surrogate is not)") from None
    except (TypeError, ValueError):  # YAML dates, mixed key types, NaN, Infinity...
        raise SpecError(f"{where} must hold JSON values only (no NaN or Infinity)") from None
    return text


def unknown_field(name: str, where: str, also: tuple[str, ...] = ()) -> SpecError:
    """A field name that is no field of the verdict: the closest one, or where it belongs."""
    match = closest(name, sorted(DOCUMENTED_FIELDS) + list(also))
    if match is not None:
        hint = f"; did you mean {match!r}?"
    else:
        hint = " (spec §2.2); to serve an undocumented field on purpose, put it in extra"
    return SpecError(f"{where}: {name!r} is not a field of the verdict{hint}")


def parse_spec(raw: object, where: str = "session") -> SessionSpec:
    """Build a :class:`SessionSpec` from JSON, naming the first problem in :class:`SpecError`
    (the schema's, then what it cannot say)."""
    problem = first_problem_at(raw, where, "session")
    if problem is not None:
        raise SpecError(problem[0])
    raw = cast(Mapping[str, Any], raw)  # an object: the schema said so
    verdict = raw.get("verdict")
    conclusive = raw.get("conclusive")
    if (wrong := never_conclusive(verdict, conclusive is True)) is not None:
        raise SpecError(f"{where}: {wrong}")
    age = raw.get("age_seconds")
    if age is not None and math.isnan(age):  # YAML's .nan: a number, but in no range
        raise SpecError(
            f"{where}.age_seconds must be a number of seconds from 0 to "
            f"{_LIMITS.max_age_seconds:.0f}"
        )
    fields = raw.get("fields", {})
    allow_invalid = raw.get("allow_invalid", False)
    for name in fields if not allow_invalid else ():
        if name not in DOCUMENTED_FIELDS:
            raise unknown_field(str(name), f"{where}.fields")
    extra = raw.get("extra") or {}
    for name in extra:
        if name in DOCUMENTED_FIELDS:
            raise SpecError(
                f"{where}.extra: {name!r} is a field of the verdict; set it with fields "
                f"(schema with schema)"
            )
    always, recorded = raw.get("always"), raw.get("recorded")
    try:
        recorded = None if recorded is None else parse_recorded(recorded, f"{where}.recorded")
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    return SessionSpec(
        verdict=verdict,
        conclusive=conclusive,
        age_seconds=None if age is None else float(age),
        script=tuple(
            parse_step(step, f"{where}.script[{i}]") for i, step in enumerate(raw.get("script", []))
        ),
        always=parse_step(always, f"{where}.always") if always is not None else None,
        fields=_canonical(fields, f"{where}.fields"),
        allow_invalid=allow_invalid,
        schema=raw.get("schema"),
        extra=_canonical(extra, f"{where}.extra"),
        recorded=recorded,
    )


@dataclass(frozen=True)
class Session:
    """A session the mock knows: its id, its spec and when the edge collected it."""

    id: str
    spec: SessionSpec
    collected_at: float | None  # None: never expires (demo and scenario sessions without an age)
    scripted: bool = False
    """Whether it was given a script: only then is a step asked of the store (a minted id says
    so; its script lives in the store, not in the id)."""

    @property
    def url(self) -> str:
        """The path and query that fetch this session, relative to the base URL."""
        return f"{ENDPOINT_PATH}?{urlencode({SESSION_PARAM: self.id})}"

    def expired(self, now: float, lifetime: float) -> bool:
        return self.collected_at is not None and now - self.collected_at >= lifetime


_CARRIED: Final = {
    "v": "verdict",
    "c": "conclusive",
    "f": "fields",
    "x": "allow_invalid",
    "s": "schema",
    "e": "extra",
    "k": "key",
}
"""The spec's fields a signed id carries, by their short keys (a field left unset is left out)."""
_UNSET: Final = SessionSpec()


class SessionCodec:
    """Mints and reads signed session ids."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self._serializer = URLSafeSerializer(secret, salt="verdict-mock.session")

    def mint(self, spec: SessionSpec, now: float | None = None) -> Session:
        collected = (time.time() if now is None else now) - (spec.age_seconds or 0.0)
        payload: dict[str, Any] = {"t": round(collected, 3), "r": secrets.token_hex(4)}
        for short, name in _CARRIED.items():
            if getattr(spec, name) != getattr(_UNSET, name):
                payload[short] = getattr(spec, name)
        if spec.script:
            payload["p"] = 1
        token = str(self._serializer.dumps(payload))
        if len(token) > MAX_SESSION_ID_LENGTH:
            raise SpecError(
                f"the field overrides and extra fields do not fit in a session id of at most "
                f"{MAX_SESSION_ID_LENGTH} characters; give fewer or shorter fields"
            )
        return Session(token, spec, collected, scripted=bool(spec.script))

    def read(self, session_id: str) -> Session | None:
        """Return the session a minted id stands for, or None if it is not one of ours."""
        try:
            payload = self._serializer.loads(session_id)
        except (BadData, ValueError, TypeError):  # not ours, tampered, or garbage
            return None
        # Signed, so written by mint: its fields need no checks.
        spec = SessionSpec(
            **{name: payload[short] for short, name in _CARRIED.items() if short in payload}
        )
        return Session(session_id, spec, payload["t"], scripted="p" in payload)
