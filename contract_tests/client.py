"""One HTTP client for the whole suite run: ``GET /e``, throttling honoured, every call replayable.

The real key is only ever put in the ``Authorization`` header, unless a check passes ``KEY`` for
another place on purpose (the opt-in ``--verdict-check-key-in-url`` checks). Every call is
recorded with the key replaced by ``$VERDICT_API_KEY``, so a failure can print a ``curl`` line
that reproduces it without showing the key.
"""

from __future__ import annotations

import json
import os
import shlex
import ssl
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import quote

import httpx

from verdict_contract.core.redact import Secret
from verdict_contract.core.spec import ENDPOINT_PATH, SESSION_PARAM
from verdict_contract.core.violations import describe

from . import clock
from .body import BodyError, strict_json
from .diff import documented
from .leaks import error_body_advisories
from .maxrate import Pace
from .retry import MAX_RETRIES, retry_after_seconds, unreadable_retry_after
from .throttling import Throttling
from .transport import (
    DEFAULT_CALL_TIMEOUT,
    MAX_ANSWER_BYTES,
    CallFailed,
    CallTooSlow,
    Deadline,
    bounded_client,
    fetch,
)

KEY = object()
"""Placeholder for "send the configured key" wherever a query or header value is built."""

KEY_VARIABLE = "$VERDICT_API_KEY"
"""How a replayed request shows the key: the environment variable the suite also reads."""

_SHELL = "\x00"  # brackets a shell expression inside a recorded call (\x00 never travels)
_MARK = f"{_SHELL}{KEY_VARIABLE}{_SHELL}"  # the key itself, in a recorded call
TRUST_HINT = (
    "to trust a private CA, pass --verdict-ca-bundle PATH (a PEM file) or set SSL_CERT_FILE=PATH "
    "(httpx does not read REQUESTS_CA_BUNDLE)"
)
MOCK_SIGNATURE: dict[str, type | tuple[type, ...]] = {
    "status": str,
    "schema": int,
    "session_lifetime": (int, float),
    "journal_entries": int,
}
"""What the mock's ``/_mock/health`` answers, field by field: a catch-all 200 does not."""


@dataclass(frozen=True)
class Derived:
    """A wrong key computed from the real one; a replay shows it as a bash expression of it.

    ``shell`` is written in terms of ``$VERDICT_API_KEY`` (``${VERDICT_API_KEY%?}``: all but
    the last character), so neither the key nor most of it is ever printed.
    """

    make: Callable[[str], str]
    shell: str


class TargetUnreachable(Exception):
    """The target cannot be reached at all: the run stops with this one line."""


class RunStopped(Exception):
    """What the run needs cannot be had (a verdict-mock's control API refused a session or a
    clock move; the session factory failed): the run stops with this one line, as it does for
    a dead target."""


GIVE_UP_AFTER = 2
"""Calls in a row that run out their deadline, none answered in time before, after which the
suite stops the run: one may be a slow answer, two say the target does not answer."""


class BrokenAnswer(Exception):
    """The connection broke while this answer was read (a cut body, a reset): a failed check."""


class Throttled(Exception):
    """The target kept answering 429 and the run's wait budget is spent."""


def transport_cause(exc: httpx.TransportError, timeout: float) -> str:
    """A short, plain reason for a transport error: refused, DNS, TLS, no answer, ..."""
    if isinstance(exc, httpx.ConnectTimeout) and "handshake" in str(exc):
        return f"TLS failure: no handshake within {timeout:g} s (timeout); {TRUST_HINT}"
    if isinstance(exc, httpx.ConnectTimeout):
        return f"no connection within {timeout:g} s (timeout)"
    if isinstance(exc, httpx.TimeoutException):
        return f"the connection opened but no answer came within {timeout:g} s (timeout)"
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 8:
        chain.append(current)
        current = current.__cause__ or current.__context__
    for error in chain:
        if isinstance(error, ssl.SSLCertVerificationError):
            why = error.verify_message or getattr(error, "reason", None) or error
            return f"TLS failure: the certificate is not trusted ({why}); {TRUST_HINT}"
        if isinstance(error, ssl.SSLError):
            return f"TLS failure: {getattr(error, 'reason', None) or error}"
        if isinstance(error, OSError) and type(error).__name__ == "gaierror":
            return f"DNS lookup failed: {error.strerror or error}"
        if isinstance(error, ConnectionRefusedError):
            return "connection refused (is the service running on that port?)"
        if isinstance(error, ConnectionResetError):
            return "connection reset by the server"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _signed_by_the_mock(response: httpx.Response) -> bool:
    try:
        health = response.json()
    except ValueError:
        return False
    return (
        response.status_code == 200
        and isinstance(health, dict)
        and health.get("status") == "ok"
        and all(
            isinstance(health.get(name), kind) and not isinstance(health.get(name), bool)
            for name, kind in MOCK_SIGNATURE.items()
        )
    )


