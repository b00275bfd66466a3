"""Deliberately broken (and deliberately unusual but conforming) services for the suite.

Each variant wraps the mock's WSGI app and changes one behaviour; the tests run the contract
suite against it in live mode, over real HTTP, with ``--session-id``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.ratelimit import RateLimit
from verdict_contract.mockserver.serve import BackgroundServer
from verdict_contract.mockserver.sessions import parse_spec
from verdict_contract.mockserver.web import state_of
from werkzeug.wrappers import Request, Response

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

KEY = "sharpness-suite-key-7f3a9c"

Alter = Callable[[Request, Response], None]


@dataclass(frozen=True)
class Variant:
    name: str
    alter: Alter | None = None  # changes the inner answer in place
    before: Callable[[Request], Response | None] | None = None  # may answer instead
    sessions: tuple[dict[str, Any], ...] = (
        {"verdict": "contradicted", "conclusive": True},
        {"verdict": "uncontradicted"},
    )
    rate_limit: str = "off"
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Running:
    base_url: str
    session_ids: list[str]
    expired_id: str
    key: str = KEY

    def suite_args(self, *extra: str) -> list[str]:
        args = [
            "--pyargs",
            "verdict_contract.contract_tests",
            "-p",
            "no:cacheprovider",
            "--base-url",
            self.base_url,
            "--api-key",
            self.key,
            "--expired-session-id",
            self.expired_id,
        ]
        for n in self.session_ids:
            args += ["--session-id", n]
        return [*args, *extra]


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


# name -> (variant, the suite's tests that must fail; empty: the suite must pass)
BROKEN: dict[str, tuple[Variant, list[str]]] = {
    "wrong success status": (
        Variant("201", alter=_status(200, 201)),
        ["test_success_is_a_json_object"],
    ),
    "text content type": (
        Variant("text", alter=_header("Content-Type", "text/plain")),
        ["test_success_is_a_json_object"],
    ),
    "schema 8": (
        Variant("schema8", alter=on_verdict(lambda b: b.update(schema=8))),
        ["test_schema_version", "test_verdicts_keep_the_contract"],
    ),
    "broken rule": (
        Variant("rule", alter=on_verdict(_disputed_conclusive)),
        ["test_verdicts_keep_the_contract"],
    ),
    "mutable verdict": (
        Variant("mutable", alter=on_verdict(_mutable)),
        ["test_verdict_is_immutable"],
    ),
    "lookup before auth": (
        Variant("lookup", before=_lookup_before_auth),
        ["test_auth_comes_before_lookup"],
    ),
    "key in query authorises": (
        Variant("query", before=_query_key_authorises),
        ["test_key_in_the_query_does_not_authorise"],
    ),
    "Basic scheme accepted": (
        Variant("basic", before=_basic_accepted),
        ["test_missing_or_invalid_key_is_401"],
    ),
    "404 never sent": (
        Variant("no404", alter=_serve_any_id),
        ["test_unknown_session_is_404", "test_expired_session_is_404"],
    ),
    "5xx on malformed input": (
        Variant("crash", before=_bad_input_crashes),
        ["test_malformed_request_is_4xx"],
    ),
    "CORS for everyone": (
        Variant("cors", alter=_header("Access-Control-Allow-Origin", "*")),
        ["test_no_cross_origin_invitation"],
    ),
    "no rate limit": (
        Variant("nolimit", args=("--probe-rate-limit", "30")),
        ["test_rate_limit_answers_429_then_recovers"],
    ),
    "503 instead of 429": (
        Variant(
            "503", alter=_status(429, 503), rate_limit="15/1", args=("--probe-rate-limit", "30")
        ),
        ["test_rate_limit_answers_429_then_recovers"],
    ),
}

CONFORMING: dict[str, Variant] = {
    "the mock itself, with the rate-limit probe": Variant(
        "plain", rate_limit="15/1", args=("--probe-rate-limit", "30")
    ),
    "extra fields": Variant("extra", alter=on_verdict(_extra_fields)),
    "unknown signal prefix": Variant("prefix", alter=on_verdict(_unknown_prefix)),
    "refused and conclusive": Variant(
        "refused", sessions=({"verdict": "refused", "conclusive": True},)
    ),
    "charset in the content type": Variant(
        "charset", alter=_header("Content-Type", "application/json; charset=utf-8")
    ),
}
