"""The mock for integrators' tests: over real HTTP, or in-process for httpx and requests.

Every transport gives a :class:`VerdictMock` (``mint``, journal checks, clock control, ``reset``)
that decides ``/e`` with the function ``verdict-mock`` serves it with (:func:`..explain.handle`).
In-process, a scripted fault raises the error the client library raises for a real one: httpx
through respx (:func:`respx_mock`), requests through responses (:func:`responses_mock`).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from email.utils import format_datetime
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, TypedDict, overload

import httpx

from verdict_contract.core.errors import SettingsError, SpecError
from verdict_contract.core.hosts import is_loopback
from verdict_contract.core.redact import KeyHeaders
from verdict_contract.core.spec import VerdictKind, VerdictRow, split_row
from verdict_contract.mockserver.model.answer import DOCUMENTED_FIELDS
from verdict_contract.mockserver.model.sessions import ScriptStep as ScriptStep
from verdict_contract.mockserver.model.sessions import StatusStep, Step, parse_spec, unknown_field
from verdict_contract.mockserver.settings import Settings
from verdict_contract.mockserver.state import MockState

from .clients import RESOLVING_ASYNC, also_httpx2, respx_handler
from .inprocess import InProcessApp
from .verify import JournalChecks

if TYPE_CHECKING:
    import requests
    import responses
    import respx
    from typing_extensions import Unpack

    from verdict_contract.core.types import Families, Provenance, Signal


class VerdictFields(TypedDict, total=False):
    """The verdict's own fields ``mint`` takes as keywords (spec §2.2), for type checkers."""

    provenance: Provenance
    summary: str
    contradicting_families: Sequence[str]
    families: Families
    signals: Sequence[Signal]


RESPX_BASE_URL = "https://verdict.mock"
RESPONSES_BASE_URL = "https://verdict.mock"


def reply(
    status: int,
    *,
    retry_after: int | datetime | None = None,
    headers: Mapping[str, str] | None = None,
    delay_ms: int = 0,
) -> StatusStep:
    """A scripted answer with exactly the status and headers given, ``delay_ms`` late.

    ``retry_after`` in seconds or as a date; without it no ``Retry-After`` is sent (a bare
    ``429`` in a script sends ``Retry-After: 1``, as the service does).
    """
    sent = dict(headers or {})
    if isinstance(retry_after, datetime):
        sent["Retry-After"] = format_datetime(retry_after, usegmt=True)
    elif retry_after is not None:
        sent["Retry-After"] = str(int(retry_after))
    step: StatusStep = {"status": status, "headers": sent}
    if delay_ms:
        step["delay_ms"] = delay_ms
    return step