class Reached(NamedTuple):
    """What one call to the target told: whether it is a verdict-mock, why it cannot be reached
    (None: it answered), and whether it is a mock that refused the control token (none given,
    or not its own)."""

    mock: bool
    cause: str | None
    token_refused: bool = False


def reach(
    base_url: str,
    timeout: float,
    ca_bundle: str | None = None,
    call_timeout: float = DEFAULT_CALL_TIMEOUT,
    control_token: Secret | None = None,
) -> Reached:
    """Reach the target once.

    Any HTTP answer means the target is up. The mock is told by its signature: its health
    answer's fields, and a 404 for a made-up path beside it (a gateway that answers 200 to
    every path is a live service, not a mock); a mock started with ``--control-token`` answers
    401 ``control_token_required`` without it. Each call is bounded as the run's are: an
    answer over the size cap is no mock's; one that takes longer than ``call_timeout`` in all
    is no answer.
    """
    deadline = Deadline(call_timeout)
    try:
        with bounded_client(base_url, timeout, ca_bundle, deadline) as http:
            asked = http.build_request("GET", "/_mock/health", headers=control(control_token))
            health = fetch(http, asked, deadline, MAX_ANSWER_BYTES)
            if _asks_for_its_token(health):
                return Reached(True, None, token_refused=True)
            mock = _signed_by_the_mock(health)
            if mock:
                made_up = http.build_request("GET", f"/_mock/verdict-contract-{uuid.uuid4().hex}")
                mock = fetch(http, made_up, deadline, MAX_ANSWER_BYTES).status_code == 404
    except httpx.TransportError as exc:
        return Reached(False, transport_cause(exc, timeout))
    except httpx.HTTPError as exc:
        return Reached(False, f"{type(exc).__name__}: {exc}")
    except CallFailed as exc:
        if isinstance(exc, CallTooSlow):
            return Reached(False, str(exc))
        return Reached(False, None)  # a body no mock sends: up, and a live service
    return Reached(mock, None)


def _quoted(response: httpx.Response) -> str:
    """A refusal of the control API as a failure shows it: its status, and the start of its
    body on one line (it is the target's text: nothing in it acts on a terminal)."""
    return f"{response.status_code} {describe(response.text, 200)}"


def control(token: Secret | None) -> dict[str, str]:
    """The header a verdict-mock's control API reads its token from (none without a token)."""
    return {} if token is None else {"X-Mock-Token": token.reveal()}


def _asks_for_its_token(response: httpx.Response) -> bool:
    if response.status_code != 401:
        return False
    try:
        return bool(response.json()["error"]["code"] == "control_token_required")
    except (ValueError, LookupError, TypeError):  # not JSON, or not the mock's error
        return False


@dataclass(frozen=True)
class Sent:
    """One call as sent, with the key shown as ``$VERDICT_API_KEY``; ``curl()`` replays it."""

    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    status: int | None = None
    cacert: str | None = None  # the run's --verdict-ca-bundle, as an absolute path

    def curl(self) -> str:
        """The call as a bash line: the key as ``$VERDICT_API_KEY``, the run's CA bundle as
        ``--cacert``, a value over ``MAX_SHOWN`` characters cut in the middle (said in a note)."""
        parts = ["curl", "-i"]
        if self.cacert:
            parts += ["--cacert", shlex.quote(self.cacert)]
        if self.method == "HEAD":
            parts.append("-I")
        elif self.method != "GET":
            parts += ["-X", self.method]
        cut: list[int] = []
        for name, value in self.headers:
            parts += ["-H", _quote(f"{name}: {value}", cut)]
        parts.append(_quote(self.url, cut))
        if cut:
            sizes = ", ".join(str(n) for n in cut)
            parts.append(
                f"# cut in the middle: values of {sizes} characters (the line sends them shorter)"
            )
        return " ".join(parts)


