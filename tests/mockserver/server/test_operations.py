"""The mock as an operated service: probes, a store that refuses writes, stopping, one port.

Each test runs real ``verdict-mock`` processes over real sockets; the shared-state tests run a
real ``redis-server`` (full with ``maxmemory 1mb`` and ``noeviction``, a read-only replica,
stopped), and the stopping tests send real signals.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import clean_environ, free_port, read_line, stop_process, wait_until
from tests.redisserver import RedisServer, redis_server

KEY = "ops-test-key-000001"
FOREIGN_HOST = "10.1.2.3:8080"  # a probe's Host: the pod's IP
PROBES = ("/_mock/livez", "/_mock/readyz")


@contextmanager
def mock(*flags: str, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], httpx.Client]]:
    """One ``verdict-mock`` on a free port, and a client of it (with the API key)."""
    argv = [sys.executable, "-m", "verdict_contract.mockserver", "--port", "0", "--api-key", KEY]
    with (tmp_path / "mock.err").open("w") as err:
        process = subprocess.Popen(
            [*argv, *flags], stdout=subprocess.PIPE, stderr=err, text=True, env=clean_environ()
        )
    try:
        first = read_line(process) or ""
        match = re.search(r"(http://127\.0\.0\.1:\d+)$", first.strip())
        assert match, (tmp_path / "mock.err").read_text()
        headers = {"Authorization": f"Bearer {KEY}"}
        with httpx.Client(base_url=match.group(1), headers=headers, timeout=10) as client:
            yield process, client
    finally:
        stop_process(process)


# --- 1. health for machines --------------------------------------------------------------------


@pytest.mark.parametrize("control", [True, False], ids=["control", "no-control"])
def test_probes_answer_any_host_and_only_read(control: bool, tmp_path: Path) -> None:
    flags = () if control else ("--no-control",)
    with mock(*flags, tmp_path=tmp_path) as (_, client):
        for path in PROBES:
            answer = client.get(path, headers={"Host": FOREIGN_HOST})
            assert answer.status_code == 200, answer.text
            assert answer.headers["Cache-Control"] == "no-store"
            assert client.head(path, headers={"Host": FOREIGN_HOST}).status_code == 200
            for method in ("POST", "PUT", "DELETE"):
                assert client.request(method, path).status_code == 405
        assert client.get("/_mock/readyz").json()["status"] == "ready"
        if control:  # the control API itself still refuses that Host
            assert client.get("/_mock/health", headers={"Host": FOREIGN_HOST}).status_code == 421


@pytest.fixture(scope="module")
def store() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


def _fill(client: redis.Redis) -> None:
    """``maxmemory 1mb`` with ``noeviction``, then written until even one byte is refused."""
    client.config_set("maxmemory", "1mb")
    client.config_set("maxmemory-policy", "noeviction")
    for size in (1000, 100, 1):
        for index in range(5000):
            try:
                client.set(f"filler:{size}:{index}", "x" * size)
            except redis.exceptions.OutOfMemoryError:
                break
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        client.set("filler:last", "x")


def _not_ready(client: httpx.Client, code: str) -> str:
    answer = client.get("/_mock/readyz", headers={"Host": FOREIGN_HOST})
    assert answer.status_code == 503, answer.text
    body = answer.json()
    assert body["status"] == "not_ready"
    assert body["error"]["code"] == code
    message: str = body["error"]["message"]
    return message


def _refused(client: httpx.Client, code: str, retry: bool) -> str:
    answer = client.get("/e", params={"n": "demo-contradicted"})
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == code
    assert ("Retry-After" in answer.headers) is retry
    message: str = answer.json()["error"]["message"]
    return message


def test_readiness_and_503s_follow_a_full_redis(store: RedisServer, tmp_path: Path) -> None:
    admin = redis.Redis(port=store.port)
    with mock("--state", store.url, tmp_path=tmp_path) as (_, client):
        assert client.get("/e", params={"n": "demo-contradicted"}).status_code == 200
        assert client.get("/_mock/readyz").status_code == 200
        try:
            _fill(admin)
            assert "full" in _not_ready(client, "state_full")
            assert "retrying will not help" in _refused(client, "state_full", retry=False)
            health = client.get("/_mock/health")  # agrees with readyz: not "ok" while full
            assert health.status_code == 503
            assert health.json()["error"]["code"] == "state_full"
            assert client.get("/_mock/livez").status_code == 200  # alive, only not ready
        finally:
            admin.flushall()
            admin.config_set("maxmemory", "0")
        assert client.get("/_mock/readyz").status_code == 200
        assert client.get("/e", params={"n": "demo-contradicted"}).status_code == 200
    admin.close()


def test_readiness_and_503s_follow_a_read_only_replica(store: RedisServer, tmp_path: Path) -> None:
    admin = redis.Redis(port=store.port)
    with mock("--state", store.url, tmp_path=tmp_path) as (_, client):
        assert client.get("/_mock/readyz").status_code == 200
        try:
            admin.replicaof("127.0.0.1", str(free_port()))  # a master that is not there
            assert "read-only" in _not_ready(client, "state_read_only")
            _refused(client, "state_read_only", retry=False)
        finally:
            admin.replicaof("NO", "ONE")
        assert client.get("/_mock/readyz").status_code == 200
        assert client.get("/e", params={"n": "demo-contradicted"}).status_code == 200
    admin.close()


def test_readiness_and_503s_follow_a_stopped_redis(tmp_path: Path) -> None:
    with redis_server() as server, mock("--state", server.url, tmp_path=tmp_path) as (_, client):
        assert client.get("/_mock/readyz").status_code == 200
        server.stop()
        _not_ready(client, "state_unavailable")
        _refused(client, "state_unavailable", retry=True)
        for query in ("", "n=a&n=b", "n=%ff"):  # malformed, store or not: never a 5xx
            assert client.get(f"/e?{query}").status_code == 400
        assert client.get("/_mock/livez").status_code == 200
        server.start()
        assert wait_until(lambda: client.get("/_mock/readyz").status_code == 200, timeout=10)


def test_livez_answers_while_every_thread_waits_on_a_paused_redis(tmp_path: Path) -> None:
    """A store that does not answer holds the app's threads (each control call its timeout);
    liveness is answered on the loop, so a Redis outage restarts nothing."""
    with (
        redis_server() as server,
        mock("--state", server.url, "--threads", "1", tmp_path=tmp_path) as (_, client),
    ):
        assert client.get("/_mock/readyz").status_code == 200
        redis.Redis(port=server.port).client_pause(20_000)
        with ThreadPoolExecutor(6) as pool:
            held = [pool.submit(client.get, "/_mock/health") for _ in range(6)]
            assert wait_until(lambda: client.get("/_mock/livez").status_code == 200)
            answered = sum(call.done() for call in held)
            assert answered <= 1, answered  # the sixth waits some 6 s on the one thread
            assert [call.result().status_code for call in held] == [503] * 6


# --- 2. graceful stops -------------------------------------------------------------------------

DELAY_MS = 1500
GRACE = 10.0  # generous: the process must exit well within it, and the test waits that long


@contextmanager
def started(
    argv: list[str], tmp_path: Path, sigint_ignored: bool = False
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``verdict-mock ARGV`` (a single process or a ``--workers`` parent) and its base URL;
    ``sigint_ignored``: started as a shell starts a background job (SIGINT ignored)."""
    command = [sys.executable, "-m", "verdict_contract.mockserver", "--api-key", KEY, *argv]
    if sigint_ignored:  # as sh does for `command &`; exec keeps the signal ignored
        command = ["sh", "-c", 'trap "" INT; exec "$0" "$@"', *command]
    with (tmp_path / "started.err").open("w") as err:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=err, text=True, env=clean_environ()
        )
    try:
        first = read_line(process) or ""
        match = re.search(r"(http://127\.0\.0\.1:\d+)$", first.strip())
        assert match, (tmp_path / "started.err").read_text()
        yield process, match.group(1)
    finally:
        stop_process(process)


