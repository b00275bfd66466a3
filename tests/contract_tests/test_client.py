"""The suite's client: Retry-After in both forms, plain causes, replayable calls without the key."""

from __future__ import annotations

import shutil
import subprocess
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.contract_tests.servers import (
    ALWAYS_THROTTLED,
    CONFORMING,
    CONTROLLED,
    KEY,
    PLAIN_HTTP,
    Variant,
    dead_port,
    hung_server,
    serve,
)
from tests.helpers import running
from verdict_contract.contract_tests.client import (
    KEY as SEND_KEY,
)
from verdict_contract.contract_tests.client import (
    ExplainClient,
    Reached,
    Throttled,
    reach,
)
from verdict_contract.contract_tests.retry import BACKOFF_BASE, retry_after_seconds
from verdict_contract.contract_tests.test_auth import NEAR_MISSES, near_miss
from verdict_contract.core.redact import Secret

NOW = datetime(2026, 11, 23, 9, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "date", "expected"),
    [
        ("7", None, 7.0),
        ("0", None, 0.0),
        ("Mon, 23 Nov 2026 09:00:05 GMT", None, 5.0),  # IMF-fixdate, against our clock
        ("Monday, 23-Nov-26 09:00:05 GMT", None, 5.0),  # obsolete RFC 850 form
        ("Mon Nov 23 09:00:05 2026", None, 5.0),  # obsolete asctime form
        # Against the server's own Date header when it sends one (its clock, not ours):
        ("Mon, 23 Nov 2026 09:00:05 GMT", "Mon, 23 Nov 2026 09:00:03 GMT", 2.0),
        ("Mon, 23 Nov 2026 08:59:00 GMT", None, 0.0),  # in the past: no wait
    ],
)
def test_retry_after_in_both_forms(value: str, date: str | None, expected: float) -> None:
    assert retry_after_seconds(value, 0, now=NOW, date=date) == pytest.approx(expected)


@pytest.mark.parametrize("value", [None, "", "soon", "-3", "1.5"])
def test_without_a_usable_retry_after_the_backoff_grows_with_jitter(value: str | None) -> None:
    first = {retry_after_seconds(value, 0, now=NOW) for _ in range(50)}
    third = {retry_after_seconds(value, 2, now=NOW) for _ in range(50)}
    assert all(BACKOFF_BASE / 2 <= w <= BACKOFF_BASE for w in first)
    assert all(BACKOFF_BASE * 2 <= w <= BACKOFF_BASE * 4 for w in third)
    assert len(first) > 1  # jitter: not every client retries in the same instant


def test_a_dead_port_is_refused() -> None:
    with dead_port() as port:
        assert reach(f"http://127.0.0.1:{port}", 1.0) == Reached(
            False, "connection refused (is the service running on that port?)"
        )


def test_a_hung_target_is_named_after_one_timeout() -> None:
    with hung_server() as hung:
        cause = reach(f"http://127.0.0.1:{hung.port}", 0.3).cause
    assert cause == "the connection opened but no answer came within 0.3 s (timeout)"
    assert hung.accepted == 1


def test_tls_to_a_plain_http_port_is_a_tls_failure() -> None:
    with hung_server(reply=PLAIN_HTTP) as plain:
        cause = reach(f"https://127.0.0.1:{plain.port}", 2.0).cause
    assert cause is not None
    assert cause.startswith("TLS failure")


def test_an_unresolvable_name_is_a_dns_failure() -> None:
    cause = reach("https://verdict-contract-test.invalid", 5.0).cause
    assert cause is not None
    assert cause.startswith("DNS lookup failed")


def test_throttling_past_the_budget_raises_without_waiting_it() -> None:
    with serve(ALWAYS_THROTTLED) as running:
        client = ExplainClient(running.base_url, Secret(KEY), timeout=2, wait_budget=5)
        with pytest.raises(Throttled, match=r"Retry-After: '120'.*wait budget of 5 s"):
            client.explain(running.session_ids[0])
        assert client.waited == 0  # 120 s would not fit: not a second was spent waiting
        assert client.request(params=[("n", "x")], honour_429=False).status_code == 429
        client.close()


