"""The validating proxy: ``GET /e`` forwarded to a real service, its answers checked.

With ``--proxy-to URL`` this WSGI middleware takes the place of the fast path: each call to
``/e`` goes to ``URL/e`` with the same query, and the client gets the real answer's status and
body bytes, but never as active content on the mock's origin (a page there could call the control
API): always ``Content-Type: application/json``, ``nosniff`` and a sandboxing CSP, and of the
upstream's headers only those an API answer needs (:data:`FORWARDED`: no ``Set-Cookie``). A body
that is not JSON is flagged in the journal. An answer that reflects the key sent upstream (as it
is, percent-encoded, JSON-escaped or base64) is flagged, the key masked in what the client gets,
and never recorded. Every answer is checked with the rules
the suite uses (:func:`~verdict_contract.core.validator.validate_verdict`, and the statuses of
spec §7); each breach goes to the journal entry, to the log (one line per breach naming its
clause) and to the counters in ``/_mock/health``. ``--proxy-strict`` turns a breaching answer into
a 502 listing the violations (a reflected key is a §5 breach), and a body that is not JSON into
a 502 in the mock's error shape. When the service fails (a 5xx, a reset, a body that is not HTTP)
the client gets a 502, and after ``--proxy-timeout`` seconds a 504, in the mock's error shape.

The key sent upstream is ``--upstream-key`` (then clients must present one of the mock's own
keys) or else the client's own ``Authorization`` header. It is never logged or journaled.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from verdict_contract.core.keyforms import base64_forms
from verdict_contract.core.redact import Redactor, mask
from verdict_contract.core.spec import ENDPOINT_PATH, SESSION_PARAM, STATUSES, is_api_call
from verdict_contract.core.validator import validate_verdict
from verdict_contract.core.violations import Violation, describe

from ..explain import bearer_token, parse_query
from ..model.answer import (
    JSON,
    NO_STORE,
    Answer,
    Headers,
    Outcome,
    error_answer,
    failure_answer,
    status_line,
)
from ..model.sessions import MAX_SESSION_ID_LENGTH
from ..state import MockState
from ..store.journal import make_entry
from .accesslog import printable
from .recorder import Recorder

if TYPE_CHECKING:
    import httpx  # imported where a proxy is made: most mocks proxy nothing
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

log = logging.getLogger("mockserver.proxy")

PROXY_EXTENSION: Final = "verdict_proxy"
"""Where a proxying app keeps its :class:`ValidatingProxy` (``app.extensions``)."""

MAX_UPSTREAM_BODY: Final = 1 << 20
"""A larger answer is a 502: a verdict is a few kilobytes, and memory stays bounded."""

_HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",  # set again for the body as sent
        "content-encoding",  # identity is asked for; httpx decodes anything else
        "date",  # the server sending the answer sets these two (waitress would add Via)
        "server",
    }
)

FORWARDED: Final = frozenset(
    {
        "cache-control",
        "expires",
        "etag",
        "last-modified",
        "vary",
        "retry-after",
        "www-authenticate",
        "ratelimit",
        "ratelimit-policy",
        "ratelimit-limit",
        "ratelimit-remaining",
        "ratelimit-reset",
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
    }
)
"""The upstream's headers a client gets: what an API answer says about caching, retrying and
authenticating. Any other (``Set-Cookie``, ``Refresh``, ``Link``, ``Location``, CORS, a debug
header...) could act on the mock's origin or leak, and is dropped."""

INERT: Final = (
    ("X-Content-Type-Options", "nosniff"),
    ("Content-Security-Policy", "sandbox; default-src 'none'"),
)
"""On every proxied answer: a browser opening it runs nothing, on no origin."""

MIN_LOOKED_FOR = 6
"""A key shorter than this cannot be told from ordinary text: it is not looked for in answers."""


class _UpstreamQueryHidden(logging.Filter):
    """Hide the query of httpx's request log lines to an upstream: a key may be sent there."""

    def __init__(self) -> None:
        super().__init__()
        self.upstreams: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) > 1:
            url = str(args[1])
            if url.partition("?")[0] in self.upstreams and "?" in url:
                record.args = (args[0], url.partition("?")[0] + "?…", *args[2:])
        return True


_HIDE_QUERY = _UpstreamQueryHidden()


