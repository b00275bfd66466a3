"""Deliberately broken (and deliberately unusual but conforming) services for the suite.

Each variant wraps the mock's WSGI app and changes one behaviour, the way a real team's service
gets it wrong (a careless lookup, a debugging header left on, a 403 for a wrong key) or legally
differs (a vendor JSON media type, a per-call request id, a gateway's catch-all); the tests run
the contract suite against it in live mode, over real HTTP (or https with a private CA), with
``--verdict-session-id``. Every served variant counts what it was sent (:class:`Traffic`).
"""

from __future__ import annotations

import base64
import codecs
import functools
import gzip
import itertools
import json
import socket
import ssl
import threading
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import TYPE_CHECKING, Any

import pytest
from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from verdict_contract.contract_tests import clock
from verdict_contract.core.rates import RateLimit
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.model.sessions import parse_spec
from verdict_contract.mockserver.web.answers import state_of
from verdict_contract.testing.background import BackgroundServer

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

KEY = "sharpness-suite-key-7f3a9c"
SUITE = ("--pyargs", "verdict_contract.contract_tests", "-p", "no:cacheprovider")
"""The contract suite as an installed package, without pytest's cache."""

Alter = Callable[[Request, Response], None]


@dataclass(frozen=True)
class Variant:
    alter: Alter | None = None  # changes the inner answer in place
    before: Callable[[Request], Response | None] | None = None  # may answer instead
    sessions: tuple[dict[str, Any], ...] = (
        {"verdict": "contradicted", "conclusive": True},
        {"verdict": "uncontradicted"},
    )
    rate_limit: str = "off"
    args: tuple[str, ...] = ()  # the suite's options this variant needs
    fails: tuple[str, ...] = ()  # the suite's checks it must fail; none: the suite must pass
    control: bool = False  # serve the mock's control API too (it is the mock, not a service)


KNOWN_IDS = "verdict.known_ids"
"""The WSGI environ key under which a variant finds the fresh ids its mock knows."""
MOCK_CLOCK = "verdict.mock_clock"
"""The WSGI environ key under which a variant finds its mock's monotonic clock: the one the
suite's waits move while it serves (:class:`MovedClock`)."""


@dataclass
class Traffic:
    """What a served variant answered: calls of /e per session id, statuses, request targets."""

    calls: Counter[str]
    statuses: Counter[int]
    targets: list[str] = field(default_factory=list)  # each request line's target, as sent


@dataclass
class MovedClock:
    """The suite's clock (:mod:`verdict_contract.contract_tests.clock`) while a service of these
    tests serves: a wait the suite makes moves it, and the service's own clock (its mock's rate
    window), at once instead of passing (a ``Retry-After`` that lies cost 5 s of real time)."""

    service: Callable[[float], None]
    """Moves the served mock's clock as far."""
    now: float = 0.0
    slept: list[float] = field(default_factory=list)

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        self.service(seconds)


@contextmanager
def moved_clock(service: Callable[[float], None]) -> Iterator[MovedClock]:
    """The suite's waits in this process move a :class:`MovedClock` until the block ends."""
    moved = MovedClock(service)
    before, clock.CLOCK = clock.CLOCK, moved
    try:
        yield moved
    finally:
        clock.CLOCK = before


@dataclass
class Running:
    base_url: str
    session_ids: list[str]
    expired_id: str
    key: str = KEY
    traffic: Traffic | None = None
    clock: MovedClock | None = None
    """What the suite's waits in this process did while it served (``serve`` only)."""

    def target_args(self, *extra: str) -> list[str]:
        """The suite's command line for this target: its URL and key, no session id."""
        return [*SUITE, "--base-url", self.base_url, "--verdict-api-key", self.key, *extra]

    def session_args(self) -> list[str]:
        args = ["--verdict-expired-session-id", self.expired_id]
        for n in self.session_ids:
            args += ["--verdict-session-id", n]
        return args

    def suite_args(self, *extra: str) -> list[str]:
        """The suite's command line for this target with its fresh and expired sessions."""
        return self.target_args(*self.session_args(), *extra)


def _body(response: Response) -> Any:
    return json.loads(response.get_data())


def _set_body(response: Response, body: Any) -> None:
    response.set_data(json.dumps(body))


def on_verdict(change: Callable[[dict[str, Any]], None]) -> Alter:
    """An alteration of every 200 verdict body."""

    def alter(request: Request, response: Response) -> None:
        if response.status_code == 200:
            body = _body(response)
            change(body)
            _set_body(response, body)

    return alter


def _wrap(app: Any, variant: Variant, ids: list[str], traffic: Traffic) -> Any:
    lock = threading.Lock()

    def wsgi(environ: WSGIEnvironment, start_response: StartResponse) -> Any:
        environ[KNOWN_IDS] = ids
        environ[MOCK_CLOCK] = lambda: time.monotonic() + state_of(app).skew
        request = Request(environ)
        answer = variant.before(request) if variant.before else None
        if answer is None:
            answer = Response.from_app(app, environ)
            if variant.alter is not None:
                variant.alter(request, answer)
        with lock:
            if request.path == "/e":
                traffic.calls[request.args.get("n", "")] += 1
            traffic.statuses[answer.status_code] += 1
            query = environ.get("QUERY_STRING", "")
            traffic.targets.append(environ.get("PATH_INFO", "") + (f"?{query}" if query else ""))
        return answer(environ, start_response)

    return wsgi


def _app(variant: Variant, key: str) -> tuple[Any, list[str], str]:
    app = create_app(
        Settings(
            api_keys=(key,),
            control=variant.control,
            demo_sessions=False,
            rate_limit=RateLimit.parse(variant.rate_limit),
        )
    )
    state = state_of(app)
    ids = [state.mint(parse_spec(spec)).id for spec in variant.sessions]
    expired = state.mint(parse_spec({"age_seconds": 901})).id
    return app, ids, expired