MAX_SHOWN = 200
"""The most characters of one value a replay line shows; a longer one is cut in the middle."""


def _cut(text: str, cut: list[int]) -> str:
    if len(text) <= MAX_SHOWN:
        return text
    cut.append(len(text))
    return f"{text[: MAX_SHOWN * 2 // 3]}…{text[-(MAX_SHOWN // 3) :]}"


def _quote(text: str, cut: list[int] | None = None) -> str:
    """Shell-quote ``text``, leaving its shell expressions (the key's variable) to the shell.

    Its literal pieces over ``MAX_SHOWN`` characters are cut in the middle (their lengths go in
    ``cut``); a shell expression never is.
    """
    pieces = text.split(_SHELL)
    quoted = [
        (f'"{piece}"' if odd else shlex.quote(piece if cut is None else _cut(piece, cut)))
        for odd, piece in ((i % 2 == 1, p) for i, p in enumerate(pieces))
        if piece
    ]
    return "".join(quoted) or "''"


def _sent_and_replayed(value: str | object, key: str) -> tuple[str, str]:
    """(what is sent, what a replay shows) for a header or query value."""
    if value is KEY:
        return key, _MARK
    if isinstance(value, Derived):
        return value.make(key), f"{_SHELL}{value.shell}{_SHELL}"
    return str(value), str(value)


def _encode_for_replay(replayed: str) -> str:
    pieces = replayed.split(_SHELL)
    return _SHELL.join(p if i % 2 else quote(p, safe="") for i, p in enumerate(pieces))


MAX_VERDICTS_KEPT = 4
"""The most distinct documented verdicts kept per session (two already show a change)."""


class Seen(NamedTuple):
    """A verdict a session answered with, and the call that got it."""

    body: dict[str, Any]
    curl: str