def _refuses_connections(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def _answer_of(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


@pytest.mark.parametrize("workers", [1, 2], ids=["one process", "workers 2"])
def test_sigterm_lets_a_delayed_answer_finish_then_exits(
    workers: int, store: RedisServer, tmp_path: Path
) -> None:
    argv = ["--port", "0", "--state", store.url, "--grace-seconds", str(GRACE)]
    argv += ["--workers", str(workers), "--secret", f"graceful-{workers}"]
    with started(argv, tmp_path) as (process, base):
        port = int(base.rpartition(":")[2])
        headers = {"Authorization": f"Bearer {KEY}"}
        with httpx.Client(base_url=base, headers=headers, timeout=10) as client:
            assert wait_until(lambda: client.get("/_mock/readyz").status_code == 200, timeout=20)
            minted = client.post("/_mock/sessions", json={"script": [{"delay_ms": DELAY_MS}]})
            assert minted.status_code == 201, minted.text
            session = minted.json()["n"]
            waiting = socket.create_connection(("127.0.0.1", port), timeout=30)
            request = f"GET /e?n={session} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
            waiting.sendall(request.encode() + b"\r\n")

            def decided() -> bool:  # its step is taken (its bytes freed) once decided: it waits
                held: int = client.get("/_mock/health").json()["script_bytes"]
                return held == 0

            assert wait_until(decided, timeout=20)
        process.send_signal(signal.SIGTERM)
        assert wait_until(lambda: _refuses_connections(port), timeout=20)
        with waiting:
            answer = _answer_of(waiting)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 "), answer[:200]
        length = re.search(rb"(?i)\r\ncontent-length: (\d+)", head)
        assert length is not None
        assert int(length.group(1)) == len(body) > 0
        assert b"\r\nconnection: close" in head.lower()  # it said it would not take another
        assert process.wait(timeout=GRACE) == 0
    said = (tmp_path / "started.err").read_text()  # each process says it stops, then stopped
    assert said.count("stopping gracefully (SIGTERM): ") == workers, said
    assert "with requests under way" in said
    assert said.count("stopped gracefully: every request under way answered in ") == workers


@pytest.mark.parametrize("workers", [1, 2], ids=["one process", "workers 2"])
def test_sigint_ends_every_process_of_a_mock_started_in_the_background(
    workers: int, store: RedisServer, tmp_path: Path
) -> None:
    """A shell starts a background job with SIGINT ignored; ``kill -INT`` still ends the mock
    and every worker it started, as it does a mock in the foreground."""
    argv = ["--port", "0", "--state", store.url, "--workers", str(workers)]
    with started([*argv, "--secret", f"sigint-{workers}"], tmp_path, sigint_ignored=True) as (
        process,
        base,
    ):
        with httpx.Client(base_url=base, timeout=10) as client:
            assert wait_until(lambda: client.get("/_mock/readyz").status_code == 200, timeout=20)
        if workers > 1:
            assert wait_until(lambda: len(_workers_of(process.pid)) == workers, timeout=20)
        started_workers = _workers_of(process.pid) if workers > 1 else []
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=GRACE + 10) == 0
        # the parent exits after its workers (their pids, not the port: another test may have
        # bound the port freed now)
        assert all(map(_gone, started_workers)), started_workers


def _workers_of(parent: int) -> list[int]:
    """The pids of a ``--workers`` parent's children (Linux's /proc)."""
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    return [int(pid) for pid in children]


def _gone(pid: int) -> bool:
    """Whether a process has ended (a zombie no one reaped has ended too)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")
@pytest.mark.parametrize(
    "signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM twice", "SIGKILL"]
)
def test_no_worker_outlives_its_parent(
    signum: signal.Signals, store: RedisServer, tmp_path: Path
) -> None:
    """A second SIGTERM, with an answer still delayed, is passed on (each worker cuts at once)
    and the parent exits after its workers; a parent killed outright leaves none serving."""
    argv = ["--port", "0", "--state", store.url, "--grace-seconds", str(GRACE), "--workers", "2"]
    with started([*argv, "--secret", f"outlived-{signum.name}"], tmp_path) as (process, base):
        port = int(base.rpartition(":")[2])
        workers = _workers_of(process.pid)
        assert len(workers) == 2
        headers = {"Authorization": f"Bearer {KEY}"}
        with httpx.Client(base_url=base, headers=headers, timeout=10) as client:
            assert wait_until(lambda: client.get("/_mock/readyz").status_code == 200, timeout=20)
            minted = client.post("/_mock/sessions", json={"script": [{"delay_ms": 30_000}]})
            session = minted.json()["n"]
            waiting = socket.create_connection(("127.0.0.1", port), timeout=30)
            request = f"GET /e?n={session} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
            waiting.sendall(request.encode() + b"\r\n")
            held = lambda: client.get("/_mock/health").json()["script_bytes"] == 0  # noqa: E731
            assert wait_until(held, timeout=20)  # its step taken: a worker holds it, decided
        try:
            if signum is signal.SIGKILL:
                process.kill()
                assert wait_until(lambda: all(map(_gone, workers)), timeout=20), workers
            else:
                err = tmp_path / "started.err"
                process.send_signal(signal.SIGTERM)
                busy = "stopping gracefully (SIGTERM): 1 connections open, 1 with requests"
                assert wait_until(lambda: busy in err.read_text(), timeout=20), err.read_text()
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=GRACE + 10)
                assert [pid for pid in workers if not _gone(pid)] == []  # none left at its exit
                assert "stopped at once: 1 connections cut" in err.read_text()
            # the held client is let go, not left waiting (the freed port is not asked: another
            # test's server may take it at once)
            with contextlib.suppress(ConnectionResetError):
                assert b"200 OK" not in _answer_of(waiting)
        finally:
            waiting.close()
            for pid in workers:  # none left running, whatever failed
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP here")
@pytest.mark.parametrize("scenario", [True, False], ids=["files to reload", "none"])
def test_sighup_while_a_worker_group_starts(
    scenario: bool, store: RedisServer, tmp_path: Path
) -> None:
    """SIGHUPs before every worker listens: with a file to reload, the group starts and serves
    (the hangup passed on once they listen); with none, it stops, as on SIGTERM (exit 0)."""
    argv = [sys.executable, "-m", "verdict_contract.mockserver", "--api-key", KEY, "--port", "0"]
    argv += ["--state", store.url, "--workers", "2", "--secret", f"early-hangup-{scenario}"]
    if scenario:
        (tmp_path / "team.yaml").write_text("sessions:\n  aaaa: {verdict: refused}\n")
        argv += ["--scenario", str(tmp_path / "team.yaml")]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=clean_environ())
    assert process.stdout is not None
    try:  # the parent handles signals before it starts its workers; they take a second to listen
        assert wait_until(lambda: len(_workers_of(process.pid)) == 2, timeout=20)
        if not scenario:  # one: a later one could land as Python exits, with no handler left
            process.send_signal(signal.SIGHUP)
            assert process.wait(timeout=GRACE + 10) == 0
            return
        for _ in range(40):  # every 50 ms, until the group listens
            process.send_signal(signal.SIGHUP)
            if select.select([process.stdout], [], [], 0.05)[0]:
                break
        first = read_line(process) or ""
        base = re.search(r"(http://127\.0\.0\.1:\d+)$", first.strip())
        assert base, first
        assert httpx.get(f"{base.group(1)}/_mock/readyz", timeout=10).status_code == 200
        assert process.poll() is None
    finally:
        workers = _workers_of(process.pid) if process.poll() is None else []
        stop_process(process)
        assert wait_until(lambda: all(map(_gone, workers)), timeout=20)


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP here")
def test_sighup_to_a_worker_group_reloads_every_worker(store: RedisServer, tmp_path: Path) -> None:
    scenario = tmp_path / "team.yaml"
    scenario.write_text("sessions:\n  aaaa: {verdict: refused}\n")
    argv = ["--port", "0", "--state", store.url, "--workers", "2", "--scenario", str(scenario)]
    with started([*argv, "--secret", "hangup-group"], tmp_path) as (process, base):
        stamp = scenario.stat()
        # Same size and mtime: no worker's file watcher can notice, only SIGHUP can.
        scenario.write_text("sessions:\n  bbbb: {verdict: refused}\n")
        os.utime(scenario, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))

        def named() -> set[str]:  # from every worker: the kernel spreads the connections
            answers = (httpx.get(f"{base}/_mock/sessions", timeout=5).json() for _ in range(20))
            return {s["n"] for answer in answers for s in answer if not s["n"].startswith("demo-")}

        assert named() == {"aaaa"}
        process.send_signal(signal.SIGHUP)
        assert wait_until(lambda: named() == {"bbbb"}, timeout=20, step=0.2)
        assert process.poll() is None  # it reloaded, and serves on


# --- 3. one port, one mock ---------------------------------------------------------------------


def _group(port: int, secret: str, state: str) -> list[str]:
    command = [sys.executable, "-m", "verdict_contract.mockserver", "--api-key", KEY]
    return [*command, "--port", str(port), "--state", state, "--workers", "2", "--secret", secret]


def test_a_second_worker_group_refuses_a_port_another_holds(
    store: RedisServer, tmp_path: Path
) -> None:
    port = free_port()
    with started(_group(port, "first-group", store.url)[3:], tmp_path) as (first, base):
        assert wait_until(lambda: httpx.get(f"{base}/_mock/livez").status_code == 200)
        holders = {httpx.get(f"{base}/_mock/livez").json()["pid"] for _ in range(20)}
        second = subprocess.run(
            _group(port, "second-group", store.url),
            capture_output=True,
            text=True,
            env=clean_environ(),
            timeout=30,
            check=False,
        )
        assert second.returncode == 2, second.stdout
        assert second.stdout == ""  # no banner: it never served
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, second.stderr
        assert f"127.0.0.1:{port} is in use" in lines[0]
        assert "a verdict-mock answers there" in lines[0]
        assert any(f"pid {pid}" in lines[0] for pid in holders), (lines[0], holders)
        assert first.poll() is None  # the first group serves on
        assert httpx.get(f"{base}/_mock/readyz").status_code == 200


def test_a_worker_group_names_no_holder_it_cannot_tell(store: RedisServer) -> None:
    with socket.create_server(("127.0.0.1", 0)) as other:  # listens, never answers
        port = other.getsockname()[1]
        done = subprocess.run(
            _group(port, "lone-group", store.url),
            capture_output=True,
            text=True,
            env=clean_environ(),
            timeout=30,
            check=False,
        )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert f"127.0.0.1:{port} is in use by another process" in line
    assert "verdict-mock answers" not in line


# --- 4. metrics --------------------------------------------------------------------------------


def _samples(client: httpx.Client) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    answer = client.get("/_mock/metrics", headers={"Host": FOREIGN_HOST})
    assert answer.status_code == 200, answer.text
    assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert KEY not in answer.text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def _by_status(samples: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> dict[str, float]:
    counts: dict[str, float] = {}
    for (name, labels), value in samples.items():
        if name == "verdict_mock_requests_total":
            status = dict(labels)["status"]
            counts[status] = counts.get(status, 0) + value
    return counts


def test_metrics_count_answers_latency_and_bounds(tmp_path: Path) -> None:
    with mock("--no-control", tmp_path=tmp_path) as (_, client):
        for _ in range(3):
            assert client.get("/e", params={"n": "demo-contradicted"}).status_code == 200
        assert client.get("/e", params={"n": "nobody"}).status_code == 404
        assert client.get("/e", params={"n": "x"}, headers={"Authorization": ""}).status_code == 401
        samples = _samples(client)
        assert _by_status(samples) == {"200": 3, "404": 1, "401": 1}
        assert samples[("verdict_mock_request_seconds_count", frozenset())] == 5
        assert samples[("verdict_mock_request_seconds_bucket", frozenset({("le", "+Inf")}))] == 5
        assert samples[("verdict_mock_journal_entries", frozenset())] == 5
        assert ("verdict_mock_script_bytes", frozenset()) in samples
        assert _by_status(_samples(client)) == {"200": 3, "404": 1, "401": 1}  # read-only
        assert client.post("/_mock/metrics").status_code == 405


def test_metrics_count_state_store_round_trips_and_errors(tmp_path: Path) -> None:
    with redis_server() as server, mock("--state", server.url, tmp_path=tmp_path) as (_, client):
        for _ in range(3):
            assert client.get("/e", params={"n": "demo-contradicted"}).status_code == 200
        samples = _samples(client)
        assert samples[("verdict_mock_state_round_trips_total", frozenset())] >= 3
        assert samples[("verdict_mock_state_errors_total", frozenset())] == 0
        server.stop()
        assert client.get("/e", params={"n": "demo-contradicted"}).status_code == 503
        samples = _samples(client)  # answered with the store down: its gauges left out
        assert samples[("verdict_mock_state_errors_total", frozenset())] >= 1
        assert _by_status(samples) == {"200": 3, "503": 1}


def test_a_workers_group_says_each_warning_of_its_start_once(
    store: RedisServer, tmp_path: Path
) -> None:
    """The parent checks the settings and says what is wrong with them; its workers, started
    with the same settings, do not say it again (it was once a line per process)."""
    argv = ["--port", "0", "--state", store.url, "--state-name", "warned-once", "--workers", "2"]
    with started(argv, tmp_path) as (process, base):  # the default signing secret: a warning
        with httpx.Client(base_url=base, timeout=10) as client:
            assert wait_until(lambda: client.get("/_mock/readyz").status_code == 200, timeout=20)
        assert len(_workers_of(process.pid)) == 2  # each listens (the banner waits for it)
    said = (tmp_path / "started.err").read_text()
    assert said.count("with the default signing secret") == 1, said
