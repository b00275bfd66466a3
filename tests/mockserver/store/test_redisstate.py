"""A shared state on a real redis-server: several mock processes behave as one mock.

Each test starts ``verdict-mock`` processes (two and four) with the same secret and ``--state``,
and sends its requests round-robin over real sockets, many at once: the counts, the steps used
and the journal are checked exactly. Redis is killed, restarted and frozen under them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import redis

from tests.helpers import clean_environ, free_port, read_line, stop_process, wait_until
from tests.redisserver import redis_server
from verdict_contract.core.rates import RateLimit
from verdict_contract.mockserver import Settings, create_app, explain
from verdict_contract.mockserver.state import MockState
from verdict_contract.mockserver.store.backend import StateURL
from verdict_contract.mockserver.store.redisstate import ENTRY_BYTES, RedisStore
from verdict_contract.testing.mocks import live_mock

KEY = "redis-test-key-0001"
OTHER_KEY = "redis-test-key-0002"
SECRET = "shared-state-test-secret"


@dataclass
class Mocks:
    """Mock processes sharing one state, and a client that asks them in turn."""

    bases: list[str]
    processes: list[subprocess.Popen[str]]
    clients: list[httpx.Client] = field(default_factory=list)
    turn: int = 0

    def __post_init__(self) -> None:
        headers = {"Authorization": f"Bearer {KEY}"}
        self.clients = [httpx.Client(base_url=b, headers=headers, timeout=10) for b in self.bases]

    def get(self, index: int, path: str, **kwargs: Any) -> httpx.Response:
        return self.clients[index % len(self.clients)].get(path, **kwargs)

    def post(self, index: int, path: str, **kwargs: Any) -> httpx.Response:
        return self.clients[index % len(self.clients)].post(path, **kwargs)

    def explain(self, index: int, n: str, key: str = KEY) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}"}
        return self.get(index, "/e", params={"n": n}, headers=headers)

    def at_once(self, count: int, n: str) -> list[int]:
        """``count`` requests for ``n``, 8 at a time, round-robin: their statuses."""
        with ThreadPoolExecutor(8) as pool:
            return list(pool.map(lambda i: self.explain(i, n).status_code, range(count)))

    def journal(self, index: int = 0) -> list[dict[str, Any]]:
        response = self.get(index, "/_mock/requests")
        assert response.status_code == 200, response.text
        entries: list[dict[str, Any]] = response.json()
        return entries

    def close(self) -> None:
        for client in self.clients:
            client.close()
        for process in self.processes:
            stop_process(process)


def start_mocks(count: int, state: str, tmp_path: Path, *extra: str) -> Mocks:
    """``count`` verdict-mock processes on free ports, with one secret and one state."""
    argv = ["--port", "0", "--state", state, "--secret", SECRET, "--api-key", KEY]
    argv += ["--api-key", OTHER_KEY, "--rate-limit", "10/60", *extra]
    processes = []
    for index in range(count):
        with (tmp_path / f"mock{index}.err").open("w") as err:
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", "verdict_contract.mockserver", *argv],
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                    env=clean_environ(),
                )
            )
    bases = []
    try:
        for index, process in enumerate(processes):
            first = read_line(process) or ""
            match = re.search(r"(http://127\.0\.0\.1:\d+)$", first.strip())
            assert match, (tmp_path / f"mock{index}.err").read_text()
            bases.append(match.group(1))
    except BaseException:
        for process in processes:
            stop_process(process)
        raise
    return Mocks(bases, processes)


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with redis_server() as server:
        yield server.url


@pytest.fixture(scope="module", params=[2, 4], ids=["2 processes", "4 processes"])
def mocks(
    request: pytest.FixtureRequest, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Mocks]:
    started = start_mocks(request.param, redis_url, tmp_path_factory.mktemp("mocks"))
    yield started
    started.close()


@pytest.fixture
def fresh(mocks: Mocks) -> Mocks:
    assert mocks.post(0, "/_mock/reset").status_code == 204
    return mocks


def test_a_limit_lets_exactly_its_budget_through_across_processes(fresh: Mocks) -> None:
    statuses = fresh.at_once(30, "demo-contradicted")
    assert Counter(statuses) == {200: 10, 429: 20}
    # the limit is per key: another key has its own 10
    assert fresh.explain(1, "demo-contradicted", OTHER_KEY).status_code == 200


def test_each_script_step_is_used_exactly_once(fresh: Mocks) -> None:
    script = [{"status": 201 + i, "headers": {}} for i in range(6)]
    minted = fresh.post(1, "/_mock/sessions", json={"script": script})
    assert minted.status_code == 201, minted.text
    statuses = fresh.at_once(10, minted.json()["n"])
    assert sorted(statuses) == [200, 200, 200, 200, 201, 202, 203, 204, 205, 206]


def test_steps_come_in_order_across_processes(fresh: Mocks) -> None:
    minted = fresh.post(0, "/_mock/sessions", json={"script": [503, 500, "reset"]})
    n = minted.json()["n"]
    assert [fresh.explain(i, n).status_code for i in range(2)] == [503, 500]
    with pytest.raises(httpx.TransportError):  # the reset, whichever process answers it
        fresh.explain(2, n)
    assert fresh.explain(3, n).status_code == 200


def test_the_journal_holds_every_request_once_in_order_of_arrival(fresh: Mocks) -> None:
    for index in range(12):  # one after another: arrival order is the order sent
        fresh.explain(index, f"probe-{index}")
    for index in range(len(fresh.bases)):  # every process shows the same journal
        journal = fresh.journal(index)
        assert [entry["n"] for entry in journal] == [f"probe-{i}" for i in range(12)]
        assert [entry["status"] for entry in journal] == [404] * 10 + [429] * 2  # 10/60
        assert all(entry["authorization"] == "Bearer …0001" for entry in journal)


def test_the_journal_counts_requests_sent_at_once(fresh: Mocks) -> None:
    statuses = fresh.at_once(24, "demo-uncontradicted")
    journal = fresh.journal()
    assert len(journal) == 24
    assert Counter(entry["status"] for entry in journal) == Counter(statuses)


def test_the_journal_is_numbered_in_the_order_every_process_journaled(fresh: Mocks) -> None:
    """Each entry's ``seq`` is its place in the shared journal, whichever process journaled it,
    in both rings (a request without a key goes to the ring), and the journal reads in it."""
    sent = [f"seq-{index}" for index in range(8)]
    for index, n in enumerate(sent):
        key = KEY if index % 3 else "not-a-key-of-this-mock-000"
        fresh.explain(index % len(fresh.bases), n, key=key)
    for reader in range(len(fresh.bases)):
        entries = fresh.journal(reader)
        numbers = [entry["seq"] for entry in entries]
        assert numbers == list(range(numbers[0], numbers[0] + len(sent)))
        assert [entry["n"] for entry in entries] == sent


def test_reset_clears_limits_journal_scripts_and_clock_everywhere(fresh: Mocks) -> None:
    minted = fresh.post(0, "/_mock/sessions", json={"script": [503, 503]}).json()["n"]
    assert fresh.explain(1, minted).status_code == 503
    assert fresh.post(1, "/_mock/sessions", json={}).status_code == 201
    fresh.at_once(12, "demo-contradicted")  # the budget is spent
    assert fresh.explain(0, "demo-contradicted").status_code == 429
    assert fresh.post(len(fresh.bases) - 1, "/_mock/reset").status_code == 204
    assert fresh.journal(0) == []
    assert fresh.explain(0, minted).status_code == 200  # its last step is gone
    assert fresh.explain(1, "demo-contradicted").status_code == 200  # a fresh budget
    # named sessions get their scripts afresh: demo-rate-limited answers 429 first
    assert fresh.explain(0, "demo-rate-limited").status_code == 429


def test_the_clock_and_expiry_marks_are_shared(fresh: Mocks) -> None:
    young = fresh.post(0, "/_mock/sessions", json={"age_seconds": 0}).json()["n"]
    assert fresh.explain(1, young).status_code == 200
    fresh.at_once(10, "demo-contradicted")
    assert fresh.explain(1, "demo-contradicted").status_code == 429
    # advance through the in-process API of one of them? The control API has no advance:
    # a mock in this process with the same secret and state moves the shared clock.
    with live_mock(_same_state(fresh)) as here:
        here.advance(3600)
    assert fresh.explain(1, "demo-contradicted").status_code == 200  # the window passed
    assert fresh.explain(0, young).status_code == 404  # and the session aged past 900 s
    assert fresh.journal()[-1]["outcome"] == "expired"


def _same_state(mocks: Mocks) -> Settings:
    health = mocks.get(0, "/_mock/health").json()
    return Settings(port=0, state=StateURL.parse(health["state"]), secret=SECRET, api_keys=(KEY,))


def test_a_session_expired_by_hand_is_expired_everywhere(fresh: Mocks, redis_url: str) -> None:
    with live_mock(_same_state(fresh)) as here:
        here.expire("demo-contradicted")
    assert {fresh.explain(i, "demo-contradicted").status_code for i in range(4)} == {404}


def test_minted_sessions_are_counted_once_across_processes(redis_url: str) -> None:
    settings = Settings(
        port=0, state=StateURL.parse(redis_url), secret="mint-count", api_keys=(KEY,)
    )
    with live_mock(settings) as first, live_mock(settings) as second:
        first.reset()
        bodies = [
            httpx.get(mock.url(mock.mint()), headers=mock.headers).json()["verdict"]
            for mock in (first, second, first)
        ]
        first.reset()
        again = [
            httpx.get(mock.url(mock.mint()), headers=mock.headers).json()["verdict"]
            for mock in (second, first, second)
        ]
    assert again == bodies  # the same mint numbers after a reset, whichever process mints


def test_a_blocking_server_shares_the_state_too(redis_url: str) -> None:
    """The Flask app (any WSGI server) answers /e through the same script, blocking its thread."""
    settings = Settings(
        state=StateURL.parse(redis_url),
        secret="blocking",
        api_keys=(KEY,),
        rate_limit=RateLimit.parse("3/60"),
    )
    client = create_app(settings).test_client()
    client.post("/_mock/reset")
    headers = {"Authorization": f"Bearer {KEY}"}
    statuses = [client.get("/e?n=demo-contradicted", headers=headers).status_code for _ in range(5)]
    assert statuses == [200, 200, 200, 429, 429]
    assert [e["status"] for e in client.get("/_mock/requests").get_json()] == statuses


def test_the_journal_is_bounded_in_entries(redis_url: str) -> None:
    settings = Settings(
        port=0, state=StateURL.parse(redis_url), secret="bounded", api_keys=(KEY,), journal_size=5
    )
    with live_mock(settings) as mock:
        mock.reset()
        for index in range(8):
            httpx.get(f"{mock.base_url}/e", params={"n": f"b{index}"}, headers=mock.headers)
        assert [entry.n for entry in mock.journal] == ["b3", "b4", "b5", "b6", "b7"]


def test_an_entry_of_the_biggest_request_stays_within_its_bound(redis_url: str) -> None:
    """Every field of an entry is bounded, so the journal is bounded in bytes by its count and
    a reply of it by :data:`redisstate.ENTRY_BYTES` an entry: a request of long parameter names
    of characters escaped in JSON (masked: 114 kB of them, were they kept as sent), an ``n`` of such
    characters and a 32 kB header (never kept) fits."""
    settings = Settings(port=0, state=StateURL.parse(redis_url), secret="bytes", api_keys=(KEY,))
    wide = ("\U0001d51b" * 400, "\x01" * 400)  # 4 bytes each in UTF-8, or 6 escaped in JSON
    extra = [(f"p{index}-" + "\x01" * 3800, "v") for index in range(5)]
    with (
        live_mock(settings) as mock,
        httpx.Client(base_url=mock.base_url, headers=mock.headers, timeout=10) as http,
    ):
        mock.reset()
        for index in range(4):
            params: list[tuple[str, str | int | float | bool | None]] = [
                ("n", f"{index:04d}-{wide[index % 2]}"),
                *extra,
            ]
            assert http.get("/e", params=params, headers={"X-Big": "h" * 32_000}).status_code < 500
        store = mock.state.store
        assert isinstance(store, RedisStore)
    client = redis.Redis.from_url(redis_url)
    try:
        entries = cast(list[bytes], client.lrange(store.keys.journal, 0, -1))
    finally:
        client.close()
    assert len(entries) == 4
    assert 1_000 < max(len(entry) for entry in entries) <= ENTRY_BYTES
    assert not any(b"hhhhhhhh" in entry for entry in entries)  # headers never reach Redis


def test_mocks_with_other_secrets_do_not_meet(redis_url: str) -> None:
    one = Settings(
        port=0,
        state=StateURL.parse(redis_url),
        secret="one",
        api_keys=(KEY,),
        rate_limit=RateLimit.parse("1/60"),
    )
    two = Settings(
        port=0,
        state=StateURL.parse(redis_url),
        secret="two",
        api_keys=(KEY,),
        rate_limit=RateLimit.parse("1/60"),
    )
    with live_mock(one) as first, live_mock(two) as second:
        first.reset()
        second.reset()
        for mock in (first, second):
            url = f"{mock.base_url}/e?n=demo-contradicted"
            assert httpx.get(url, headers=mock.headers).status_code == 200
        assert len(first.journal) == len(second.journal) == 1


def test_scripts_redis_forgot_are_loaded_again(redis_url: str) -> None:
    """After a restart of Redis or ``SCRIPT FLUSH``, the next call loads the scripts again:
    answered, on the loop and from a blocking control call, not a 503."""
    settings = Settings(port=0, state=StateURL.parse(redis_url), secret="flushed", api_keys=(KEY,))
    client = redis.Redis.from_url(redis_url)
    with live_mock(settings) as mock, contextlib.closing(client):
        mock.reset()
        n = mock.mint(script=[503])
        for status in (503, 200):
            client.script_flush()
            assert httpx.get(mock.url(n), headers=mock.headers).status_code == status
        client.script_flush()
        assert explain.handle(mock.state, "GET", f"n={n}".encode(), f"Bearer {KEY}").status == 200
        assert [entry.status for entry in mock.journal] == [503, 200, 200]


def test_no_api_key_is_stored_in_redis(redis_url: str) -> None:
    settings = Settings(port=0, state=StateURL.parse(redis_url), secret="secrets", api_keys=(KEY,))
    with live_mock(settings) as mock:
        mock.reset()
        httpx.get(mock.url("demo-contradicted"), headers=mock.headers)
        httpx.get(mock.url(KEY), headers=mock.headers)  # a key sent as n
    client = redis.Redis.from_url(redis_url)
    stored = b"".join(repr(client.dump(key)).encode() + key for key in client.scan_iter(count=1000))
    client.close()
    assert KEY.encode() not in stored
    assert KEY[-4:].encode() in stored  # masked as …0001 in the journal: the dump is searched


def test_redis_killed_and_restarted_gives_503_then_recovers(tmp_path: Path) -> None:
    with redis_server() as server:
        mocks = start_mocks(2, server.url, tmp_path)
        try:
            assert mocks.explain(0, "demo-contradicted").status_code == 200
            server.stop()
            for index in range(4):  # every process answers, and says why
                down = mocks.explain(index, "demo-contradicted")
                assert down.status_code == 503
                error = down.json()["error"]
                assert error["code"] == "state_unavailable"
                assert server.url in error["message"]
                assert down.headers["Retry-After"] == "1"
            assert mocks.get(0, "/_mock/requests").status_code == 503  # the control API too
            server.start()  # the same port, empty
            assert wait_until(
                lambda: mocks.explain(1, "demo-contradicted").status_code == 200, timeout=10
            )
            assert mocks.explain(0, "demo-contradicted").status_code == 200
            assert all(process.poll() is None for process in mocks.processes)
        finally:
            mocks.close()


def test_a_frozen_redis_gives_503_without_holding_other_requests(tmp_path: Path) -> None:
    with redis_server() as server:
        mocks = start_mocks(2, server.url, tmp_path)
        try:
            assert mocks.explain(0, "demo-contradicted").status_code == 200
            server.pause()
            try:
                with ThreadPoolExecutor(4) as pool:  # several at once: none waits for another
                    frozen = list(pool.map(lambda i: mocks.explain(i, "demo-slow"), range(4)))
                assert {r.status_code for r in frozen} == {503}
                assert "did not answer" in frozen[0].json()["error"]["message"]
                # the loop was never blocked: a request that needs no state is answered
                assert mocks.get(0, "/_mock/openapi.json").status_code == 200
            finally:
                server.resume()
            assert wait_until(
                lambda: mocks.explain(1, "demo-contradicted").status_code == 200, timeout=10
            )
        finally:
            mocks.close()


def _lines_until(process: subprocess.Popen[str], needle: str, timeout: float) -> list[str]:
    """The child's lines up to the one holding ``needle``; what came if none does in time."""
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
            if needle in line:
                return

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while not any(needle in line for line in seen):
        try:
            seen.append(lines.get(timeout=max(0.0, deadline - time.monotonic())))
        except queue.Empty:
            break
    return seen


