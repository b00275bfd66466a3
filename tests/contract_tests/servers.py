"""Deliberately broken (and deliberately unusual but conforming) services for the suite.

Each variant wraps the mock's WSGI app and changes one behaviour; the tests run the contract
suite against it in live mode, over real HTTP, with ``--verdict-session-id``.
"""

from __future__ import annotations

import codecs
import gzip
import itertools
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import formatdate
from typing import TYPE_CHECKING, Any

import pytest
from werkzeug.wrappers import Request, Response

from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.ratelimit import RateLimit
from verdict_contract.mockserver.serve import BackgroundServer
from verdict_contract.mockserver.sessions import parse_spec
from verdict_contract.mockserver.web import state_of

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


@dataclass
class Running:
    base_url: str
    session_ids: list[str]
    expired_id: str
    key: str = KEY

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


def _wrap(app: Any, variant: Variant) -> Any:
    def wsgi(environ: WSGIEnvironment, start_response: StartResponse) -> Any:
        request = Request(environ)
        answer = variant.before(request) if variant.before else None
        if answer is None:
            answer = Response.from_app(app, environ)
            if variant.alter is not None:
                variant.alter(request, answer)
        return answer(environ, start_response)

    return wsgi


@contextmanager
def serve(variant: Variant, key: str = KEY) -> Iterator[Running]:
    app = create_app(
        Settings(
            api_keys=(key,),
            control=False,
            demo_sessions=False,
            rate_limit=RateLimit.parse(variant.rate_limit),
        )
    )
    state = state_of(app)
    ids = [state.mint(parse_spec(spec)).id for spec in variant.sessions]
    expired = state.mint(parse_spec({"age_seconds": 901})).id
    with BackgroundServer(_wrap(app, variant)) as server:
        yield Running(server.base_url, ids, expired, key)


def run_suite(
    pytester: pytest.Pytester, variant: Variant, *extra: str, key: str = KEY
) -> tuple[pytest.RunResult, Running]:
    """The suite in a subprocess against ``variant``, with the options it needs."""
    with serve(variant, key) as running:
        result = pytester.runpytest_subprocess(*running.suite_args(*variant.args, *extra))
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
}

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
}

ALWAYS_THROTTLED = Variant(before=_throttle(10**9, lambda: "120"))
"""Every call of ``/e`` is a 429 asking for two minutes: more than the wait budget."""

KEY_ECHO = Variant(alter=_echo_key)
"""Echoes the credential it received into a broken 200 body, which the suite quotes."""


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
