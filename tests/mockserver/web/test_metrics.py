"""mockserver.web.metrics and model.traffic: what /_mock/metrics counts, as the journal reads it.

Through the async server, on 127.0.0.1 (test_operations.py covers the command's probes and its
store's round trips).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import KEY, bearer, running
from verdict_contract.core.rates import RateLimit
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.testing.background import BackgroundServer

AUTH = f"Authorization: Bearer {KEY}\r\n"


@pytest.fixture
def server() -> Iterator[BackgroundServer]:
    settings = Settings(api_keys=(KEY,), rate_limit=RateLimit.parse("off"))
    with running(create_app(settings), server="async") as background:
        yield background


def _requests(http: httpx.Client) -> dict[tuple[str, str], float]:
    text = http.get("/_mock/metrics").text
    return {
        (sample.labels["status"], sample.labels["outcome"]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "verdict_mock_requests_total"
    }


def test_a_reset_is_counted_with_no_status_as_the_journal_has_it(server: BackgroundServer) -> None:
    with httpx.Client(base_url=server.base_url, timeout=10) as http:
        n = http.post("/_mock/sessions", json={"script": ["reset", "truncated"]}).json()["n"]
        for _ in range(2):  # the reset, then the cut body (a 200 whose body stops short)
            with socket.create_connection(("127.0.0.1", server.effective_port), timeout=5) as sock:
                sock.sendall(f"GET /e?n={n} HTTP/1.1\r\nHost: x\r\n{AUTH}\r\n".encode())
                try:
                    while sock.recv(65536):
                        pass
                except ConnectionResetError:
                    pass
        assert http.get("/e", params={"n": n}, headers=bearer()).status_code == 200
        journaled = [(e["status"], e["outcome"]) for e in http.get("/_mock/requests").json()]
        assert journaled == [(None, "scripted"), (200, "scripted"), (200, "verdict")]
        assert _requests(http) == {
            ("000", "scripted"): 1,
            ("200", "scripted"): 1,
            ("200", "verdict"): 1,
        }


def _samples(http: httpx.Client) -> dict[str, list[tuple[dict[str, str], float]]]:
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(http.get("/_mock/metrics").text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def test_an_operator_finds_the_process_the_build_and_the_control_calls(
    server: BackgroundServer,
) -> None:
    """What any Python service exports (process and platform), the mock's version, and its
    control calls by route, method and status, with labels a client cannot multiply."""
    with httpx.Client(base_url=server.base_url, timeout=10) as http:
        assert http.post("/_mock/reset").status_code == 204
        assert http.post("/_mock/reset").status_code == 204
        for method in ("PROPFIND", "MKCOL", "LOCK"):  # methods the mock takes no part in
            http.request(method, "/_mock/nope")
        samples = _samples(http)
    assert samples["process_resident_memory_bytes"][0][1] > 0
    assert samples["python_info"][0][0]["implementation"] == "CPython"
    ((labels, value),) = samples["verdict_mock_build_info"]
    assert value == 1
    assert labels["python"].count(".") == 2
    calls = {
        (labels["route"], labels["method"], labels["status"]): value
        for labels, value in samples["verdict_mock_control_requests_total"]
    }
    assert calls[("/_mock/reset", "POST", "204")] == 2
    made_up = {key: value for key, value in calls.items() if key[0] == "unmatched"}
    assert made_up == {("unmatched", "other", "404"): 3}