def test_a_throttled_call_is_retried_after_the_wait() -> None:
    with serve(CONFORMING["throttled twice, no Retry-After"]) as running:
        client = ExplainClient(running.base_url, Secret(KEY), timeout=2, wait_budget=5)
        assert client.explain(running.session_ids[0]).status_code == 200
        assert [s.status for s in client.sent] == [429, 429, 200]
        assert 0 < client.waited <= BACKOFF_BASE * 3
        assert running.clock is not None
        assert sum(running.clock.slept) == client.waited  # each wait slept, on the suite's clock
        assert len(running.clock.slept) == 2
        client.close()


def test_replay_lines_show_the_variable_never_the_key() -> None:
    with serve(CONFORMING["extra fields"]) as running:
        client = ExplainClient(running.base_url, Secret(KEY))
        client.request(params=[("n", "a b&c"), ("api_key", SEND_KEY)])
        client.request(params=[("n", "x")], authorization=NEAR_MISSES["truncated by one"])
        client.request(params=[("n", "x")], authorization="Basic {key}")
        client.close()
    lines = [sent.curl() for sent in client.sent]
    assert lines == [
        f"curl -i -H 'Authorization: Bearer '\"$VERDICT_API_KEY\" "
        f"'{running.base_url}/e?n=a%20b%26c&api_key='\"$VERDICT_API_KEY\"",
        f"curl -i -H 'Authorization: Bearer '\"${{VERDICT_API_KEY%?}}\" '{running.base_url}/e?n=x'",
        f"curl -i -H 'Authorization: Basic '\"$VERDICT_API_KEY\" '{running.base_url}/e?n=x'",
    ]
    assert all(KEY[:-1] not in line for line in lines)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("name", list(NEAR_MISSES))
@pytest.mark.parametrize("key", [KEY, "Ab0", "k-1234567890-0"])
def test_a_near_miss_replays_in_bash_as_sent(name: str, key: str) -> None:
    shell = NEAR_MISSES[name].shell
    printed = subprocess.run(
        ["bash", "-c", f'printf %s "{shell}"'],
        env={"VERDICT_API_KEY": key, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert printed == NEAR_MISSES[name].make(key)
    assert near_miss(key, name) in (None, printed)
    assert printed != key


@pytest.mark.parametrize(
    ("variant", "is_mock"),
    [
        (CONTROLLED, True),
        (CONFORMING["a gateway answering 200 on every other path"], False),
        (CONFORMING["a gateway whose catch-all looks like the mock's health"], False),
        (CONFORMING["extra fields"], False),  # the mock without its control API: a service
    ],
)
def test_the_mock_is_told_by_its_signature(variant: Variant, is_mock: bool) -> None:
    with serve(variant) as running:
        assert reach(running.base_url, 2.0) == Reached(is_mock, None)


@pytest.mark.parametrize(
    ("name", "workers", "expected"),
    [
        ("throttled twice, Retry-After in seconds", 1, ["Retry-After lied: after waiting the '1'"]),
        ("throttled twice, Retry-After in seconds", 2, []),  # a sibling worker took the slot
        ("throttled twice, no Retry-After", 1, ["a 429 came without Retry-After"]),
    ],
)
def test_throttling_that_breaks_no_clause_is_an_advisory(
    name: str, workers: int, expected: list[str]
) -> None:
    with serve(CONFORMING[name]) as running:
        client = ExplainClient(running.base_url, Secret(KEY), wait_budget=10, workers=workers)
        assert client.explain(running.session_ids[0]).status_code == 200
        client.close()
    assert [a[: len(e)] for a, e in zip(client.advisories, expected, strict=False)] == expected
    assert len(client.advisories) == len(expected)


def _odd_401(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """A service whose every answer is a 401 with an error that is not the mock's shape."""
    start_response("401 Unauthorized", [("Content-Type", "application/json")])
    return [b'{"error": "who are you"}']


def test_a_401_not_shaped_as_the_mocks_is_a_live_service() -> None:
    """Only the mock's own ``control_token_required`` tells a mock asking for its token; any
    other 401 at /_mock/health is a service's (it once ended the run in a traceback)."""
    with running(_odd_401) as server:  # type: ignore[arg-type]
        assert reach(server.base_url, 2.0) == Reached(False, None)