class _ResponseHeadersHidden(logging.Filter):
    """Hide the headers in httpcore's debug trace of an answer: an upstream may reflect a key
    in them (the client never gets those headers, and the log must not show them either)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith("receive_response_headers.complete"):
            record.msg, record.args = "receive_response_headers.complete (headers not shown)", ()
        return True


_HIDE_HEADERS = _ResponseHeadersHidden()
_TRACED: Final = ("httpcore.http11", "httpcore.http2")
"""The loggers of httpcore's trace that show an answer's headers."""


class UpstreamError(Exception):
    """The upstream gave no usable answer: the status, code and message the client gets."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Upstream:
    """What the upstream answered."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


@dataclass(frozen=True)
class Served:
    """What the proxy answers a call, the breaches of the upstream's answer, and what else the
    journal entry notes about it (a body that is not JSON, why it was not recorded)."""

    answer: Answer
    violations: list[Violation] = field(default_factory=list)
    notes: tuple[str, ...] = ()


class KeyFinder:
    """Finds the key sent upstream in an answer's text, and masks it: as it is, URL-encoded
    (the core's :class:`~verdict_contract.core.redact.Redactor`), base64 at any alignment; JSON
    escapes are undone by reading a JSON body before looking (:func:`_masked_body`)."""

    def __init__(self, key: str) -> None:
        # "verdict-mock" (a Server header, an upstream mock's answers) is no part of a key, even
        # of the public default one that begins with it
        self.redactor = Redactor(known="verdict-mock")
        self.redactor.add(key)
        self.encoded = base64_forms(key)

    def masked(self, text: str) -> str:
        text = self.redactor.text(text)
        for form in self.encoded:
            text = text.replace(form, "…")  # no characters of a key's encoding shown
        return text


def _masked_json(value: object, finder: KeyFinder) -> object:
    if isinstance(value, str):
        return finder.masked(value)
    if isinstance(value, list):
        return [_masked_json(item, finder) for item in value]
    if isinstance(value, dict):
        return {finder.masked(k): _masked_json(v, finder) for k, v in value.items()}
    return value


def _masked_body(body: bytes, finder: KeyFinder) -> bytes:
    """``body`` with the key masked; the same bytes when it holds none. Its text is masked as it
    is, then a JSON body is read (its ``\\uXXXX`` escapes undone) and written again if one of
    its strings still held the key."""
    text = body.decode("utf-8", "surrogateescape")
    shown = finder.masked(text)
    raw = body if shown == text else shown.encode("utf-8", "surrogateescape")
    try:
        parsed = json.loads(raw)
        masked = _masked_json(parsed, finder)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return raw
    return raw if masked == parsed else json.dumps(masked, ensure_ascii=False).encode()


def _reflection(upstream: Upstream, finder: KeyFinder) -> tuple[list[str], Upstream]:
    """Where ``upstream`` holds the key, and the answer with it masked."""
    places = []
    headers = []
    for name, value in upstream.headers:
        shown = finder.masked(value).replace("…", "...")  # a header is latin-1
        if shown != value:
            places.append(f"header {printable(name)}")
        headers.append((name, shown))
    body = _masked_body(upstream.body, finder)
    if body != upstream.body:
        places.append("body")
    return places, Upstream(upstream.status, headers, body)


def _reflected(places: list[str]) -> Violation:
    where = ", ".join(places)
    return Violation(
        rule="key_reflected",
        path="",
        message=f"the answer holds the key it was sent ({where}): masked for the client, "
        "not recorded",
        clause="§5",
        received=where,
        documented="no part of the key (§5.4: a server-side secret)",
    )


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
            return {
                "upstream": self.upstream,
                "answers": self.answers,
                "breaching_answers": self.breaching_answers,
                "violations": self.violations,
                "upstream_failures": self.upstream_failures,
            }


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
    except (UnicodeDecodeError, ValueError, RecursionError):
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


def _error(status: int, code: str, message: str, headers: Headers = ()) -> Answer:
    """The proxy's own answer, in the mock's error shape (upstream answers bring their type)."""
    return error_answer(status, code, message, headers=[("Content-Type", JSON), *headers])


def _session_id(pairs: list[tuple[str, str]] | None) -> str | None:
    values = [v for name, v in pairs or () if name == SESSION_PARAM]
    if len(values) == 1 and 0 < len(values[0]) <= MAX_SESSION_ID_LENGTH:
        return values[0]
    return None


class ValidatingProxy:
    """Serve ``GET``/``HEAD /e`` from the upstream; pass every other request to ``app``."""

    def __init__(self, app: WSGIApplication, state: MockState) -> None:
        settings = state.settings
        if settings.proxy_to is None:
            raise ValueError("a proxy needs settings.proxy_to")
        self.app = app
        self.state = state
        self.url = settings.proxy_to + ENDPOINT_PATH
        parts = urlsplit(settings.proxy_to)
        self.stats = ProxyStats(f"{parts.scheme}://{parts.netloc}{parts.path}")
        self.timeout = settings.proxy_timeout
        self.strict = settings.proxy_strict
        self.upstream_key = settings.upstream_key
        self.recorder = (
            Recorder(settings.record, settings.record_max_bytes)
            if settings.record is not None
            else None
        )
        _HIDE_QUERY.upstreams.add(self.url)
        if _HIDE_QUERY not in logging.getLogger("httpx").filters:
            logging.getLogger("httpx").addFilter(_HIDE_QUERY)
        for name in _TRACED:
            if _HIDE_HEADERS not in logging.getLogger(name).filters:
                logging.getLogger(name).addFilter(_HIDE_HEADERS)
        # Here, not at the top: most mocks proxy nothing, and httpx's import was a sixth of the
        # CPU of every mock's start.
        import httpx

        self.client = httpx.Client(
            timeout=httpx.Timeout(self.timeout),
            follow_redirects=False,
            trust_env=False,  # an HTTP(S)_PROXY variable must not reroute the key
            # No idle connections kept: an app dropped without closing leaves no socket open.
            limits=httpx.Limits(max_connections=settings.threads * 2, max_keepalive_connections=0),
        )
        # Upstream calls run on daemon threads of their own, so a client waits no longer than
        # the timeout whatever the upstream does (a call still running after that ends at
        # httpx's own timeout), and stop() ends every wait at once (nothing joins them at exit).
        self._pending: set[Future[Upstream]] = set()
        self._lock = threading.Lock()
        self._stopped = False

    def is_key(self, value: str) -> bool:
        """Whether ``value`` is a key this proxy knows (its own, or the upstream's)."""
        upstream = self.upstream_key is not None and hmac.compare_digest(
            value.encode(), self.upstream_key.reveal().encode()
        )
        return upstream or self.state.key_ok(value)

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        method = environ["REQUEST_METHOD"]
        if not is_api_call(method, environ.get("PATH_INFO", "")):
            return self.app(environ, start_response)
        started = time.perf_counter()
        query = environ.get("QUERY_STRING", "").encode("latin-1")
        pairs = parse_query(query)
        authorization = environ.get("HTTP_AUTHORIZATION")
        try:
            served = self.answer(method, query, pairs, authorization, environ)
        except Exception as exc:  # never a 5xx of our own for a request, however it fails
            failed = failure_answer(exc, f"proxying {method} {ENDPOINT_PATH}")
            served = Served(replace(failed, headers=[("Content-Type", JSON), *failed.headers]))
        answer = served.answer
        entry = make_entry(
            method=method,
            path=ENDPOINT_PATH,
            args=pairs if pairs is not None else [("?", query.decode("latin-1"))],
            authorization=authorization,
            reading=Outcome(answer.status, answer.outcome, None),
            is_key=self.is_key,
            latency_ms=(time.perf_counter() - started) * 1000,
            violations=tuple(one_line(v) for v in served.violations) + served.notes,
        )
        self.state.journal.add(entry, self.state.journal.generation)
        headers = [(k, v) for k, v in answer.headers if k.lower() not in _HOP_BY_HOP]
        headers += [*INERT, ("Content-Length", str(len(answer.body)))]
        start_response(status_line(answer.status), headers)
        return [b"" if method == "HEAD" else answer.body]

    def answer(
        self,
        method: str,
        query: bytes,
        pairs: list[tuple[str, str]] | None,
        authorization: str | None,
        environ: WSGIEnvironment,
    ) -> Served:
        """The answer for one call, the breaches of the upstream's answer and notes on it."""
        if self.upstream_key is not None:
            key = bearer_token(authorization)
            if key is None or not self.state.key_ok(key):
                return Served(
                    _error(
                        401,
                        "unauthorized",
                        "missing or invalid API key; send Authorization: Bearer <key> "
                        "(a key of this mock: it sends its own key upstream)",
                        headers=[("WWW-Authenticate", "Bearer")],
                    )
                )
            authorization = f"Bearer {self.upstream_key.reveal()}"
        headers = {"Accept": environ.get("HTTP_ACCEPT") or JSON, "Accept-Encoding": "identity"}
        if authorization is not None:
            headers["Authorization"] = authorization
        import httpx  # imported by __init__ already: a lookup

        try:
            url = httpx.URL(self.url + ("?" + query.decode("latin-1") if query else ""))
        except httpx.InvalidURL:
            return Served(_error(400, "bad_request", "the query string cannot be sent on"))
        future: Future[Upstream] = Future()
        with self._lock:
            if self._stopped:
                return Served(_error(503, "mock_stopping", "the mock is stopping"))
            self._pending.add(future)
        arguments = (future, method, url, headers)
        threading.Thread(target=self._call, args=arguments, daemon=True).start()
        try:
            upstream = future.result(timeout=self.timeout)
        except TimeoutError:
            return Served(self._failed(self._timed_out()))
        except UpstreamError as exc:
            return Served(self._failed(exc))
        finally:
            with self._lock:
                self._pending.discard(future)
        return self._checked(method, pairs, upstream, bearer_token(authorization))

    def _call(
        self, future: Future[Upstream], method: str, url: httpx.URL, headers: dict[str, str]
    ) -> None:
        """One upstream call on its own thread; its outcome goes to ``future`` if still awaited."""
        try:
            upstream = self._fetch(method, url, headers)
        except BaseException as exc:  # the waiter reads it (an UpstreamError, as a rule)
            with contextlib.suppress(InvalidStateError):  # stop() answered it already
                future.set_exception(exc)
        else:
            with contextlib.suppress(InvalidStateError):
                future.set_result(upstream)

    def stop(self) -> None:
        """End every wait on the upstream now (the server is stopping); refuse new calls."""
        with self._lock:
            self._stopped = True
            pending = list(self._pending)
        for future in pending:
            with contextlib.suppress(InvalidStateError):
                future.set_exception(UpstreamError(503, "mock_stopping", "the mock is stopping"))
        if self.recorder is not None:  # what is queued reaches the file (a bounded wait)
            self.recorder.flush(timeout=self.timeout)

    def _fetch(self, method: str, url: httpx.URL, headers: dict[str, str]) -> Upstream:
        import httpx  # imported by __init__ already: a lookup

        deadline = time.monotonic() + self.timeout
        try:
            with self.client.stream(method, url, headers=headers) as response:
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    if time.monotonic() > deadline:  # the client has had its 504: stop reading
                        raise self._timed_out()
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
        return _error(error.status, error.code, error.message)

    def _checked(
        self,
        method: str,
        pairs: list[tuple[str, str]] | None,
        upstream: Upstream,
        sent_key: str | None,
    ) -> Served:
        places: list[str] = []
        if sent_key is not None and len(sent_key) >= MIN_LOOKED_FOR:
            places, upstream = _reflection(upstream, KeyFinder(sent_key))
        has_body = method == "GET"
        violations = check_answer(upstream.status, upstream.body, has_body=has_body)
        if places:
            violations.append(_reflected(places))
        self.stats.count(len(violations))
        session_id = _session_id(pairs)
        shown = mask(session_id) if session_id and self.is_key(session_id) else session_id
        shown = None if shown is None else printable(shown)  # the client's: no terminal escapes
        for violation in violations:
            log.warning("upstream breach (n=%s): %s", shown, printable(one_line(violation)))
        is_json = _is_json(upstream.body)
        notes: list[str] = []
        not_json = None  # a 200's is a breach already (§4)
        if has_body and upstream.body and not is_json and upstream.status != 200:
            not_json = f"the upstream's {upstream.status} body is not JSON{_typed(upstream)}"
            notes.append(not_json)
        if self.recorder is not None and session_id is not None and has_body:
            if places:
                notes.append("not recorded: the answer holds the key sent upstream")
            elif not is_json:  # a cut or malformed body is not the session's answer
                log.warning("not recorded (n=%s): the upstream's body is not JSON", shown)
                notes.append("not recorded: the body is not JSON")
            else:
                refused = self.recorder.observe(session_id, upstream.status, upstream.body)
                notes += [refused] if refused else []
        if upstream.status >= 500:
            failed = _error(502, "upstream_error", f"the upstream answered {upstream.status}")
            return Served(failed, violations, tuple(notes))
        if violations and self.strict:
            return Served(_breach_answer(violations), violations, tuple(notes))
        if not_json is not None and self.strict:
            return Served(_error(502, "upstream_not_json", not_json), violations, tuple(notes))
        outcome = "breach" if violations else "proxied"
        headers = [(k, v) for k, v in upstream.headers if k.lower() in FORWARDED]
        answer = Answer(upstream.status, upstream.body, [("Content-Type", JSON), *headers], outcome)
        return Served(answer, violations, tuple(notes))


def _typed(upstream: Upstream) -> str:
    """`` (sent as text/html)``: the type the upstream gave its body, served as JSON."""
    types = [v for k, v in upstream.headers if k.lower() == "content-type"]
    sent = f"sent as {printable(types[0][:60])}, " if types else ""
    return f" ({sent}served as {JSON})"


def _is_json(body: bytes) -> bool:
    try:
        json.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return True


def _breach_answer(violations: list[Violation]) -> Answer:
    """``--proxy-strict``: a 502 whose error lists what the upstream's answer broke."""
    count = len(violations)
    error: dict[str, Any] = {
        "code": "contract_breach",
        "message": f"the upstream's answer breaks the contract ({count} "
        f"violation{'s' if count != 1 else ''}); first: {one_line(violations[0])}",
        "violations": [
            {
                "rule": v.rule,
                "clause": v.clause,
                "path": v.path,
                "message": v.message,
                "received": v.received,
                "documented": v.documented,
            }
            for v in violations
        ],
    }
    body = json.dumps({"error": error}, ensure_ascii=False).encode()
    return Answer(502, body, [("Content-Type", JSON), ("Cache-Control", NO_STORE)], "breach")
