"""The validating proxy: ``GET /e`` forwarded to a real service, its answers checked.

What it does and guarantees is told in docs/proxy.md: answers are never active content on the
mock's origin, the key sent upstream is never logged, journaled or recorded, an upstream body is
bounded (:data:`MAX_UPSTREAM_BODY`) and a client never waits past ``--proxy-timeout``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, InvalidStateError, wait
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from verdict_contract.core.redact import mask, printable, sent_credentials
from verdict_contract.core.spec import ENDPOINT_PATH, SESSION_PARAM, STATUSES
from verdict_contract.core.validator import validate_verdict
from verdict_contract.core.violations import Violation, describe

from ..explain import parse_query
from ..model.answer import JSON, NO_STORE, Answer, error_answer, explain_headers, failure_answer
from ..model.sessions import MAX_SESSION_ID_LENGTH
from ..state import MockState, authorized
from ..store.journal import make_entry
from .middleware import ExplainMiddleware
from .recorder import Recorder

if TYPE_CHECKING:
    import httpx  # imported where a proxy is made: most mocks proxy nothing
    from _typeshed.wsgi import WSGIApplication, WSGIEnvironment

log = logging.getLogger("mockserver.proxy")

PROXY_EXTENSION: Final = "verdict_proxy"
"""Where a proxying app keeps its :class:`ValidatingProxy` (``app.extensions``)."""

MAX_UPSTREAM_BODY: Final = 1 << 20
"""A larger answer is a 502: a verdict is a few kilobytes, and memory stays bounded."""

FORWARDED: Final = frozenset(
    {"cache-control", "expires", "etag", "last-modified", "vary", "retry-after", "www-authenticate"}
    | {"ratelimit", "ratelimit-policy"}  # RateLimit: the IETF drafts, then the X- forms
    | {f"{x}ratelimit-{part}" for x in ("", "x-") for part in ("limit", "remaining", "reset")}
)
"""The upstream's headers a client gets; any other (``Set-Cookie``, ``Location``, CORS...) could
act on the mock's origin or leak, and is dropped."""

INERT: Final = (
    ("X-Content-Type-Options", "nosniff"),
    ("Content-Security-Policy", "sandbox; default-src 'none'"),
)
"""On every proxied answer: a browser opening it runs nothing, on no origin."""


_UPSTREAMS: set[str] = set()
_STOPPING: Final = ("mock_stopping", "the mock is stopping")


def _hide_secrets(record: logging.LogRecord) -> bool:
    """Hide in httpx's and httpcore's log lines what may hold a key: the query of a request
    upstream, the headers of an answer (which the client never gets either)."""
    if str(record.msg).startswith("receive_response_headers.complete"):
        record.msg, record.args = "receive_response_headers.complete (headers not shown)", ()
    elif isinstance(record.args, tuple) and len(record.args) > 1:
        url, asks, _ = str(record.args[1]).partition("?")
        if url in _UPSTREAMS:  # its query; httpx's line: the reason phrase, the upstream's words
            args = (record.args[0], url + "?…" if asks else record.args[1], *record.args[2:])
            record.args = (*args[:4], "…") if len(args) == 5 else args
    return True


@dataclass(eq=False)
class UpstreamError(Exception):
    """The upstream gave no usable answer: the status, code and message the client gets."""

    status: int
    code: str
    message: str


@dataclass(frozen=True)
class Upstream:
    """What the upstream answered."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


@dataclass(frozen=True)
class ProxiedAnswer:
    """The proxy's answer, the upstream answer's breaches, and the journal's notes on it."""

    answer: Answer
    violations: list[Violation] = field(default_factory=list)
    notes: tuple[str, ...] = ()


def _masked_json(value: object, mask_key: Callable[[str], str]) -> object:
    if isinstance(value, str):
        return mask_key(value)
    if isinstance(value, list):
        return [_masked_json(item, mask_key) for item in value]
    if isinstance(value, dict):
        return {mask_key(k): _masked_json(v, mask_key) for k, v in value.items()}
    return value