def test_workers_share_one_port_and_one_state(tmp_path: Path) -> None:
    with redis_server() as server:
        argv = ["--port", "0", "--state", server.url, "--api-key", KEY, "--workers", "2"]
        argv += ["--rate-limit", "5/60"]
        with (tmp_path / "err").open("w") as err:
            parent = subprocess.Popen(
                [sys.executable, "-m", "verdict_contract.mockserver", *argv],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=clean_environ(),
            )
        try:
            first = read_line(parent) or ""
            match = re.search(r"(http://127\.0\.0\.1:\d+)$", first.strip())
            assert match, (tmp_path / "err").read_text()
            lines = _lines_until(parent, "workers:  2 processes", timeout=20)
            assert any("workers:  2 processes" in line for line in lines), lines
            headers = {"Authorization": f"Bearer {KEY}"}
            statuses = []
            for _ in range(12):  # a new connection each time: the kernel spreads them
                with httpx.Client(base_url=match.group(1), headers=headers) as client:
                    statuses.append(client.get("/e?n=demo-contradicted").status_code)
            assert Counter(statuses) == {200: 5, 429: 7}
        finally:
            stop_process(parent)
        assert parent.returncode == 0


def test_workers_without_a_shared_state_are_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "verdict_contract.mockserver", "--workers", "2", "--port", "0"],
        capture_output=True,
        text=True,
        env=clean_environ(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--workers 2 needs --state redis://HOST:PORT/DB" in done.stderr
    assert Settings(workers=1).workers == 1  # one process in memory stays allowed


def test_a_state_url_is_checked_and_its_password_never_printed() -> None:
    url = StateURL.parse("redis://:hunter2@cache.internal:6379/3")
    assert "hunter2" not in repr(Settings(state=url))
    assert url.label == "redis://cache.internal:6379/3"
    with pytest.raises(ValueError, match="not a state URL"):
        StateURL.parse("http://cache.internal")
    with pytest.raises(ValueError, match="port is not a number"):
        StateURL.parse("redis://cache.internal:port/0")
    for wrong in ("redis://:hunter2@cache.internal/7x", "unix:///r.sock?db=x1", "redis://h/\u2077"):
        with pytest.raises(ValueError, match="database is not a number") as refused:
            StateURL.parse(wrong)
        assert "hunter2" not in str(refused.value)
    for right in ("redis://cache.internal/7", "redis://cache.internal", "unix:///r.sock?db=2"):
        assert StateURL.parse(right) == right
    assert StateURL.parse(" Memory ").is_memory


XDIST_CONFTEST = """
import os

import pytest

from verdict_contract.mockserver import Settings


@pytest.fixture(scope="session")
def verdict_mock_settings(worker_id):
    return Settings(port=0, secret=f"job-{worker_id}").with_env(os.environ)
"""

XDIST_TESTS = """
import httpx
import pytest


@pytest.mark.parametrize("index", range(4))
def test_each_test_sees_its_own_requests(verdict_mock, index):
    assert verdict_mock.state.shared is not None
    for _ in range(index + 1):
        httpx.get(verdict_mock.url("demo-contradicted"), headers=verdict_mock.headers)
    assert len(verdict_mock.journal) == index + 1
"""


def test_the_plugin_runs_on_a_shared_state_under_xdist(
    pytester: pytest.Pytester, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's pattern: one Redis, a secret per xdist worker, a reset per test."""
    monkeypatch.setenv("VERDICT_MOCK_STATE", redis_url)
    pytester.makeconftest(XDIST_CONFTEST)
    pytester.makepyfile(test_shared=XDIST_TESTS)
    # --dist each: every test on both workers, so both use the shared state
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--dist", "each")
    result.assert_outcomes(passed=8)

    client = redis.Redis.from_url(redis_url)
    for worker in ("gw0", "gw1"):  # each worker's mock kept its state under its own secret
        backend = RedisStore(StateURL.parse(redis_url), f"job-{worker}", 10)
        assert list(client.scan_iter(match=backend.prefix.replace("{", "[{]") + "*"))
        backend.close()
    client.close()


def test_a_mock_whose_state_cannot_be_reached_says_so_at_start() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    done = subprocess.run(
        [sys.executable, "-m", "verdict_contract.mockserver", "--port", "0", "--state", url],
        capture_output=True,
        text=True,
        env=clean_environ(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert f"verdict-mock: error: the mock's shared state ({url}) did not answer" in done.stderr
    assert "Traceback" not in done.stderr


def test_pipelined_requests_on_a_shared_state_are_answered_in_turn(fresh: Mocks) -> None:
    # The async server awaits the store, then waits out a scripted delay: the request behind
    # it on the same connection is answered after it, never before.
    minted = fresh.post(0, "/_mock/sessions", json={"script": [{"delay_ms": 200}, 503]})
    assert minted.status_code == 201, minted.text
    n = minted.json()["n"]
    host, port = fresh.bases[0].removeprefix("http://").split(":")
    head = f"GET /e?n={n} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {KEY}\r\n"
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall((head + "\r\n").encode() + (head + "Connection: close\r\n\r\n").encode())
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", received)
    assert statuses == [b"200", b"503"], received
    delayed = [e for e in fresh.journal() if e["n"] == n]
    assert [e["status"] for e in delayed] == [200, 503]


def test_a_process_that_would_answer_otherwise_says_so_loudly(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Processes sharing a state with another rate limit, lifetime, journal size or key set
    answer differently by process: the later one logs one error naming what differs (never a
    key); one with the same settings says nothing."""
    state_url = StateURL.parse(redis_url)
    first = Settings(state=state_url, secret="drift-secret", api_keys=(KEY,), state_name="dr")
    made = [MockState(first)]
    made[0].reset()  # the record of the first one's settings outlives a reset
    with caplog.at_level(logging.ERROR, logger="mockserver.state"):
        made.append(MockState(first))
        assert not [r for r in caplog.records if "answer otherwise" in r.getMessage()]
        other = dataclasses.replace(
            first, rate_limit=RateLimit.parse("1/60"), api_keys=(KEY, "another-key-0000")
        )
        made.append(MockState(other))
    for state in made:
        state.store.close()
    (said,) = [r.getMessage() for r in caplog.records if "answer otherwise" in r.getMessage()]
    assert "rate_limit 6000/60 there, 1/60 here" in said
    assert "another set of API keys" in said
    assert "session_lifetime" not in said
    assert "another-key-0000"[:8] not in said


def test_the_shared_gauges_are_exported_by_one_process_at_a_time(fresh: Mocks) -> None:
    """Every process reads the same journal: summed over processes, it would count N times."""
    fresh.explain(0, "demo-refused")
    for _ in range(2):  # the lease holder keeps it while it is scraped
        exported = {
            index: [
                line
                for line in fresh.get(index, "/_mock/metrics").text.splitlines()
                if line.startswith(("verdict_mock_journal_entries ", "verdict_mock_script_bytes "))
            ]
            for index in range(len(fresh.bases))
        }
        (reporter,) = [index for index, lines in exported.items() if lines]
        assert exported[reporter] == [
            "verdict_mock_journal_entries 1.0",
            "verdict_mock_script_bytes 0.0",
        ]
