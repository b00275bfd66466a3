"""An answer of the mock, independent of the web framework, and the shape of every error.

Every non-200 answer is ``{"error": {"code": ..., "message": ...}}`` as JSON, never cached.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from http import HTTPStatus
from typing import Final, Literal, NamedTuple

from verdict_contract.core.errors import SpecError, StateUnavailable
from verdict_contract.core.types import Verdict

log = logging.getLogger("mockserver")

JSON = "application/json"
NO_STORE = "no-store"

Headers = Sequence[tuple[str, str]]

CACHED_BODY_BYTES: Final = 16 * 1024
"""Answers are kept only up to this body size, so the caches hold a few MB at most."""

DecidedBy = Literal["script", "logic"]
"""Who decided an answer: a scripted step (a status, a fault, a standing step) or the mock's
own logic (the verdict, 401, 404, 429); a delay step only delays the logic's answer."""

DOCUMENTED_FIELDS: Final = Verdict.__required_keys__  # spec §2.2; any other is an extra field


class Served(NamedTuple):
    """What a verdict body told the client (spec §2.2, §9.1): read once per answer object."""

    verdict: str | None
    conclusive: bool | None
    schema: int | None
    extra_fields: tuple[str, ...]


def served(body: bytes) -> Served | None:
    """The facts of a verdict body; None if it is not a JSON object (a recorded oddity)."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    verdict, conclusive, schema = data.get("verdict"), data.get("conclusive"), data.get("schema")
    return Served(
        verdict if isinstance(verdict, str) else None,
        conclusive if isinstance(conclusive, bool) else None,
        schema if isinstance(schema, int) and not isinstance(schema, bool) else None,
        tuple(sorted(set(data) - DOCUMENTED_FIELDS)),
    )


class Result(NamedTuple):
    """How the journal reads an answer: what the client got, and who decided it."""

    status: int | None  # None: the client got no status line
    outcome: str
    fault: str | None
    decided_by: DecidedBy = "logic"
    retry_after: str | None = None  # the Retry-After header, as sent
    delay_ms: int | None = None  # a scripted delay waited out before the answer
    served: Served | None = None  # the verdict body the client got whole (a 2xx, no fault)


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)
    outcome: str = ""  # one word for the journal: verdict, unknown, expired, scripted, ...
    fault: str | None = None  # the connection fault it carries (steps.fault_answer)
    delay: float = 0.0  # seconds to wait before answering (a scripted delay step)

    @cached_property  # its body read once (bench_instructions demo: 110k a GET /e, 231k without)
    def result(self) -> Result:
        """The journal's reading of this answer, once per answer object (a session's are kept)."""
        fault = self.fault
        status = None if fault == "reset" else self.status
        return Result(
            status,
            "scripted" if fault else self.outcome,
            fault,
            "script" if fault or self.outcome == "scripted" else "logic",
            next((v for k, v in self.headers if k == "Retry-After"), None),
            round(self.delay * 1000) if self.delay else None,
            served(self.body) if status and 200 <= status < 300 and not fault else None,
        )


def with_defaults(defaults: Headers, given: Headers) -> list[tuple[str, str]]:
    """``defaults`` whose names ``given`` does not hold (in any case), then ``given``: sent
    beside the mock's own, a client would read two Content-Types and keep either."""
    if not given:
        return list(defaults)
    named = {name.lower() for name, _ in given}
    return [h for h in defaults if h[0].lower() not in named] + list(given)


_REASONS = {status.value: f"{status.value} {status.phrase}" for status in HTTPStatus}
NO_STATUS: Final = "000"
"""The status the access log and the metrics give a request that got no status line (a reset),
as curl and nginx's logs do."""


def status_line(status: int) -> str:
    """The WSGI status string for a code: ``"404 Not Found"`` (``"599 Unknown"`` if unnamed)."""
    return _REASONS.get(status) or f"{status} Unknown"


def explain_headers(answer: Answer, vary: bool = True) -> list[tuple[str, str]]:
    """The headers of an answer to ``/e``, in the order every server sends them; ``vary``: the
    answer depends on the key (every answer of ``GET /e``, not a 405 or 413)."""
    own = [("Content-Type", JSON), ("Vary", "Authorization")] if vary else [("Content-Type", JSON)]
    # A fault's cut body declares its own length (a script may not: it frames the connection).
    if not any(name.lower() == "content-length" for name, _ in answer.headers):
        own = [*own, ("Content-Length", str(len(answer.body)))]
    return with_defaults(own, answer.headers)


def not_allowed(method: str, allowed: str) -> Answer:
    """405 for a method the path does not take (``allowed``: ``"GET, HEAD"``)."""
    message = f"{method} is not allowed here; use {allowed}"
    return error_answer(405, "method_not_allowed", message, headers=[("Allow", allowed)])


def error_answer(
    status: int, code: str, message: str, outcome: str = "", headers: Headers = ()
) -> Answer:
    """An error answer; ``outcome`` defaults to ``code``, ``headers`` come after Cache-Control."""
    headers = with_defaults([("Cache-Control", NO_STORE)], headers)
    body = json.dumps({"error": {"code": code, "message": message}}, ensure_ascii=False)
    return Answer(status, body.encode(), headers, outcome or code)


def failure_answer(exc: Exception, doing: str) -> Answer:
    """The answer to a request whose handling raised ``exc`` (on every path that answers one):
    never a 5xx of the mock's own. ``doing`` names the work in the log line of an unexpected one."""
    if isinstance(exc, SpecError):  # a request the mock cannot honour: said, not logged
        return error_answer(422, "invalid_session", str(exc))
    if isinstance(exc, StateUnavailable):  # --state did not answer, or refuses writes: said
        return unavailable_answer(exc)
    log.error("unexpected error %s", doing, exc_info=exc)
    return error_answer(400, "bad_request", "the request could not be processed")


def unavailable_answer(exc: StateUnavailable) -> Answer:
    """503 for a shared state that failed: ``Retry-After`` only where retrying soon can help (a
    store that refuses writes stays so until someone acts)."""
    later = "retry later" if exc.retry else "retrying will not help until it takes writes again"
    retry = [("Retry-After", "1")] if exc.retry else []
    return error_answer(503, exc.code, f"{exc}; the mock keeps running; {later}", headers=retry)
