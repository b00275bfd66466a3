"""The control API under ``/_mock/``: mint sessions, read the journal, reset, health.

It is for the developers and tests that drive the mock; ``--no-control`` turns it off.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from verdict_contract.core.redact import mask
from verdict_contract.core.resources import bundled_openapi
from verdict_contract.core.spec import SCHEMA_VERSION

from ..coverage import BEHAVIOURS, habits, tally
from ..model.scripts import ScriptStoreFull
from ..model.sessions import Session, SpecError, parse_spec
from ..settings import DEFAULT_API_KEY
from .answers import error_response, state_of
from .dashboard import dashboard
from .guard import guard_control
from .proxy import PROXY_EXTENSION, ValidatingProxy

control = Blueprint("control", __name__, url_prefix="/_mock")
control.add_url_rule("/", "dashboard", dashboard, methods=["GET"])


def _to_dashboard() -> Response:
    """``/_mock`` without its slash: a JSON 308 to the dashboard, not werkzeug's HTML one."""
    message = "the dashboard is at /_mock/ (with a slash)"
    return error_response(308, "moved", message, headers=[("Location", "/_mock/")])


control.add_url_rule("", "to_dashboard", _to_dashboard, strict_slashes=False)
control.before_request(guard_control)  # Host, Origin and token: every control route, see guard.py


def _iso(moment: float | None) -> str | None:
    return None if moment is None else datetime.fromtimestamp(moment, UTC).isoformat()


def describe_session(session: Session) -> dict[str, Any]:
    state = state_of()
    collected = session.collected_at
    lifetime = state.settings.session_lifetime
    recorded = session.spec.recorded  # a recorded session is described by what it replays
    body = recorded.decoded() if recorded else state.generator.verdict(session.id, session.spec)
    return {
        "n": session.id,
        "url": session.url,
        "verdict": body.get("verdict"),
        "conclusive": body.get("conclusive"),
        "schema": body.get("schema"),
        "collected_at": _iso(collected),
        "expires_at": _iso(None if collected is None else collected + lifetime),
        "script": [step.to_json() for step in session.spec.script],
        "always": session.spec.always.to_json() if session.spec.always else None,
    }


@control.post("/sessions")
def mint() -> tuple[Response, int] | Response:
    if request.content_length and not request.is_json:  # get_json would see no JSON at all
        sent = request.headers.get("Content-Type")
        return error_response(
            400,
            "bad_request",
            "the body is read as JSON only with the header Content-Type: application/json; "
            + ("the header is missing" if sent is None else f"received {sent[:100]!r}"),
        )
    try:
        raw = request.get_json(silent=True) if request.content_length else {}
    except RecursionError:  # absurdly deep JSON
        raw = None
    if raw is None:
        return error_response(400, "bad_request", "the body must be a JSON object (or empty)")
    try:
        spec = parse_spec(raw, "request")
        if spec.always is not None:
            raise SpecError("request.always is for named sessions; use script for minted ones")
        if any(map(state_of().key_finder.finds, raw.get("extra") or ())):  # journaled: no key
            raise SpecError("request.extra: a field's name holds a part of a key or token")
        session = state_of().mint(spec)
    except SpecError as exc:
        return error_response(422, "invalid_session", str(exc))
    except ScriptStoreFull as exc:
        return error_response(409, "script_store_full", str(exc))
    return jsonify(describe_session(session)), 201


@control.get("/sessions")
def named() -> Response:
    return jsonify([describe_session(s) for s in state_of().named.values()])


@control.get("/requests")
def journal() -> Response:
    return jsonify([entry.to_json() for entry in state_of().store.entries()])


@control.get("/coverage")
def coverage() -> Response:
    """The spec's answer space as this mock's journal met it (``pytest --verdict-coverage``'s
    ids), and the client habits it shows: for trying an app by hand against the mock."""
    state = state_of()
    entries = state.store.entries()
    counts = tally(entries)
    found = habits(entries, state.api_keys, list(state.clock_moves))
    return jsonify(
        requests=len(entries),
        met=sum(1 for count in counts.values() if count),
        behaviours={
            behaviour: {"exercised": count, "meaning": BEHAVIOURS[behaviour]}
            for behaviour, count in counts.items()
        },
        never=[behaviour for behaviour, count in counts.items() if not count],
        habits=[habit._asdict() for habit in found],
    )


@control.delete("/requests")
def clear_journal() -> tuple[str, int]:
    state_of().store.clear_journal()
    return "", 204


@control.post("/reset")
def reset() -> tuple[str, int]:
    state_of().reset()
    return "", 204


MAX_ADVANCE_SECONDS = 86_400.0
"""The most one call moves the clock: a day, far past any session's lifetime."""


@control.post("/clock")
def advance_clock() -> tuple[Response, int] | Response:
    """Move the mock's clock forward, as ``VerdictMock.advance`` does: sessions age at once."""
    raw = request.get_json(silent=True)
    given = raw.get("advance") if isinstance(raw, dict) else None
    seconds = given if isinstance(given, int | float) and not isinstance(given, bool) else None
    if seconds is None or not 0 <= seconds <= MAX_ADVANCE_SECONDS:
        wanted = f'{{"advance": SECONDS}}, 0 to {MAX_ADVANCE_SECONDS:g}'
        received = "no number" if seconds is None else seconds
        return error_response(422, "invalid_clock", f"received {received}; documented: {wanted}")
    state = state_of()
    state.advance(float(seconds))
    return jsonify(skew=state.skew)


@control.get("/health")
def health() -> Response:
    state, operator = state_of(), state_of(current_app)
    problem = state.store.writable()  # its own store (readyz: the process, every tenant's)
    if problem is not None:
        raise problem  # the 503 every call of the store gives then
    health: dict[str, object] = {
        "status": "ok",
        "schema": SCHEMA_VERSION,
        "rate_limit": str(state.limit),
        "session_lifetime": state.settings.session_lifetime,
        "journal_entries": state.store.journal_length(),
        "script_bytes": state.store.script_bytes(),
        "default_key": DEFAULT_API_KEY if DEFAULT_API_KEY in state.api_keys else None,
        "scenario_problem": state.scenario_problem,
        "state": state.store.label,
    }
    if operator.tenants:  # why the tenants file was refused: to the operator only (it names them)
        health["tenant"] = state.tenant_name
        if state is operator:
            health["tenants_problem"] = operator.tenants_problem
    proxy: ValidatingProxy | None = current_app.extensions.get(PROXY_EXTENSION)
    if proxy is not None:  # its counters, and why the recording on disk lacks sessions
        health["proxy"] = stats = proxy.stats.to_json()
        if proxy.recorder is not None:
            stats["record_problem"] = proxy.recorder.problem
    return jsonify(health)


@control.get("/tenants")
def tenants() -> Response:
    """The tenants the caller's token sees: every one for the operator, else its own."""
    state = state_of()
    operator = state_of(current_app)
    states = list(operator.tenants.values()) or [operator] if state is operator else [state]
    return jsonify(
        [
            {
                "name": tenant.tenant_name,
                "api_keys": [mask(key) for key in tenant.api_keys],
                "rate_limit": str(tenant.limit),
                "journal_entries": tenant.store.journal_length(),
            }
            for tenant in states
        ]
    )


@control.get("/openapi.json")
def openapi() -> Response:
    return jsonify(bundled_openapi())