def _masked_body(body: bytes, mask_key: Callable[[str], str]) -> bytes:
    """``body`` with the key masked, as text, then in a JSON body's strings (escapes undone)."""
    text = body.decode("utf-8", "surrogateescape")
    masked_text = mask_key(text)
    if "\x00" in masked_text:  # UTF-16 or 32: a key between NULs goes bare
        bare = masked_text.replace("\x00", "")
        masked_text = masked_text if (masked_bare := mask_key(bare)) == bare else masked_bare
    raw = body if masked_text == text else masked_text.encode("utf-8", "surrogateescape")
    try:
        parsed = json.loads(raw)
        masked = _masked_json(parsed, mask_key)
    except (ValueError, RecursionError):
        return raw
    return raw if masked == parsed else json.dumps(masked, ensure_ascii=False).encode()


def _reflection(upstream: Upstream, mask_key: Callable[[str], str]) -> tuple[list[str], Upstream]:
    """Where ``upstream`` holds the key, and the answer with it masked."""
    places = []
    headers = []
    for name, value in upstream.headers:
        masked, shown = mask_key(value).replace("…", "..."), mask_key(name)  # a header is latin-1
        if masked != value or shown != name:
            places.append(f"header {printable(shown)}")
        if shown == name:  # a name holding the key is not passed on
            headers.append((name, masked))
    body = _masked_body(upstream.body, mask_key)
    if body != upstream.body:
        places.append("body")
    return places, Upstream(upstream.status, headers, body)


@dataclass
class ProxyStats:
    """The counters ``/_mock/health`` shows while proxying."""

    upstream: str
    answers: int = 0
    breaching_answers: int = 0
    violations: int = 0
    upstream_failures: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def count(self, violations: int = 0, *, failed: bool = False) -> None:
        with self._lock:
            self.answers += not failed
            self.upstream_failures += failed
            self.breaching_answers += violations > 0
            self.violations += violations

    def to_json(self) -> dict[str, object]:
        with self._lock:
            return {f.name: getattr(self, f.name) for f in fields(self) if f.repr}


def check_answer(status: int, body: bytes, *, has_body: bool = True) -> list[Violation]:
    """Every way an answer breaks the contract: its status (§7) and, for a 200, its verdict."""
    if status not in STATUSES:
        return [
            Violation(
                rule="documented_status",
                path="",
                message=f"status {status} is not one the spec lists",
                clause="§7",
                received=str(status),
                documented=", ".join(map(str, STATUSES)),
            )
        ]
    if status != 200 or not has_body:
        return []
    try:
        verdict = json.loads(body)
    except (ValueError, RecursionError):
        return [
            Violation(
                rule="json_body",
                path="",
                message="the body of a 200 is not JSON",
                clause="§4",
                received=describe(body[:60].decode("utf-8", "replace")),
                documented="a JSON verdict object (§2.2)",
            )
        ]
    return validate_verdict(verdict)


def one_line(violation: Violation) -> str:
    """A violation in one line: clause, rule, where, what (the journal's and the log's form)."""
    return f"{violation.clause} {violation.rule} at {violation.path or '/'}: {violation.message}"


def _session_id(pairs: list[tuple[str, str]] | None) -> str | None:
    values = [v for name, v in pairs or () if name == SESSION_PARAM]
    if len(values) == 1 and 0 < len(values[0]) <= MAX_SESSION_ID_LENGTH:
        return values[0]
    return None


