"""One HTTP client for the whole suite run: ``GET /e`` with or without the key, and minting."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from verdict_contract.core.redact import Secret
from verdict_contract.core.spec import ENDPOINT_PATH, SESSION_PARAM

KEY = object()
"""Placeholder for "send the configured key" wherever a header value is built."""


@dataclass
class ExplainClient:
    """Calls the target's ``/e`` over one pooled connection set (one client per process)."""

    base_url: str
    api_key: Secret
    timeout: float = 10.0
    _http: httpx.Client = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._http = httpx.Client(
            base_url=self.base_url, timeout=self.timeout, follow_redirects=False
        )

    def explain(self, session_id: str) -> httpx.Response:
        """An ordinary, authorised call for one session."""
        return self.request(params=[(SESSION_PARAM, session_id)])

    def request(
        self,
        *,
        params: Sequence[tuple[str, str | object]] = (),
        authorization: str | object | None = KEY,
        headers: Mapping[str, str] | None = None,
        method: str = "GET",
    ) -> httpx.Response:
        """A call to ``/e`` with any query and Authorization; ``KEY`` stands for the key."""
        key = self.api_key.reveal()
        query: list[tuple[str, str | int | float | bool | None]] = [
            (name, key if value is KEY else str(value)) for name, value in params
        ]
        sent = dict(headers or {})
        if authorization is KEY:
            sent["Authorization"] = f"Bearer {key}"
        elif isinstance(authorization, str):
            sent["Authorization"] = authorization.replace("{key}", key)
        return self._http.request(method, ENDPOINT_PATH, params=query, headers=sent)

    def mint(self, **spec: Any) -> str:
        """Mint a session through the mock's control API; returns its id."""
        response = self._http.post("/_mock/sessions", json=spec)
        if response.status_code != 201:
            raise RuntimeError(f"the mock refused to mint {spec}: {response.text}")
        session_id: str = response.json()["n"]
        return session_id

    def mock_health(self) -> dict[str, Any]:
        health: dict[str, Any] = self._http.get("/_mock/health").json()
        return health

    def close(self) -> None:
        self._http.close()