@contextmanager
def serve(variant: Variant, key: str = KEY) -> Iterator[Running]:
    """``variant`` on 127.0.0.1 under the mock's own server; meanwhile the suite's waits in this
    process move a :class:`MovedClock` and the mock's clock with it (a suite run in another
    process sleeps for real)."""
    app, ids, expired = _app(variant, key)
    traffic = Traffic(Counter(), Counter())
    with (
        BackgroundServer(_wrap(app, variant, ids, traffic)) as server,
        moved_clock(state_of(app).advance) as moved,
    ):
        yield Running(server.base_url, ids, expired, key, traffic, moved)


@contextmanager
def serve_tls(variant: Variant, context: ssl.SSLContext, key: str = KEY) -> Iterator[Running]:
    """``variant`` over https with ``context`` (a certificate of a private CA), on 127.0.0.1."""
    with serve_streaming(variant, key, context) as running:
        yield running


RAW_NAMES = "verdict.raw_header_names"
"""The WSGI environ key holding the request's header names as sent (WSGI keeps no case)."""


class _RawNamesHandler(WSGIRequestHandler):
    """werkzeug's handler, also passing on the header names as the client spelled them."""

    def make_environ(self) -> WSGIEnvironment:
        environ = super().make_environ()
        environ[RAW_NAMES] = list(self.headers.keys())
        return environ