@dataclass(repr=False)
class VerdictMock(JournalChecks):
    """A running mock: where it is, which key it takes, its journal and its controls."""

    state: MockState
    base_url: str
    client: ClassVar[str] = "http"  # the client library it answers, for --verdict-coverage

    def __repr__(self) -> str:  # never the key (pytest -l prints fixtures)
        name = type(self).__name__
        return f"{name}(base_url={self.base_url!r}, settings={self.state.settings!r})"

    @property
    def api_key(self) -> str:
        return self.state.api_keys[0]

    @property
    def headers(self) -> KeyHeaders:
        """``Authorization: Bearer <key>`` for the mock's first key (a dict whose repr masks it)."""
        return KeyHeaders(Authorization=f"Bearer {self.api_key}")

    # A list of steps first, so that pyright infers ``["reset"] * 4`` against it (not against a
    # Sequence, nor a union of both); a misspelt step or field is an error unless allow_invalid.
    @overload
    def mint(
        self,
        verdict: VerdictKind | VerdictRow | None = None,
        conclusive: bool | None = None,
        age_seconds: float | None = None,
        script: list[ScriptStep] = ...,
        allow_invalid: Literal[False] = False,
        seed: str | None = None,
        schema: int | None = None,
        extra: Mapping[str, Any] | None = None,
        **fields: Unpack[VerdictFields],
    ) -> str: ...

    @overload
    def mint(
        self,
        verdict: VerdictKind | VerdictRow | None = None,
        conclusive: bool | None = None,
        age_seconds: float | None = None,
        script: Sequence[ScriptStep] = ...,
        allow_invalid: Literal[False] = False,
        seed: str | None = None,
        schema: int | None = None,
        extra: Mapping[str, Any] | None = None,
        **fields: Unpack[VerdictFields],
    ) -> str: ...

    @overload
    def mint(
        self,
        verdict: VerdictKind | VerdictRow | None = None,
        conclusive: bool | None = None,
        age_seconds: float | None = None,
        script: Sequence[Any] = ...,
        *,
        allow_invalid: Literal[True],
        seed: str | None = None,
        schema: int | None = None,
        extra: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> str: ...

    def mint(
        self,
        verdict: VerdictKind | VerdictRow | None = None,
        conclusive: bool | None = None,
        age_seconds: float | None = None,
        script: Sequence[ScriptStep] = (),
        allow_invalid: bool = False,
        seed: str | None = None,
        schema: int | None = None,
        extra: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> str:
        """Create a session and return its id; ``fields`` override documented verdict fields.

        The body is the same on every run: drawn from the mock's seed and the number of this
        mint since the test began, or from ``seed``; so is the kind of a bare ``mint()``.
        ``conclusive`` left out takes the verdict's default (``generate.DEFAULT_CONCLUSIVE``).
        ``schema=8`` announces a future schema (§9.3), ``extra`` adds fields the spec does not
        list. Raises :class:`~verdict_contract.core.errors.SpecError` for an impossible request
        (an unknown keyword with the closest known one).
        """
        __tracebackhide__ = True  # pytest shows the test's line that asked, not this source
        try:  # a row of §2.4 (verdict_kind): both at once
            verdict, conclusive = split_row(verdict, conclusive)
        except ValueError as exc:
            raise SpecError(f"mint(): {exc}") from None
        if not allow_invalid:
            for name in fields:
                if name not in DOCUMENTED_FIELDS:
                    raise unknown_field(name, "mint()", _MINT_KEYWORDS)
        raw = {
            "script": [s.to_json() if isinstance(s, Step) else s for s in script],
            "verdict": verdict,
            "conclusive": conclusive,
            "age_seconds": age_seconds,
            "schema": schema,
            "extra": extra,
            "fields": fields or None,
            "allow_invalid": allow_invalid or None,
        }
        try:
            spec = parse_spec({k: v for k, v in raw.items() if v is not None}, "mint()")
        except SpecError as exc:  # raised from here: pytest shows the test's line, not the parser
            raise exc.with_traceback(None) from None
        if seed is not None:
            spec = replace(spec, key=f"seed:{seed}")
        return self.state.mint(spec).id

    def advance(self, seconds: float) -> None:
        """Move the mock's clock: sessions age and rate-limit windows pass, without sleeping."""
        self.state.advance(seconds)

    def expire(self, n: str) -> None:
        """Session ``n`` answers 404 (expired) from now on, until the next test."""
        self.state.store.expire(n)

    def reset(self) -> None:
        """Forget the journal, counters, unconsumed scripts and clock changes."""
        self.state.reset()

    def url(self, session_id: str) -> str:
        return str(httpx.URL(f"{self.base_url}/e", params={"n": session_id}))


# mint's own keywords (not self, **fields), offered beside the verdict's fields for a misspelt one
_MINT_KEYWORDS: Final = tuple(inspect.signature(VerdictMock.mint).parameters)[1:-1]


@dataclass(repr=False)
class RespxVerdictMock(VerdictMock):
    """The mock answering httpx in-process; ``router`` is respx's, for routes of your own."""

    router: respx.MockRouter
    client: ClassVar[str] = "httpx"


@dataclass(repr=False)
class ResponsesVerdictMock(VerdictMock):
    """The mock answering requests in-process; ``responses`` is the mock, for your own."""

    responses: responses.RequestsMock
    client: ClassVar[str] = "requests"


def checked_base_url(base_url: str) -> str:
    """An in-process mock's base URL without its trailing slash; :class:`SettingsError` for one
    that is not ``http(s)://host[:port][/path]``."""
    try:
        url = httpx.URL(base_url)
    except (httpx.InvalidURL, TypeError):
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        raise SettingsError(
            f"base_url {str(base_url)[:100]!r} is not an http(s) URL with a host, such as "
            "https://api.example/v2"
        )
    if url.query or url.fragment:
        raise SettingsError(f"base_url {base_url[:100]!r} must have no query or fragment")
    return base_url.rstrip("/")


@contextmanager
def live_mock(settings: Settings | None = None) -> Iterator[VerdictMock]:
    """Serve the mock over real HTTP for the block's duration, at ``settings.port`` (none given:
    a free port of 127.0.0.1)."""
    from verdict_contract.mockserver.web.answers import state_of
    from verdict_contract.mockserver.web.app import create_app
    from verdict_contract.testing.background import BackgroundServer

    settings = settings or Settings(port=0)
    app = create_app(settings)
    state = state_of(app)
    try:
        with BackgroundServer(
            app, host=settings.host, port=settings.port, threads=settings.threads
        ) as server:
            yield VerdictMock(state, server.base_url)
    finally:
        state.close()  # its connections to a shared state (its server closed the loop's)


_THROUGH = "verdict-loopback"  # the route letting requests to this machine through, kept last


def _through_if_loopback(request: httpx.Request) -> httpx.Request | None:
    """Let a request to this machine through (pytest-httpserver, a live mock); else unmatched."""
    return request if is_loopback(request.url.host) else None


def _router_class() -> type[respx.MockRouter]:
    import respx
    from respx.models import Route

    class VerdictRouter(respx.MockRouter):
        """respx's router whose loopback route stays last, so routes added later come first;
        it tells the mock's side effect when an async client's request is being resolved."""

        async def aresolve(self, request: httpx.Request) -> Any:
            token = RESOLVING_ASYNC.set(True)
            try:
                return await super().aresolve(request)
            finally:
                RESOLVING_ASYNC.reset(token)

        def add(self, route: Route, *, name: str | None = None) -> Route:
            through: Route | None = self.routes.pop(_THROUGH, None)  # type: ignore[no-untyped-call]
            added = super().add(route, name=name)
            if through is not None:
                super().add(through, name=_THROUGH)
            return added

    return VerdictRouter


@contextmanager
def _own_target(target: InProcessApp | None, settings: Settings | None) -> Iterator[InProcessApp]:
    """``target`` (its keeper closes it), else a new mock for ``settings``, closed at the end."""
    if target is not None:
        yield target
        return
    made = InProcessApp(settings or Settings())
    try:
        yield made
    finally:
        made.close()


@contextmanager
def respx_mock(
    base_url: str = RESPX_BASE_URL,
    settings: Settings | None = None,
    *,
    target: InProcessApp | None = None,
    **router_options: Any,
) -> Iterator[RespxVerdictMock]:
    """Route httpx (and httpx2) requests under ``base_url`` to the mock app, in-process.

    ``base_url`` may carry a path (``https://api.example/v2``): ``/v2/e`` is the mock's ``/e``.
    A scripted delay at least as long as the read timeout raises ``httpx.ReadTimeout`` at once;
    a shorter one waits (an async client's in a worker thread). Requests to this machine go
    through; others follow respx's defaults (``assert_all_mocked``). ``target``: a mock kept
    from an earlier test (the plugin keeps one per settings), else a new one.
    """
    from respx.patterns import M

    base = httpx.URL(checked_base_url(base_url))
    prefix = base.path.rstrip("/")
    options = {"assert_all_called": False, **router_options}
    with (
        _own_target(target, settings) as target,
        _router_class()(**options) as router,
        also_httpx2(router),
    ):
        mine = M(scheme=base.scheme, host=base.host)
        if base.port is not None:
            mine &= M(port=base.port)
        if prefix:
            mine &= M(path__regex="^" + re.escape(prefix) + "(/|$)")
        router.route(mine).mock(side_effect=respx_handler(target, prefix))
        router.route(M(host__regex=r"."), name=_THROUGH).mock(side_effect=_through_if_loopback)
        yield RespxVerdictMock(target.state, str(base).rstrip("/"), router=router)


def _read_timeout(timeout: object) -> float | None:
    if isinstance(timeout, tuple):
        timeout = timeout[1] if len(timeout) > 1 else None
    return float(timeout) if isinstance(timeout, int | float) else None


def _responses_answer(target: InProcessApp, base: str) -> Any:
    """A responses registration answering every method under ``base`` with the mock app."""
    import requests
    import responses

    prefix = httpx.URL(base).path.rstrip("/")
    pattern = re.compile(re.escape(base) + r"(/[^?#]*)?(\?.*)?$")

    def callback(request: requests.PreparedRequest) -> tuple[int, dict[str, str], bytes]:
        body = request.body if isinstance(request.body, str | bytes) else b""
        reply = target.call(
            str(request.method),
            str(request.url),
            prefix,
            [(k, str(v)) for k, v in request.headers.items()],
            body.encode() if isinstance(body, str) else bytes(body),
            _read_timeout(getattr(request, "req_kwargs", {}).get("timeout")),
        )
        if reply.fault == "timeout":
            raise requests.exceptions.ReadTimeout("timed out (scripted delay)", request=request)
        if reply.fault == "reset":
            raise requests.exceptions.ConnectionError(
                ConnectionResetError(104, "Connection reset by peer"), request=request
            )
        if reply.fault == "truncated":
            raise requests.exceptions.ChunkedEncodingError(
                "Connection broken: IncompleteRead", request=request
            )
        headers = {k: v for k, v in reply.headers if k.lower() != "content-length"}
        return reply.status, headers, reply.body

    class AnyMethod(responses.CallbackResponse):  # one registration, not one per method
        def matches(self, request: requests.PreparedRequest) -> tuple[bool, str]:
            if pattern.match(str(request.url)):
                return True, ""
            return False, "URL does not match the verdict mock's base URL"

    # content_type=None: the app's answer names its own; responses would add "text/plain"
    # beside one whose name is not spelt "Content-Type" exactly (a scripted "content-type")
    return AnyMethod("GET", pattern, callback=callback, content_type=None)


@contextmanager
def responses_mock(
    base_url: str = RESPONSES_BASE_URL,
    settings: Settings | None = None,
    *,
    target: InProcessApp | None = None,
) -> Iterator[ResponsesVerdictMock]:
    """Answer ``requests`` calls under ``base_url`` with the mock app, in-process (responses).

    Faults raise what requests raises for real ones (``ConnectionError``,
    ``ChunkedEncodingError``, ``ReadTimeout``); requests elsewhere raise responses'
    ``ConnectionError``. It works beside responses' own default mock (``@responses.activate``),
    started before or after it: what neither mocks goes on to the one underneath.
    """
    base = checked_base_url(base_url)
    with _own_target(target, settings) as target:
        yield from _responses_mock(target, base)


def _responses_mock(target: InProcessApp, base: str) -> Iterator[ResponsesVerdictMock]:
    import requests.adapters
    import responses

    answer = _responses_answer(target, base)
    below: Any = requests.adapters.HTTPAdapter.send  # responses' own alias of its type differs
    layered = below is not responses._real_send  # another mock is started: hand it the rest
    mock = responses.RequestsMock(assert_all_requests_are_fired=False, real_adapter_send=below)
    if layered:
        mock.add_passthru(re.compile(".*"))
    default = responses.mock.get_registry()
    default.add(answer)  # answered too when @responses.activate starts the default mock later
    try:
        with mock:
            mock.add(answer)
            yield ResponsesVerdictMock(target.state, base, responses=mock)
    finally:
        current = responses.mock.get_registry()  # activate() may have replaced or reset it
        current.registered[:] = [r for r in current.registered if r is not answer]