@dataclass
class ExplainClient:
    """Calls the target's ``/e`` over one pooled connection set (one client per process)."""

    base_url: str
    api_key: Secret
    timeout: float = 10.0
    wait_budget: float = 60.0
    waited: float = 0.0  # seconds slept on 429s
    answered_429: int = 0  # 429s met (waited out or given up on), the probe's not counted
    paced: float = 0.0  # seconds slept by the pace before calls
    ca_bundle: str | None = None
    pace: Pace | None = None
    workers: int = 1  # processes sharing the key's rate limit (xdist workers)
    call_timeout: float = DEFAULT_CALL_TIMEOUT  # the most one call takes in all
    max_bytes: int = MAX_ANSWER_BYTES  # the most an answer holds after decoding
    control_token: Secret | None = field(default=None, repr=False)  # a mock's control calls
    sent: list[Sent] = field(default_factory=list, repr=False)
    advisories: list[str] = field(default_factory=list, repr=False)
    """What this client saw that breaks no clause but a reviewer wants to know (deduplicated)."""
    verdicts: dict[str, dict[str, Seen]] = field(default_factory=dict, repr=False)
    """Each session's distinct documented verdicts this process received, with a call that got
    each: a verdict must not change at any time during the run (spec §3, §8)."""
    _http: httpx.Client = field(init=False, repr=False)
    _deadline: Deadline = field(init=False, repr=False)
    _too_slow: int = field(default=0, init=False, repr=False)
    """Calls in a row whose answer did not come whole by their deadline (see :meth:`_fetch`)."""
    _answered: bool = field(default=False, init=False, repr=False)
    """Whether any call of this client got its whole answer in time."""

    @property
    def _control(self) -> dict[str, str]:
        return control(self.control_token)

    @property
    def _cacert(self) -> str | None:
        return os.path.abspath(self.ca_bundle) if self.ca_bundle else None

    def __post_init__(self) -> None:
        self._deadline = Deadline(self.call_timeout)
        self._http = bounded_client(self.base_url, self.timeout, self.ca_bundle, self._deadline)

    def _fetch(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One call, bounded in time in all and in decoded bytes (:mod:`.transport`).

        A target that has answered no call in time, and let :data:`GIVE_UP_AFTER` in a row run
        out their deadline (a staging that drips a byte every few seconds), has shown that it
        does not answer: the run stops there (:class:`TargetUnreachable`) instead of spending a
        deadline on every call. Slow calls to a target that answers others (one slow session)
        are each that call's failure.
        """
        request = self._http.build_request(method, path, **kwargs)
        try:
            response = fetch(self._http, request, self._deadline, self.max_bytes)
        except CallTooSlow:
            self._too_slow += 1
            if not self._answered and self._too_slow >= GIVE_UP_AFTER:
                raise TargetUnreachable(
                    f"{self.base_url}: {self._too_slow} calls in a row did not finish within "
                    f"{self.call_timeout:g} s (--verdict-call-timeout), and none has: the target "
                    "does not answer"
                ) from None
            raise
        self._too_slow, self._answered = 0, True
        return response

    @contextmanager
    def unpaced(self) -> Iterator[None]:
        """Calls sent at once, whatever ``--verdict-max-rate`` says: the rate-limit probe, whose
        point is to go past the limit that the pace keeps the rest of the run under."""
        pace, self.pace = self.pace, None
        try:
            yield
        finally:
            self.pace = pace

    def throttling(self) -> Throttling:
        """What throttling has cost this process so far."""
        return Throttling(
            process=str(os.getpid()),
            answered_429=self.answered_429,
            waited=self.waited,
            budget=self.wait_budget,
            paced=self.paced,
        )

    def advise(self, text: str) -> None:
        if text not in self.advisories:
            self.advisories.append(text)

    def explain(self, session_id: str) -> httpx.Response:
        """An ordinary, authorised call for one session."""
        return self.request(params=[(SESSION_PARAM, session_id)])

    def request(
        self,
        *,
        params: Sequence[tuple[str, str | object]] = (),
        authorization: str | object | None = KEY,
        headers: Mapping[str, str | object] | None = None,
        method: str = "GET",
        honour_429: bool = True,
    ) -> httpx.Response:
        """A call to ``/e`` with any query and headers; ``KEY`` (or ``{key}``) stands for the key.

        A 429 is waited out as its ``Retry-After`` says, within the run's wait budget; past it
        :class:`Throttled` is raised. ``honour_429=False`` returns the 429 (the rate-limit probe).
        """
        attempt = 0
        announced: str | None = None  # the Retry-After the last wait obeyed
        while True:
            response = self._send(params, authorization, headers, method)
            if response.status_code != 429:
                if authorization is KEY and method == "GET":
                    self._remember(params, response)
                return response
            retry_after = response.headers.get("retry-after")
            if retry_after is None:
                self.advise("a 429 came without Retry-After (spec §7 asks for none; clients guess)")
            if announced is not None and self.workers == 1:  # else a sibling took the slot
                self.advise(
                    f"Retry-After lied: after waiting the {announced!r} it announced, the next "
                    "call was refused again"
                )
            if not honour_429:
                return response
            self.answered_429 += 1
            unreadable = unreadable_retry_after(retry_after)
            if unreadable is not None:  # a breach: the call that met it fails, with its replay
                raise BrokenAnswer(unreadable)
            wait = retry_after_seconds(retry_after, attempt, date=response.headers.get("date"))
            remaining = self.wait_budget - self.waited
            if attempt >= MAX_RETRIES:
                raise Throttled(
                    f"throttled: the retry cap ran out: still 429 after {attempt} retries of one "
                    f"call (Retry-After: {retry_after!r}); {self.waited:.1f} s of the "
                    f"{self.wait_budget:g} s wait budget spent (run later, or pace the run "
                    "with --verdict-max-rate N/SECONDS)"
                )
            if wait > remaining:
                raise Throttled(
                    f"throttled: the wait budget ran out: the target answered 429 (Retry-After: "
                    f"{retry_after!r}, a wait of {wait:.1f} s) and the run's wait budget of "
                    f"{self.wait_budget:g} s has {max(remaining, 0):.1f} s left after {attempt} "
                    "retries (raise --verdict-wait-budget, pace with --verdict-max-rate, or run "
                    "later)"
                )
            clock.CLOCK.sleep(wait)
            self.waited += wait
            announced = retry_after  # None, or readable: an unreadable one failed the call above
            attempt += 1

    def _remember(
        self, params: Sequence[tuple[str, str | object]], response: httpx.Response
    ) -> None:
        """Keep a verdict this session answered with, if its documented part is new."""
        ids = [value for name, value in params if name == SESSION_PARAM]
        if response.status_code != 200 or len(ids) != 1 or not isinstance(ids[0], str):
            return
        try:
            body = strict_json(response.content)
        except BodyError:
            return  # not a verdict: the checks of bodies say so
        if not isinstance(body, dict):
            return
        seen = self.verdicts.setdefault(ids[0], {})
        shape = json.dumps(documented(body), sort_keys=True)
        # Two shapes already show a change; past a few, more add nothing to the failure.
        if shape not in seen and len(seen) < MAX_VERDICTS_KEPT:
            seen[shape] = Seen(body, self.sent[-1].curl())

    def _send(
        self,
        params: Sequence[tuple[str, str | object]],
        authorization: str | object | None,
        headers: Mapping[str, str | object] | None,
        method: str,
    ) -> httpx.Response:
        key = self.api_key.reveal()
        sent_headers: dict[str, str] = {}
        replay_headers: list[tuple[str, str]] = []
        for name, value in (headers or {}).items():
            sent_headers[name], replayed = _sent_and_replayed(value, key)
            replay_headers.append((name, replayed))
        if authorization is KEY or isinstance(authorization, Derived):
            sent, replayed = _sent_and_replayed(authorization, key)
            sent_headers["Authorization"] = f"Bearer {sent}"
            replay_headers.append(("Authorization", f"Bearer {replayed}"))
        elif isinstance(authorization, str):
            sent_headers["Authorization"] = authorization.replace("{key}", key)
            replay_headers.append(("Authorization", authorization.replace("{key}", _MARK)))
        query: list[tuple[str, str | int | float | bool | None]] = []
        replay_query: list[str] = []
        for name, value in params:
            sent, replayed = _sent_and_replayed(value, key)
            query.append((name, sent))
            replay_query.append(f"{quote(name, safe='')}={_encode_for_replay(replayed)}")
        url = f"{self.base_url}{ENDPOINT_PATH}"
        replay_url = url + (f"?{'&'.join(replay_query)}" if replay_query else "")
        if self.pace is not None:
            self.paced += self.pace.wait()
        try:
            response = self._fetch(method, ENDPOINT_PATH, params=query, headers=sent_headers)
        except CallFailed as exc:  # the target's answer, too large or too slow: this call fails
            self.sent.append(Sent(method, replay_url, tuple(replay_headers), cacert=self._cacert))
            raise BrokenAnswer(str(exc)) from None
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.ReadTimeout) as exc:
            raise TargetUnreachable(
                f"{self.base_url}: {transport_cause(exc, self.timeout)}"
            ) from None
        except httpx.TransportError as exc:
            self.sent.append(Sent(method, replay_url, tuple(replay_headers), cacert=self._cacert))
            raise BrokenAnswer(
                f"the answer could not be read: {transport_cause(exc, self.timeout)}"
            ) from None
        self.sent.append(
            Sent(method, replay_url, tuple(replay_headers), response.status_code, self._cacert)
        )
        for advisory in error_body_advisories(response):
            self.advise(advisory)
        return response

    def mint(self, **spec: Any) -> str:
        """Mint a session through the mock's control API; returns its id."""
        response = self._fetch("POST", "/_mock/sessions", json=spec, headers=self._control)
        if response.status_code != 201:
            raise RunStopped(f"the mock refused to mint {spec}: {_quoted(response)}")
        session_id: str = response.json()["n"]
        return session_id

    def advance_mock_clock(self, seconds: float) -> None:
        """Age every session of a mock target at once, through its control API (no sleeping)."""
        advance = {"advance": seconds}
        response = self._fetch("POST", "/_mock/clock", json=advance, headers=self._control)
        if response.status_code != 200:
            raise RunStopped(f"the mock refused to move its clock: {_quoted(response)}")

    def mock_health(self) -> dict[str, Any]:
        health: dict[str, Any] = self._fetch("GET", "/_mock/health", headers=self._control).json()
        return health

    def close(self) -> None:
        self._http.close()
