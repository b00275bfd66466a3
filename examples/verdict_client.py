"""A small integrator client for the Explain API, written the way the spec asks consumers to.

- the API key stays on the server and out of every error message;
- ``schema`` is checked explicitly: an unexpected version is an error, never a guess;
- verdicts are cached by session id (a verdict never changes, spec §8);
- 404 means "unknown or expired" (spec §4 rule 3), not necessarily a wrong id;
- 429 is retried after ``Retry-After``, a bounded number of times;
- ``conclusive`` chooses between automatic action and a human review.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

SCHEMA_VERSION = 7
Action = Literal["block", "review", "allow"]


class VerdictError(Exception):
    """The verdict could not be obtained or understood."""


class UnexpectedSchemaError(VerdictError):
    """The service speaks a response structure this client does not know."""


class SessionNotFound(VerdictError):
    """The session is unknown or expired (sessions live 15 minutes)."""


class NotAuthorised(VerdictError):
    """The service refused the API key."""


class ServiceBusy(VerdictError):
    """Still rate-limited or failing after the allowed retries."""


def decide(verdict: dict[str, Any]) -> Action:
    """Map a verdict to what the shop does with the session."""
    if verdict["verdict"] in ("contradicted", "refused") and verdict["conclusive"]:
        return "block"
    if verdict["verdict"] in ("contradicted", "refused", "disputed"):
        return "review"
    return "allow"  # uncontradicted, or insufficient evidence to act on


@dataclass
class VerdictClient:
    base_url: str
    api_key: str = field(repr=False)
    retries: int = 3
    max_wait: float = 10.0
    cache_size: int = 10_000
    sleep: Callable[[float], None] = time.sleep
    http: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=10.0), repr=False)
    _cache: OrderedDict[str, dict[str, Any]] = field(default_factory=OrderedDict, repr=False)
    _wait: float = field(default=1.0, init=False, repr=False)  # from the last Retry-After

    def verdict(self, session_id: str) -> dict[str, Any]:
        """Return the verdict for a session, from the cache when it was fetched before."""
        if session_id in self._cache:
            self._cache.move_to_end(session_id)
            return self._cache[session_id]
        body = self._fetch(session_id)
        self._cache[session_id] = body
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return body

    def decide(self, session_id: str) -> Action:
        return decide(self.verdict(session_id))

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> VerdictClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _fetch(self, session_id: str) -> dict[str, Any]:
        problem = "no answer"
        for attempt in range(self.retries + 1):
            if attempt:
                self.sleep(min(self._wait, self.max_wait))
            self._wait = 1.0
            try:
                response = self.http.get(
                    f"{self.base_url}/e",
                    params={"n": session_id},
                    headers={"Authorization": f"Bearer {self.api_key}"},
                )
            except httpx.TransportError as exc:  # reset, truncated body, timeout: retry
                problem = f"transport error: {type(exc).__name__}"
                continue
            if response.status_code == 200:
                return self._parse(response)
            if response.status_code == 404:
                raise SessionNotFound(f"session {session_id!r} is unknown or expired")
            if response.status_code == 401:
                raise NotAuthorised("the Explain API refused the API key (401)")
            if response.status_code == 429 or response.status_code >= 500:
                problem = f"status {response.status_code}"
                retry_after = response.headers.get("Retry-After", "")
                self._wait = float(retry_after) if retry_after.isdigit() else 1.0
                continue
            raise VerdictError(f"unexpected status {response.status_code}")
        raise ServiceBusy(f"gave up after {self.retries + 1} attempts: {problem}")

    @staticmethod
    def _parse(response: httpx.Response) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            raise VerdictError(
                "the Explain API answered 200 with a body that is not JSON"
            ) from None
        if not isinstance(body, dict):
            raise VerdictError("the Explain API answered 200 with a body that is not an object")
        if body.get("schema") != SCHEMA_VERSION:
            raise UnexpectedSchemaError(
                f"the Explain API speaks schema {body.get('schema')!r}; this client "
                f"understands schema {SCHEMA_VERSION}"
            )
        return body