@contextmanager
def serve_streaming(
    variant: Variant, key: str = KEY, context: ssl.SSLContext | None = None
) -> Iterator[Running]:
    """``variant`` under werkzeug's threaded server, which streams a body as it is made.

    The mock's own server reads a whole WSGI body before it writes; a hostile answer (an
    endless stream, a drip) needs one that sends each piece as it comes.
    """
    app, ids, expired = _app(variant, key)
    traffic = Traffic(Counter(), Counter())
    server = make_server(
        "127.0.0.1",
        0,
        _wrap(app, variant, ids, traffic),
        threaded=True,
        request_handler=_RawNamesHandler,
        ssl_context=context,
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    scheme = "https" if context is not None else "http"
    try:
        yield Running(f"{scheme}://127.0.0.1:{server.server_port}", ids, expired, key, traffic)
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()


def run_suite(
    pytester: pytest.Pytester,
    variant: Variant,
    *extra: str,
    key: str = KEY,
    fresh_process: bool = False,
) -> tuple[pytest.RunResult, Running]:
    """The suite against ``variant``, with the options it needs: in this process, by default.

    ``fresh_process`` runs it in a new interpreter: where warnings are errors, this process
    (which has imported the suite's modules already) would warn that they cannot be rewritten.
    """
    run = pytester.runpytest_subprocess if fresh_process else pytester.runpytest_inprocess
    with serve(variant, key) as running:
        result = run(*running.suite_args(*variant.args, *extra))
    return result, running


_counter = itertools.count()


def _mutable(body: dict[str, Any]) -> None:
    body["summary"] += f" (evaluation {next(_counter)})"


def _lookup_before_auth(request: Request) -> Response | None:
    n = request.args.get("n", "")
    if n.startswith("verdict-contract-unknown-"):
        return Response('{"error": "not found"}', 404, content_type="application/json")
    return None


def _query_key_authorises(request: Request) -> Response | None:
    for name in ("api_key", "key", "token", "access_token"):
        if request.args.get(name):  # whatever it is: the wrapped mock checks it
            request.environ["HTTP_AUTHORIZATION"] = f"Bearer {request.args[name]}"
    return None


def _basic_accepted(request: Request) -> Response | None:
    if request.headers.get("Authorization", "").startswith("Basic "):
        request.environ["HTTP_AUTHORIZATION"] = f"Bearer {KEY}"
    return None


def _bad_input_crashes(request: Request) -> Response | None:
    if not request.args.get("n"):
        return Response("Internal Server Error", 500)
    return None


def _serve_any_id(request: Request, response: Response) -> None:
    if response.status_code == 404:
        response.status_code = 200
        response.set_data(json.dumps(_valid()))


def _valid() -> dict[str, Any]:
    return {
        "schema": 7,
        "provenance": {"build": "b-1"},
        "verdict": "uncontradicted",
        "conclusive": False,
        "summary": "Nothing found.",
        "contradicting_families": [],
        "families": {"measured": 6, "reporting": 6},
        "signals": [],
    }


def _header(name: str, value: str) -> Alter:
    def alter(request: Request, response: Response) -> None:
        response.headers[name] = value

    return alter


def _status(old: int, new: int) -> Alter:
    def alter(request: Request, response: Response) -> None:
        if response.status_code == old:
            response.status_code = new

    return alter


def _disputed_conclusive(body: dict[str, Any]) -> None:
    body.update(verdict="disputed", conclusive=True, contradicting_families=[])


def _extra_fields(body: dict[str, Any]) -> None:
    body["risk_score"] = 0.2
    body["provenance"]["region"] = "eu-west"
    for signal in body["signals"]:
        signal["weight"] = 1


def _unknown_prefix(body: dict[str, Any]) -> None:
    body["signals"].append({"id": "vendor.beta-probe", "tier": "weak", "headline": "Beta."})


def _calls_of_e() -> Callable[[Request], int | None]:
    """The number of a call of ``/e`` (0 for the first), or None for any other path.

    Counted per served instance (its host and port), so each run starts afresh.
    """
    counts: dict[str, itertools.count[int]] = {}

    def number(request: Request) -> int | None:
        if request.path != "/e":
            return None
        return next(counts.setdefault(request.host, itertools.count()))

    return number


def _throttle(first: int, retry_after: Callable[[], str | None]) -> Callable[..., Response | None]:
    """The first ``first`` calls of ``/e`` answer 429 (with ``retry_after()`` if not None)."""
    number = _calls_of_e()

    def before(request: Request) -> Response | None:
        call = number(request)
        if call is None or call >= first:
            return None
        answer = Response('{"code": "rate_limited", "message": "slow down"}', 429)
        answer.content_type = "application/json"
        answer.headers["Date"] = formatdate(usegmt=True)
        value = retry_after()
        if value is not None:
            answer.headers["Retry-After"] = value
        return answer

    return before


def _in_one_second() -> str:
    return formatdate(time.time() + 1, usegmt=True)


def _only_contradicted(change: Callable[[bytes], bytes]) -> Alter:
    """Break the raw body of the contradicted session only; the other session is left alone."""

    def alter(request: Request, response: Response) -> None:
        if response.status_code == 200 and _body(response)["verdict"] == "contradicted":
            response.set_data(change(response.get_data()))

    return alter


def _with_bom(raw: bytes) -> bytes:
    return codecs.BOM_UTF8 + raw


def _with_nan(raw: bytes) -> bytes:
    body = json.loads(raw)
    body["families"]["measured"] = float("nan")
    return json.dumps(body).encode()


def _with_duplicate_key(raw: bytes) -> bytes:
    return b'{"verdict": "uncontradicted", ' + raw.lstrip()[1:]


def _cut(raw: bytes) -> bytes:
    return raw[: len(raw) // 2]


def _verdict_null(raw: bytes) -> bytes:
    body = json.loads(raw)
    body["verdict"] = None
    return json.dumps(body).encode()


def _blank_summary_elsewhere(request: Request, response: Response) -> None:
    if response.status_code == 200 and _body(response)["verdict"] == "uncontradicted":
        body = _body(response)
        body["summary"] = " "
        _set_body(response, body)


def _both(*alters: Alter) -> Alter:
    def alter(request: Request, response: Response) -> None:
        for each in alters:
            each(request, response)

    return alter


def _echo_key(request: Request, response: Response) -> None:
    """A careless service that puts the credential it got into a (broken) answer."""
    if response.status_code == 200:
        response.set_data(f"oops {request.headers.get('Authorization', '')} is not JSON")


def _careless_compare(request: Request) -> Response | None:
    """Accepts any key that starts with the real one, or equals it ignoring case."""
    sent = request.headers.get("Authorization", "").removeprefix("Bearer ")
    if sent != KEY and (sent.startswith(KEY) or sent.lower() == KEY.lower()):
        request.environ["HTTP_AUTHORIZATION"] = f"Bearer {KEY}"
    return None


def _gzip(request: Request, response: Response) -> None:
    if "gzip" in request.headers.get("Accept-Encoding", "") and response.status_code == 200:
        response.set_data(gzip.compress(response.get_data()))
        response.headers["Content-Encoding"] = "gzip"


def _chunked(request: Request, response: Response) -> None:
    data = response.get_data()
    response.response = [data[:7], data[7:30], data[30:]]  # no length: sent chunked
    del response.headers["Content-Length"]


def _unusual_json(request: Request, response: Response) -> None:
    if response.status_code == 200:
        body = _body(response)
        reordered = dict(reversed(list(body.items())))
        response.set_data("\r\n\t " + json.dumps(reordered, indent="\t", ensure_ascii=True) + " \n")


def _known(request: Request) -> list[str]:
    known: list[str] = request.environ.get(KNOWN_IDS, [])
    return known


def _lookup_by(match: Callable[[str, str], bool]) -> Callable[[Request], Response | None]:
    """A session lookup that finds a known id by ``match(sent, known)``, as a careless store."""

    def before(request: Request) -> Response | None:
        sent = request.args.get("n", "")
        if request.path == "/e" and sent not in _known(request):
            found = next((n for n in _known(request) if match(sent, n)), None)
            if found is not None:
                request.environ["QUERY_STRING"] = f"n={found}"
        return None

    return before


def _echo_token_on_401(request: Request, response: Response) -> None:
    """A 401 that quotes the token it was sent, as many frameworks' default errors do."""
    if response.status_code == 401:
        token = request.headers.get("Authorization", "").partition(" ")[2]
        response.set_data(json.dumps({"error": f"invalid api key '{token}'"}))


def _debug_header(request: Request, response: Response) -> None:
    """A debugging header left on: the first 12 characters of the credential."""
    token = request.headers.get("Authorization", "").partition(" ")[2]
    if token:
        response.headers["X-Debug-Auth"] = token[:12]


def _key_in_every_answer(request: Request, response: Response) -> None:
    """A gateway that passes its own upstream credential back on every answer, to anyone."""
    response.headers["X-Upstream-Authorization"] = f"Bearer {KEY}"


def _token_after_64_kib(request: Request, response: Response) -> None:
    """A 401 whose body quotes the token it was sent, after 70 KB of other text."""
    if response.status_code == 401:
        token = request.headers.get("Authorization", "").partition(" ")[2]
        response.set_data(json.dumps({"detail": "x" * 70_000, "token": token}))


def _token_in_reason(request: Request, response: Response) -> None:
    """A 401 whose status line says which token it refused."""
    token = request.headers.get("Authorization", "").partition(" ")[2]
    if response.status_code == 401 and token:
        response.status = f"401 Unknown key {token}"


def _credential_base64_in_a_header(request: Request, response: Response) -> None:
    """A debugging header with the whole Authorization value, base64-encoded ("Bearer key")."""
    value = request.headers.get("Authorization", "")
    if value:
        response.headers["X-Debug-Auth"] = base64.b64encode(value.encode()).decode()


def _token_base64url_in_the_body(request: Request, response: Response) -> None:
    """A 401 that hands back the token base64url-encoded, inside a JSON "trace"."""
    token = request.headers.get("Authorization", "").partition(" ")[2]
    if response.status_code == 401 and token:
        trace = base64.urlsafe_b64encode(json.dumps({"t": token}).encode()).decode()
        response.set_data(json.dumps({"error": "invalid api key", "trace": trace}))


def _key_part_encoded(request: Request, response: Response) -> None:
    """A debugging header with the token less its last 4 characters in hex, and a body with
    them in base64: only a mask's 4 characters are missing."""
    token = request.headers.get("Authorization", "").partition(" ")[2][:-4]
    if token:
        response.headers["X-Debug-Hex"] = token.encode().hex()
        response.headers["X-Debug-B64"] = base64.b64encode(token.encode()).decode()


def _token_in_capitals(request: Request, response: Response) -> None:
    """A debugging header with the token in capitals, and a 401 body with it full-width."""
    token = request.headers.get("Authorization", "").partition(" ")[2]
    if token:
        response.headers["X-Debug-Caps"] = token.upper()
        if response.status_code == 401:
            wide = "".join(chr(ord(c) + 0xFEE0) if c.isalnum() else c for c in token)
            response.set_data(json.dumps({"error": "invalid api key", "seen": wide}))


def _byte_array_header(request: Request, response: Response) -> None:
    """A debugging header listing bytes as a C array does, two of them the key's first two
    (``s``, ``h``): not the key, nor 4 bytes of it."""
    response.headers["X-Trace-Bytes"] = "{0x73, 0x68, 0x00, 0x2d}"


def _base64_request_id(request: Request, response: Response) -> None:
    """A random base64 request id on every answer: no credential in it."""
    response.headers["X-Request-Id"] = base64.b64encode(uuid.uuid4().bytes * 2).decode()


def _key_ending_on_401(request: Request, response: Response) -> None:
    """A 401 that names the key by its last 4 characters only: that is no leak."""
    if response.status_code == 401:
        token = request.headers.get("Authorization", "").partition(" ")[2]
        response.set_data(json.dumps({"error": f"the key ending in {token[-4:]} is not valid"}))


def _loose_scheme(request: Request) -> Response | None:
    """Checks the scheme by a prefix and strips what follows it: 'Bear', 'Bearer' glued on."""
    value = request.headers.get("Authorization", "")
    if value.startswith("Bear") and not value.startswith("Bearer "):
        token = value.removeprefix("Bearer").removeprefix("Bear").strip()
        request.environ["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return None


def _forbidden_wrong_key(request: Request, response: Response) -> None:
    """403 instead of 401 for a key that is present but wrong."""
    if response.status_code == 401 and request.headers.get("Authorization"):
        response.status_code = 403


def _gone_when_expired(request: Request, response: Response) -> None:
    n = request.args.get("n", "")
    if response.status_code == 404 and n not in _known(request) and n.startswith("eyJ"):
        response.status_code = 410  # signed ids of the mock; the suite's own start otherwise


def _reevaluated() -> Alter:
    """Each call evaluates the session again: one family fewer reports on every later call."""
    served: Counter[str] = Counter()

    def alter(request: Request, response: Response) -> None:
        if response.status_code == 200:
            n = request.args.get("n", "")
            body = _body(response)
            body["families"]["reporting"] = max(0, body["families"]["reporting"] - served[n])
            served[n] += 1
            _set_body(response, body)

    return alter


def _request_id(body: dict[str, Any]) -> None:
    body["meta"] = {"request_id": uuid.uuid4().hex, "served_at": time.time()}


def _catch_all(body: str) -> Callable[[Request], Response | None]:
    """A gateway that answers 200 on every path but /e."""

    def before(request: Request) -> Response | None:
        if request.path == "/e":
            return None
        return Response(body, 200, content_type="application/json")

    return before


MOCK_LOOKALIKE = json.dumps(
    {"status": "ok", "schema": 7, "session_lifetime": 900, "journal_entries": 0}
)
"""What a catch-all gateway would need to answer to look like the mock's health."""


def _no_retry_after(request: Request, response: Response) -> None:
    if response.status_code == 429:
        del response.headers["Retry-After"]


def _probe_told_to_wait_1_s_for_4() -> Callable[[Request], Response | None]:
    """The rate-limit probe's session (only) is refused from its 11th call on, for 4 s, each 429
    saying ``Retry-After: 1``: a lie however fast or slow the run is, and no other check is
    throttled (a key-wide window would make it a matter of when the window began). The 4 s are
    the mock's (``MOCK_CLOCK``), which the suite's waits move while it serves."""
    seen: dict[str, list[float]] = {}  # per served instance: [calls, first refusal]

    def before(request: Request) -> Response | None:
        if request.path != "/e" or request.args.get("n") != "verdict-contract-probe":
            return None
        state = seen.setdefault(request.host, [0.0, 0.0])
        state[0] += 1
        if state[0] <= 10:
            return None
        now = request.environ[MOCK_CLOCK]()
        state[1] = state[1] or now
        if now - state[1] >= 4.0:
            return None
        answer = Response('{"code": "rate_limited"}', 429, content_type="application/json")
        answer.headers["Retry-After"] = "1"
        return answer

    return before


def _authorization_spelled_exactly(request: Request) -> Response | None:
    """Reads the key only from a field spelled ``Authorization`` (needs ``serve_streaming``)."""
    names = request.environ.get(RAW_NAMES, [])
    if request.path == "/e" and "Authorization" not in names:
        return Response('{"code": "unauthorized"}', 401, content_type="application/json")
    return None


def _unreadable_retry_after_for_later_sessions() -> Callable[[Request], Response | None]:
    """The first authorised call of each fresh session but the first answers 429 with a
    Retry-After no client can read; the first session (which the auth checks use) is spared."""
    met: set[tuple[str, str]] = set()

    def before(request: Request) -> Response | None:
        n = request.args.get("n", "")
        known = request.environ[KNOWN_IDS][1:]
        if request.path != "/e" or n not in known or (request.host, n) in met:
            return None
        if request.headers.get("Authorization") != f"Bearer {KEY}":
            return None
        met.add((request.host, n))
        answer = Response('{"code": "rate_limited"}', 429, content_type="application/json")
        answer.headers["Retry-After"] = "in a minute"
        return answer

    return before


def _changes_from_the_third_call(expires_after: int | None = None) -> Alter:
    """Each session's first two authorised verdicts agree; from the third on, another: two calls
    back to back agree, the run's first and last do not. With ``expires_after``, a session
    answers 404 (expired) from that many calls on."""
    calls: Counter[tuple[str, str]] = Counter()

    def alter(request: Request, response: Response) -> None:
        if response.status_code != 200:
            return
        calls[request.host, request.args.get("n", "")] += 1
        made = calls[request.host, request.args.get("n", "")]
        if expires_after is not None and made > expires_after:
            response.status_code = 404
            response.set_data('{"error": {"code": "session_not_found", "message": "expired"}}')
        elif made >= 3:
            body = _body(response)
            body["families"]["reporting"] = max(0, body["families"]["reporting"] - 1)
            _set_body(response, body)

    return alter


def _unreadable_retry_after(request: Request, response: Response) -> None:
    if response.status_code == 429:
        response.headers["Retry-After"] = "in a minute"


def _stack_trace_on_404(request: Request, response: Response) -> None:
    if response.status_code == 404:
        response.set_data(
            "java.lang.IllegalStateException: no session\n"
            "\tat com.example.verdict.Lookup.find(Lookup.java:42)\n"
            "\tat com.example.verdict.Api.explain(Api.java:17)\n"
            "upstream: 10.2.3.4:8443"
        )
        response.content_type = "text/plain"


def _break_refused(body: dict[str, Any]) -> None:
    if body["verdict"] == "refused":
        body["contradicting_families"] = ["render"]


EVERY_KIND: tuple[dict[str, Any], ...] = tuple(
    {"verdict": v, "conclusive": v in ("contradicted", "refused")}
    for v in ("contradicted", "disputed", "uncontradicted", "insufficient", "refused")
)


# name -> a service that breaks the contract in one way, and the checks that must catch it
BROKEN: dict[str, Variant] = {
    "wrong success status": Variant(
        alter=_status(200, 201), fails=("test_success_is_a_json_object",)
    ),
    "text content type": Variant(
        alter=_header("Content-Type", "text/plain"), fails=("test_success_is_a_json_object",)
    ),
    "schema 8": Variant(
        alter=on_verdict(lambda b: b.update(schema=8)),
        fails=("test_schema_version", "test_verdicts_keep_the_contract"),
    ),
    "broken rule": Variant(
        alter=on_verdict(_disputed_conclusive), fails=("test_verdicts_keep_the_contract",)
    ),
    "mutable verdict": Variant(alter=on_verdict(_mutable), fails=("test_verdict_is_immutable",)),
    "lookup before auth": Variant(
        before=_lookup_before_auth, fails=("test_auth_comes_before_lookup",)
    ),
    "key in query authorises": Variant(
        before=_query_key_authorises,
        args=("--verdict-check-key-in-url",),
        fails=("test_key_in_the_query_does_not_authorise",),
    ),
    "Basic scheme accepted": Variant(
        before=_basic_accepted, fails=("test_missing_or_invalid_key_is_401",)
    ),
    "404 never sent": Variant(
        alter=_serve_any_id, fails=("test_unknown_session_is_404", "test_expired_session_is_404")
    ),
    "5xx on malformed input": Variant(
        before=_bad_input_crashes, fails=("test_malformed_request_is_4xx",)
    ),
    "CORS for everyone": Variant(
        alter=_header("Access-Control-Allow-Origin", "*"),
        fails=("test_no_cross_origin_invitation",),
    ),
    "no rate limit": Variant(
        args=("--verdict-probe-rate-limit", "30"),
        fails=("test_rate_limit_answers_429_then_recovers",),
    ),
    "a body with a byte order mark, another breaking a rule": Variant(
        alter=_both(_only_contradicted(_with_bom), _blank_summary_elsewhere),
        fails=("test_success_is_a_json_object", "test_verdicts_keep_the_contract"),
    ),
    "NaN in one body": Variant(
        alter=_only_contradicted(_with_nan), fails=("test_success_is_a_json_object",)
    ),
    "duplicate key in one body": Variant(
        alter=_only_contradicted(_with_duplicate_key), fails=("test_success_is_a_json_object",)
    ),
    "cut body in one session": Variant(
        alter=_only_contradicted(_cut), fails=("test_success_is_a_json_object",)
    ),
    "null verdict in one session": Variant(
        alter=_only_contradicted(_verdict_null), fails=("test_verdicts_keep_the_contract",)
    ),
    "careless key comparison": Variant(
        before=_careless_compare, fails=("test_near_miss_key_is_401",)
    ),
    "503 instead of 429": Variant(
        alter=_status(429, 503),
        rate_limit="15/1",
        args=("--verdict-probe-rate-limit", "30"),
        fails=("test_rate_limit_answers_429_then_recovers",),
    ),
    "401 quotes the token it was sent": Variant(
        alter=_echo_token_on_401, fails=("test_credential_is_never_reflected",)
    ),
    "a debugging header with part of the key": Variant(
        alter=_debug_header, fails=("test_credential_is_never_reflected",)
    ),
    "the key in every answer": Variant(
        alter=_key_in_every_answer, fails=("test_credential_is_never_reflected",)
    ),
    "a 401 quoting the token after 64 KiB": Variant(
        alter=_token_after_64_kib, fails=("test_credential_is_never_reflected",)
    ),
    "the token in the reason phrase": Variant(
        alter=_token_in_reason, fails=("test_credential_is_never_reflected",)
    ),
    "the credential base64-encoded in a header": Variant(
        alter=_credential_base64_in_a_header, fails=("test_credential_is_never_reflected",)
    ),
    "the token base64url-encoded in a 401 body": Variant(
        alter=_token_base64url_in_the_body, fails=("test_credential_is_never_reflected",)
    ),
    "the token less its last 4 encoded": Variant(
        alter=_key_part_encoded, fails=("test_credential_is_never_reflected",)
    ),
    "the token in capitals or full-width": Variant(
        alter=_token_in_capitals, fails=("test_credential_is_never_reflected",)
    ),
    "case-insensitive session lookup": Variant(
        before=_lookup_by(lambda sent, n: sent.lower() == n.lower()),
        fails=("test_near_miss_session_id_is_not_found",),
    ),
    "session lookup by prefix": Variant(
        before=_lookup_by(lambda sent, n: len(sent) >= 8 and n.startswith(sent)),
        fails=("test_near_miss_session_id_is_not_found",),
    ),
    "session id trimmed before lookup": Variant(
        before=_lookup_by(lambda sent, n: sent.strip() == n),
        fails=("test_near_miss_session_id_is_not_found",),
    ),
    "scheme checked by prefix": Variant(
        before=_loose_scheme, fails=("test_missing_or_invalid_key_is_401",)
    ),
    "403 for a wrong key": Variant(
        alter=_forbidden_wrong_key,
        fails=("test_missing_or_invalid_key_is_401", "test_near_miss_key_is_401"),
    ),
    "410 for an expired session": Variant(
        alter=_gone_when_expired, fails=("test_expired_session_is_404",)
    ),
    "verdict re-evaluated on every call": Variant(
        alter=_reevaluated(), fails=("test_verdict_is_immutable",)
    ),
    "a verdict that changes from its third call on": Variant(
        alter=_changes_from_the_third_call(), fails=("test_verdict_never_changes_during_the_run",)
    ),
    "a verdict that changes, then the session expires": Variant(
        alter=_changes_from_the_third_call(expires_after=4),
        fails=("test_verdict_never_changes_during_the_run",),
    ),
    "a 429 whose Retry-After no client can read": Variant(
        before=_unreadable_retry_after_for_later_sessions(),
        fails=("test_success_is_a_json_object",),
    ),
    "the probe meets a Retry-After no client can read": Variant(
        alter=_unreadable_retry_after,
        rate_limit="15/1",
        args=("--verdict-probe-rate-limit", "30"),
        fails=("test_rate_limit_answers_429_then_recovers",),
    ),
}

HEADER_NAME_READ_EXACTLY = Variant(before=_authorization_spelled_exactly)
"""Finds the key only under ``Authorization`` spelled so: served by ``serve_streaming`` only."""

CONFORMING: dict[str, Variant] = {
    "the mock itself, with the rate-limit probe": Variant(
        rate_limit="15/1", args=("--verdict-probe-rate-limit", "30")
    ),
    "extra fields": Variant(alter=on_verdict(_extra_fields)),
    "unknown signal prefix": Variant(alter=on_verdict(_unknown_prefix)),
    "refused and conclusive": Variant(sessions=({"verdict": "refused", "conclusive": True},)),
    "charset in the content type": Variant(
        alter=_header("Content-Type", "application/json; charset=utf-8")
    ),
    "gzip-compressed verdicts": Variant(alter=_gzip),
    "chunked answers": Variant(alter=_chunked),
    "unusual JSON formatting and key order": Variant(alter=_unusual_json),
    "throttled twice, Retry-After in seconds": Variant(before=_throttle(2, lambda: "1")),
    "throttled twice, Retry-After as an HTTP-date": Variant(before=_throttle(2, _in_one_second)),
    "throttled twice, no Retry-After": Variant(before=_throttle(2, lambda: None)),
    "an undocumented field that changes on every call": Variant(alter=on_verdict(_request_id)),
    "a vendor JSON media type": Variant(
        alter=_header("Content-Type", "application/vnd.verdict.v7+json")
    ),
    "a +json media type with a charset": Variant(
        alter=_header("Content-Type", "application/verdict+json; charset=utf-8")
    ),
    "a gateway answering 200 on every other path": Variant(before=_catch_all('{"status": "ok"}')),
    "a gateway whose catch-all looks like the mock's health": Variant(
        before=_catch_all(MOCK_LOOKALIKE)
    ),
    "a 401 naming the key's last 4 characters": Variant(alter=_key_ending_on_401),
    "a base64 request id on every answer": Variant(alter=_base64_request_id),
    "a C array of bytes on every answer": Variant(alter=_byte_array_header),
    "every verdict kind": Variant(sessions=EVERY_KIND, args=("--verdict-require-every-kind",)),
    "the probe meets a 429 without Retry-After": Variant(
        alter=_no_retry_after, rate_limit="15/1", args=("--verdict-probe-rate-limit", "30")
    ),
    "the probe meets a Retry-After that lies": Variant(
        before=_probe_told_to_wait_1_s_for_4(), args=("--verdict-probe-rate-limit", "30")
    ),
    "a stack trace and an internal address in 404 bodies": Variant(alter=_stack_trace_on_404),
}

SLOW_LIMIT_REFUSED_BROKEN = Variant(
    alter=on_verdict(_break_refused),
    rate_limit="2/10",
    sessions=(
        {"verdict": "contradicted", "conclusive": True},
        {"verdict": "uncontradicted"},
        {"verdict": "disputed"},
        {"verdict": "refused", "conclusive": False},
    ),
)
"""Two requests per 10 s (the run's preflight call with the key, then one session), a bug in
``refused`` verdicts only: a run within a small wait budget checks the first session and cannot
reach the broken one."""

OTHER_KEY = Variant()
"""A plain service; run against it with a key it does not know."""

ALWAYS_THROTTLED = Variant(before=_throttle(10**9, lambda: "120"))
"""Every call of ``/e`` is a 429 asking for two minutes: more than the wait budget."""

THROTTLED_RETRY_AT_ONCE = Variant(before=_throttle(10**9, lambda: "0"))
"""Every call of ``/e`` is a 429 saying to retry at once: the retry cap runs out, not time."""

LIMITED = Variant(rate_limit="10/1")
"""The mock's own limit of 10 requests per second for the key."""

CONTROLLED = Variant(control=True)
"""The mock itself, control API included: it signs as the mock."""

MARKUP_IN_A_BODY = Variant(
    alter=_only_contradicted(lambda raw: b"<script>alert('x')</script><img src=http://x/y>")
)
"""Answers one session with markup where the verdict belongs: a report must show it as text."""

KEY_ECHO = Variant(alter=_echo_key)
"""Echoes the credential it received into a broken 200 body, which the suite quotes."""

STAGING_KEY = "sk_live_9f8e7d6c5b4a3210ZyXwVuTsRqPoNm1a0Z"
"""A key of 42 characters, as a real staging's."""


def _key_escaped_in_a_200(request: Request, response: Response) -> None:
    """A 200 whose body is a debug field carrying the credential it was sent, JSON-escaped
    (``\\u0073\\u006b…``) after 27 characters of padding: the raw text never holds the key,
    and a failure that quotes the body cut at 80 characters keeps all but its last one."""
    token = request.headers.get("Authorization", "").partition(" ")[2]
    if response.status_code == 200 and token:
        escaped = "".join(f"\\u{ord(c):04x}" for c in token)
        response.set_data('{"debug":"' + "A" * 27 + escaped + '"}')


KEY_ESCAPED_IN_A_200 = Variant(
    alter=_key_escaped_in_a_200,
    fails=("test_credential_is_never_reflected", "test_verdicts_keep_the_contract"),
)
"""Answers a valid key with its own key, JSON-escaped, padded to end past a quote's cut."""


def _key_encoded_as_the_verdict(encode: Callable[[bytes], str]) -> Alter:
    """A 200 whose ``verdict`` is the credential it was sent, encoded: a check that quotes what
    it received quotes it."""

    def alter(request: Request, response: Response) -> None:
        token = request.headers.get("Authorization", "").partition(" ")[2]
        if response.status_code == 200 and token:
            verdict = encode(token.encode())
            response.set_data(json.dumps({**json.loads(response.get_data()), "verdict": verdict}))

    return alter


KEY_ENCODED_AS_THE_VERDICT = {
    encoding: Variant(
        alter=_key_encoded_as_the_verdict(encode),
        fails=("test_credential_is_never_reflected", "test_verdicts_keep_the_contract"),
    )
    for encoding, encode in {
        "base64": lambda raw: base64.b64encode(raw).decode(),
        "hex": bytes.hex,
        "hex, a byte a word": lambda raw: raw.hex(" "),
        "hex, each byte escaped": lambda raw: "".join(f"\\x{byte:02x}" for byte in raw),
    }.items()
}
"""Answers a valid key with its own key, encoded, where the verdict belongs."""


@contextmanager
def dead_port() -> Iterator[int]:
    """A port on 127.0.0.1 where nothing listens (connections are refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    yield port


@dataclass
class Hung:
    """A listener that accepts connections and never answers; counts what it accepted."""

    port: int
    accepted: int = 0


@contextmanager
def hung_server(reply: bytes = b"") -> Iterator[Hung]:
    """Accepts connections and never answers; or writes ``reply`` at once, whatever comes."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.05)
    hung = Hung(listener.getsockname()[1])
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(connection)
            hung.accepted += 1
            if reply:
                connection.sendall(reply)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield hung
    finally:
        stop.set()
        thread.join(timeout=2)
        for connection in held:
            connection.close()
        listener.close()


PLAIN_HTTP = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
"""What a plain-HTTP server says to anything, a TLS hello included."""


def _hang_after(calls: int, seconds: float) -> Callable[[Request], Response | None]:
    number = _calls_of_e()

    def before(request: Request) -> Response | None:
        call = number(request)
        if call is not None and call >= calls:
            time.sleep(seconds)
        return None

    return before


def hangs_mid_run(calls: int, seconds: float) -> Variant:
    """Answers ``calls`` calls of ``/e``, then takes ``seconds`` over each answer."""
    return Variant(before=_hang_after(calls, seconds))


@dataclass
class Sent:
    """How much of a hostile answer's body a server wrote before its client hung up."""

    chunks: int = 0
    port: int = 0  # where a raw hostile server listens


CHUNK = b"\0" * 65536
ATTACK_CHUNKS = 1024
"""A hostile body is at most 1,024 chunks of 64 KiB (64 MiB): 64 times the suite's cap."""


@functools.cache
def gzip_bomb() -> bytes:
    """64 MiB of zeros, gzip-compressed to about 64 KiB."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    parts = [compressor.compress(CHUNK) for _ in range(ATTACK_CHUNKS)]
    return b"".join([*parts, compressor.flush()])


def _zeros(sent: Sent, pause: float = 0.0, chunk: bytes = CHUNK) -> Iterator[bytes]:
    for _ in range(ATTACK_CHUNKS if not pause else 2000):  # bounded, whatever the client does
        sent.chunks += 1
        yield chunk
        if pause:
            time.sleep(pause)


def hostile_answers(sent: Sent, drip: float = 0.05) -> dict[str, Callable[[], Response]]:
    """The answers of a hostile staging, by attack; ``sent`` counts what each one wrote."""
    json_type = "application/json"

    def huge_length() -> Response:
        answer = Response(_zeros(sent), 200, content_type=json_type, direct_passthrough=True)
        answer.headers["Content-Length"] = str(8 << 30)  # 8 GiB announced
        return answer

    def endless_chunked() -> Response:
        return Response(_zeros(sent), 200, content_type=json_type, direct_passthrough=True)

    def bomb() -> Response:
        sent.chunks += 1
        answer = Response(gzip_bomb(), 200, content_type=json_type)
        answer.headers["Content-Encoding"] = "gzip"
        return answer

    def slow_drip() -> Response:
        body = _zeros(sent, pause=drip, chunk=b" ")
        answer = Response(body, 200, content_type=json_type, direct_passthrough=True)
        answer.headers["Content-Length"] = "2000"
        return answer

    return {
        "huge Content-Length": huge_length,
        "endless chunked stream": endless_chunked,
        "gzip bomb": bomb,
        "slow drip": slow_drip,
    }


def hostile_for_first_session(answer: Callable[[], Response]) -> Variant:
    """A service whose answer to the first fresh session (only) is ``answer()``."""

    def before(request: Request) -> Response | None:
        known = _known(request)
        first = request.path == "/e" and bool(known) and request.args.get("n") == known[0]
        if first and request.headers.get("Authorization") == f"Bearer {KEY}":
            return answer()
        return None

    return Variant(before=before)


def _head(*headers: str) -> bytes:
    lines = ["HTTP/1.1 200 OK", "Content-Type: application/json", *headers, "", ""]
    return "\r\n".join(lines).encode()


_FRAME = b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK)  # one chunk of a chunked body, made once


def raw_attacks() -> dict[str, Callable[[], Iterator[bytes]]]:
    """Each attack as the pieces a raw server writes (the same objects again: no allocation)."""

    def huge_length() -> Iterator[bytes]:
        yield _head(f"Content-Length: {8 << 30}")
        yield from itertools.repeat(CHUNK, ATTACK_CHUNKS)

    def endless_chunked() -> Iterator[bytes]:
        yield _head("Transfer-Encoding: chunked")
        yield from itertools.repeat(_FRAME, ATTACK_CHUNKS)

    def bomb() -> Iterator[bytes]:
        yield _head("Content-Encoding: gzip", f"Content-Length: {len(gzip_bomb())}")
        yield gzip_bomb()

    def slow_drip() -> Iterator[bytes]:
        yield _head("Content-Length: 2000")
        yield from itertools.repeat(b" ", 2000)

    def dripped_headers() -> Iterator[bytes]:
        yield from (bytes([byte]) for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 4000)

    return {
        "huge Content-Length": huge_length,
        "endless chunked stream": endless_chunked,
        "gzip bomb": bomb,
        "slow drip": slow_drip,
        "dripped headers": dripped_headers,
    }


@contextmanager
def raw_server(pieces: Callable[[], Iterator[bytes]], pause: float = 0.0) -> Iterator[Sent]:
    """Answers each connection in turn with ``pieces()``, ``pause`` seconds after each.

    ``Sent.chunks`` counts the pieces written; a client that hangs up ends its answer. The
    pieces are bounded, so every answer ends on its own.
    """
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.05)
    sent = Sent(port=listener.getsockname()[1])
    stop = threading.Event()

    def answer(connection: socket.socket) -> None:
        with connection:
            connection.recv(65536)
            for piece in pieces():
                if stop.is_set():
                    return
                try:
                    connection.sendall(piece)
                except OSError:
                    return
                sent.chunks += 1
                if pause:
                    time.sleep(pause)

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            connection.settimeout(10)
            answer(connection)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sent
    finally:
        stop.set()
        thread.join(timeout=10)
        listener.close()


# --- issue 42: the spec's words on text, and a refusal that gives the verdict away -----------


def _refusal_with_the_verdict(give: Callable[[dict[str, Any]], dict[str, Any]]) -> Alter:
    """A cache in front of the key check: each verdict it served is remembered per session, and
    a 401 for that session then answers ``give(verdict)``: what a careless error page shows."""
    served: dict[tuple[str, str], dict[str, Any]] = {}

    def alter(request: Request, response: Response) -> None:
        seen = (request.host, request.args.get("n", ""))
        if response.status_code == 200:
            served[seen] = _body(response)
        elif response.status_code == 401 and seen in served:
            _set_body(response, give(served[seen]))

    return alter


def _quoting_the_summary(verdict: dict[str, Any]) -> dict[str, Any]:
    message = f"key refused; last answer for this session: {verdict['summary']}"
    return {"error": {"code": "unauthorized", "message": message}}


def _headline_of_two_lines(body: dict[str, Any]) -> None:
    for signal in body["signals"]:
        signal["headline"] += "\nSee the measurement trace."


def _summary_of_three_sentences(body: dict[str, Any]) -> None:
    body["summary"] += " Review the session. Then decide."


def _markup_in_the_summary(body: dict[str, Any]) -> None:
    body["summary"] = f"<b>{body['summary']}</b>"


def _no_signals_when_refused(body: dict[str, Any]) -> None:
    if body["verdict"] == "refused":
        body["signals"] = []


def _abbreviations_and_symbols(body: dict[str, Any]) -> None:
    body["summary"] = "RTT of 4.2 ms fits e.g. Lyon, not the U.S. client Dr. Ng claims. Review it."
    for signal in body["signals"]:
        signal["headline"] = "RTT < 5 ms & TTL > 64: Linux (not Windows)."


def _rfc_6750_challenge(request: Request, response: Response) -> None:
    if response.status_code == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="svs", error="invalid_token"'
        _set_body(response, {"error": "invalid_token", "summary": "Send a valid Bearer key."})


BROKEN.update(
    {
        "a 401 holding the session's verdict": Variant(
            alter=_refusal_with_the_verdict(lambda v: {"error": "unauthorized", "cached": v}),
            fails=("test_no_verdict_without_a_valid_key",),
        ),
        "a 401 quoting the session's summary": Variant(
            alter=_refusal_with_the_verdict(_quoting_the_summary),
            fails=("test_no_verdict_without_a_valid_key",),
        ),
        "a headline of two lines": Variant(
            alter=on_verdict(_headline_of_two_lines), fails=("test_verdicts_keep_the_contract",)
        ),
        "a summary of three sentences": Variant(
            alter=on_verdict(_summary_of_three_sentences),
            fails=("test_verdicts_keep_the_contract",),
        ),
        "markup in the summary": Variant(
            alter=on_verdict(_markup_in_the_summary), fails=("test_verdicts_keep_the_contract",)
        ),
    }
)

CONFORMING.update(
    {
        "refused and conclusive without signals (section 2.4: it varies)": Variant(
            alter=on_verdict(_no_signals_when_refused),
            sessions=({"verdict": "refused", "conclusive": True},),
        ),
        "abbreviations, decimals and symbols in the texts": Variant(
            alter=on_verdict(_abbreviations_and_symbols)
        ),
        "a 401 with an RFC 6750 challenge and a summary of its own": Variant(
            alter=_rfc_6750_challenge
        ),
    }
)