@dataclass
class _Call:
    """An upstream call; its connection cut once its wait is over: httpx's timeout bounds each
    read only, and an upstream dripping its head a byte at a time would hold it for days."""

    method: str
    url: httpx.URL
    headers: dict[str, str]
    future: Future[Upstream] = field(default_factory=Future)
    stream: Any = None  # httpcore's network stream, once connected
    over: bool = False

    def trace(self, event: str, info: dict[str, Any]) -> None:  # httpx's trace extension
        if event == "connection.connect_tcp.complete":
            self.stream = info["return_value"]
            if self.over:  # connected after its wait ended
                self.cut()

    def cut(self) -> None:
        self.over = True
        with contextlib.suppress(AttributeError, OSError):  # not connected, or closed already
            self.stream.get_extra_info("socket").shutdown(socket.SHUT_RDWR)


class ValidatingProxy(ExplainMiddleware):
    """Serve ``GET``/``HEAD /e`` from the upstream; pass every other request to ``app``."""

    def __init__(self, app: WSGIApplication, state: MockState) -> None:
        super().__init__(app, state)
        self.settings = settings = state.settings
        assert settings.proxy_to is not None, "a proxy needs settings.proxy_to"
        self.url = settings.proxy_to + ENDPOINT_PATH
        parts = urlsplit(settings.proxy_to)
        self.stats = ProxyStats(f"{parts.scheme}://{parts.netloc}{parts.path}")
        self.timeout = settings.proxy_timeout
        record = settings.record
        self.recorder = None if record is None else Recorder(record, settings.record_max_bytes)
        _UPSTREAMS.add(self.url)
        for name in ("httpx", "httpcore.http11", "httpcore.http2"):
            logging.getLogger(name).addFilter(_hide_secrets)  # once: addFilter skips a known one
        import httpx  # here, not at the top: most mocks proxy nothing, and it is slow to import

        self.client = httpx.Client(
            timeout=httpx.Timeout(self.timeout),
            follow_redirects=False,
            trust_env=False,  # an HTTP(S)_PROXY variable must not reroute the key
            # No idle connections kept: an app dropped without closing leaves no socket open.
            limits=httpx.Limits(max_connections=settings.threads * 2, max_keepalive_connections=0),
        )
        # Upstream calls run on daemon threads of their own, so a client waits no longer than
        # the timeout whatever the upstream does (a call still running after that is cut: _Call),
        # and stop() ends every wait at once (nothing joins them at exit).
        self._stopping: Future[Upstream] = Future()  # never an answer: stop() ends every wait

    def respond(self, method: str, query: bytes, environ: WSGIEnvironment) -> Answer:
        started, generation = time.perf_counter(), self.state.memory.journal.generation
        pairs = parse_query(query)
        authorization = environ.get("HTTP_AUTHORIZATION")
        try:
            served = self.answer(method, query, pairs, environ)
        except Exception as exc:  # never a 5xx of our own for a request, however it fails
            served = ProxiedAnswer(failure_answer(exc, f"proxying {method} {ENDPOINT_PATH}"))
        answer = served.answer
        entry = make_entry(
            method=method,
            path=ENDPOINT_PATH,
            args=pairs if pairs is not None else [("?", query.decode("latin-1"))],
            authorization=authorization,
            result=answer.result,
            is_key=self.state.masks(authorization),
            latency_ms=(time.perf_counter() - started) * 1000,
            violations=tuple(one_line(v) for v in served.violations) + served.notes,
            generation=generation,  # not kept if the journal was cleared since
        )
        self.state.memory.journal.add(entry)
        return answer

    def headers(self, answer: Answer) -> list[tuple[str, str]]:
        return [*explain_headers(answer, vary=False), *INERT]  # the upstream's Vary, if any

    def answer(
        self,
        method: str,
        query: bytes,
        pairs: list[tuple[str, str]] | None,
        environ: WSGIEnvironment,
    ) -> ProxiedAnswer:
        """The answer for one call, the breaches of the upstream's answer and notes on it."""
        authorization = environ.get("HTTP_AUTHORIZATION")
        if (upstream_key := self.settings.upstream_key) is not None:
            if authorized(self.state, authorization) is None:
                return ProxiedAnswer(
                    error_answer(
                        401,
                        "unauthorized",
                        "missing or invalid API key; send Authorization: Bearer <key> "
                        "(a key of this mock: it sends its own key upstream)",
                        headers=[("WWW-Authenticate", "Bearer")],
                    )
                )
            authorization = f"Bearer {upstream_key.reveal()}"
        headers = {"Accept": environ.get("HTTP_ACCEPT") or JSON, "Accept-Encoding": "identity"}
        if authorization is not None:
            headers["Authorization"] = authorization
        import httpx  # imported by __init__ already: a lookup

        try:
            url = httpx.URL(self.url + ("?" + query.decode("latin-1") if query else ""))
        except httpx.InvalidURL:
            return ProxiedAnswer(error_answer(400, "bad_request", "the query cannot be sent on"))
        if self._stopping.done():
            return ProxiedAnswer(error_answer(503, *_STOPPING))
        call = _Call(method, url, headers)
        threading.Thread(target=self._call, args=(call,), daemon=True).start()
        wait([call.future, self._stopping], timeout=self.timeout, return_when=FIRST_COMPLETED)
        try:
            upstream = call.future.result(timeout=0)
        except TimeoutError:  # stopping, or no answer in time
            call.cut()  # its thread and connection freed now, not at the upstream's pace
            error = UpstreamError(503, *_STOPPING) if self._stopping.done() else self._timed_out()
            return ProxiedAnswer(self._failed(error))
        except UpstreamError as exc:
            return ProxiedAnswer(self._failed(exc))
        return self._checked(method, pairs, upstream, authorization)

    def _call(self, call: _Call) -> None:
        """One upstream call on its own thread; its outcome goes to its ``future``."""
        try:
            call.future.set_result(self._fetch(call))
        except BaseException as exc:  # the waiter reads it (an UpstreamError, as a rule)
            call.future.set_exception(exc)

    def stop(self) -> None:
        """End every wait on the upstream now (the server is stopping); refuse new calls."""
        with contextlib.suppress(InvalidStateError):  # stopped already
            self._stopping.set_exception(UpstreamError(503, *_STOPPING))
        if self.recorder is not None:  # what is queued reaches the file (a bounded wait)
            self.recorder.flush(timeout=self.timeout)

    def _fetch(self, call: _Call) -> Upstream:
        import httpx

        traced = {"trace": call.trace}
        try:
            with self.client.stream(
                call.method, call.url, headers=call.headers, extensions=traced
            ) as response:
                encoding = (response.headers.get("Content-Encoding") or "identity").strip().lower()
                if encoding != "identity":  # asked for none: never decoded (a bomb's thousandfold)
                    message = "the upstream's answer is encoded (Content-Encoding), asked for none"
                    raise UpstreamError(502, "upstream_encoded", message)
                chunks, size = [], 0
                for chunk in response.iter_bytes():  # cut once the client has had its 504
                    size += len(chunk)
                    if size > MAX_UPSTREAM_BODY:
                        raise UpstreamError(
                            502,
                            "upstream_too_large",
                            f"the upstream's answer is larger than {MAX_UPSTREAM_BODY} bytes",
                        )
                    chunks.append(chunk)
                kept = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers.raw]
                return Upstream(response.status_code, kept, b"".join(chunks))
        except httpx.TimeoutException:
            raise self._timed_out() from None
        except UpstreamError:
            raise
        except Exception as exc:  # anything from the exchange; its text may hold the URL: not shown
            raise UpstreamError(
                502, "upstream_unreachable", f"no answer from the upstream ({type(exc).__name__})"
            ) from None

    def _timed_out(self) -> UpstreamError:
        message = f"the upstream did not answer within {self.timeout:g} s"
        return UpstreamError(504, "upstream_timeout", message)

    def _failed(self, error: UpstreamError) -> Answer:
        self.stats.count(failed=True)
        log.warning("upstream %s: %s", self.stats.upstream, error.message)
        return error_answer(error.status, error.code, error.message)

    def _checked(
        self,
        method: str,
        pairs: list[tuple[str, str]] | None,
        upstream: Upstream,
        authorization: str | None,
    ) -> ProxiedAnswer:
        """``authorization``: as sent upstream (its credential looked for in the answer)."""
        # the key sent and the mock's own secrets (a client may send one in its query), any form
        redactor = self.state.redactor.joined(sent_credentials(authorization))
        places, upstream = _reflection(upstream, redactor.text)
        has_body = method == "GET"
        violations = check_answer(upstream.status, upstream.body, has_body=has_body)
        if places:
            where = ", ".join(places)
            reflected = Violation(
                rule="key_reflected",
                path="",
                message=f"the answer holds a key it was sent ({where}): masked for the client, "
                "not recorded",
                clause="§5",
                received=where,
                documented="no part of the key (§5.4: a server-side secret)",
            )
            violations.append(reflected)
        self.stats.count(len(violations))
        session_id = _session_id(pairs)
        # the client's id, masked if it holds a part of a key, escaped: no terminal escapes
        holds_a_key = session_id is not None and self.state.masks(authorization)(session_id)
        printed_id = session_id and printable(mask(session_id) if holds_a_key else session_id)
        for violation in violations:
            log.warning("upstream breach (n=%s): %s", printed_id, printable(one_line(violation)))
        is_json = _is_json(upstream.body)
        notes: list[str] = []
        not_json = None  # a 200's is a breach already (§4)
        if has_body and upstream.body and not is_json and upstream.status != 200:
            types = [v for k, v in upstream.headers if k.lower() == "content-type"]
            sent = f"sent as {printable(types[0][:60])}, " if types else ""
            not_json = f"the upstream's {upstream.status} body is not JSON ({sent}served as {JSON})"
            notes.append(not_json)
        if self.recorder is not None and session_id is not None and has_body:
            if places:
                notes.append("not recorded: the answer holds the key sent upstream")
            elif holds_a_key:
                notes.append("not recorded: the session id holds a key")
            elif not is_json:  # a cut or malformed body is not the session's answer
                log.warning("not recorded (n=%s): the upstream's body is not JSON", printed_id)
                notes.append("not recorded: the body is not JSON")
            elif refused := self.recorder.observe(session_id, upstream.status, upstream.body):
                notes.append(refused)
        if upstream.status >= 500:
            answer = error_answer(502, "upstream_error", f"the upstream answered {upstream.status}")
        elif violations and self.settings.proxy_strict:
            answer = _breach_answer(violations)
        elif not_json is not None and self.settings.proxy_strict:
            answer = error_answer(502, "upstream_not_json", not_json)
        else:
            headers = [(k, v) for k, v in upstream.headers if k.lower() in FORWARDED]
            headers = [(k, v) for k, v in headers if v.isprintable()]  # no terminal's escape
            outcome = "breach" if violations else "proxied"
            answer = Answer(upstream.status, upstream.body, headers, outcome)
        return ProxiedAnswer(answer, violations, tuple(notes))


def _is_json(body: bytes) -> bool:
    try:
        json.loads(body)
    except (ValueError, RecursionError):
        return False
    return True


_BREACH_FIELDS: Final = ("rule", "clause", "path", "message", "received", "documented")


def _breach_answer(violations: list[Violation]) -> Answer:
    """``--proxy-strict``: a 502 whose error lists what the upstream's answer broke."""
    count = len(violations)
    error = {
        "code": "contract_breach",
        "message": f"the upstream's answer breaks the contract ({count} "
        f"violation{'s' if count != 1 else ''}); first: {one_line(violations[0])}",
        "violations": [{name: getattr(v, name) for name in _BREACH_FIELDS} for v in violations],
    }
    body = json.dumps({"error": error}, ensure_ascii=False).encode()
    return Answer(502, body, [("Cache-Control", NO_STORE)], "breach")
