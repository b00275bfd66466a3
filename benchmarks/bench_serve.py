"""How close is ``verdict-mock`` to the floor? Requests/s under the same wrk load, one run.

Run: ``python benchmarks/bench_serve.py`` (about 3 minutes; needs ``wrk`` on PATH, e.g.
``apt-get install wrk``, and granian:
``pip install -e '.[test,bench]' --config-settings editable_mode=strict``).

Every row is loaded by ``wrk -t2 -c32`` (keep-alive) for ``--seconds``; the rows take turns for
``--rounds`` rounds and each shows its median. The floor is a bare WSGI app answering every
request with the bytes and headers of the mock's verdict, under granian (1 worker, 1 blocking
thread). ``verdict-mock`` (its default server, asyncserver.py) serves ``/e`` with the journal on
and a rate limit no run can exhaust; the 429 row uses a second mock whose budget is 1 per hour.
wrk cannot load ``HEAD`` (it waits for a body), so there is no HEAD row: HEAD takes the same
path as GET.
Then latency at a fixed rate: half the floor's median throughput, spread over the same 32
connections (wrk's Lua ``delay()`` paces each connection, in whole milliseconds dithered to the
wait wanted; the achieved rate is shown), p50 and p99 for the floor and each 200 path of
``/e``, side by side.
``--quick`` measures only the floor and the 200 paths of ``/e`` (the rows a change to the hot
path moves), in about a third of the time.
Before the load, the mock's answer is checked byte for byte against the Flask app's own answer
to the same request. The next row serves the same app under granian, to show what the server
alone costs.

The last rows keep the state in Redis (``--state``; a ``redis-server`` of its own on a free
port, skipped where none is installed): one process, then ``--workers 2`` on one port. Each
request to ``/e`` then makes two round trips to Redis (its reads and count, then its journal
entry), each shared with the requests of the same turn of the loop; the report says what that
costs per request against the one process in memory.
Then CPU per ``GET /e``: the CPU time (user and system, from ``/proc``) the mock's processes
and ``redis-server`` spent over one more wrk run of each ``/e`` row of the memory mock and the
Redis ones, divided by the requests answered; a ratio to memory that the load of the machine
moves far less than a rate. ``--cpu`` measures only that (the memory and Redis rows).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
from flask import Flask

from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.settings import DEFAULT_API_KEY

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

HOST = "127.0.0.1"
KNOWN = "demo-contradicted"
AUTH = f"Authorization: Bearer {DEFAULT_API_KEY}"
AUTH_HEADERS = {"Authorization": f"Bearer {DEFAULT_API_KEY}"}
HERE = Path(__file__).resolve().parent


def _verdict_answer() -> tuple[bytes, list[tuple[str, str]]]:
    """The body and headers of the mock's answer for the known session (Flask's own)."""
    response = create_app().test_client().get(f"/e?n={KNOWN}", headers=AUTH_HEADERS)
    assert response.status_code == 200
    return response.get_data(), [(k, v) for k, v in response.headers.items()]


_BODY, _HEADERS = _verdict_answer()
REPLAYED, STANDING, ANY_ID = "replayed", "standing", "contradicted-any-id"
SCENARIO = {
    "sessions": {
        REPLAYED: {"recorded": {"status": 200, "body": _BODY.decode()}},
        STANDING: {
            "verdict": "contradicted",
            "always": {"status": 200, "headers": {"X-Bench": "1"}},
        },
    }
}
"""The other 200 paths of ``/e``: a session replayed from a recording, one whose script answers
200 every time (with a header of its own), and any id at all (``--accept-any-session``)."""


def bare_app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
    """The floor: the verdict's bytes and headers, with no work done to produce them."""
    start_response("200 OK", list(_HEADERS))
    return [_BODY]


def mock_app() -> Flask:
    """The mock app as ``verdict-mock`` builds it, for granian (``--factory``)."""
    return create_app(Settings().with_env(os.environ))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def started(
    command: list[str], port: int, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run a server until the block ends; wait until it accepts connections."""
    proc = subprocess.Popen(
        command, cwd=HERE, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection((HOST, port), 0.2):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"did not start: {' '.join(command)}")
            time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def granian(target: str, port: int) -> list[str]:
    return [
        *(sys.executable, "-m", "granian", "--interface", "wsgi", "--workers", "1"),
        *("--blocking-threads", "1", "--host", HOST, "--port", str(port)),
        *("--log-level", "warning", target),
    ]


def mock(port: int, *flags: str) -> list[str]:
    command = [sys.executable, "-m", "verdict_contract.mockserver", "--host", HOST]
    return [*command, "--port", str(port), "--log-level", "warning", *flags]


@dataclass
class Row:
    name: str
    port: int
    path: str
    headers: tuple[str, ...] = (AUTH,)
    method: str = "GET"
    expect_2xx: bool = True
    rates: list[float] | None = None
    non_2xx: int = 0


CONNECTIONS = 32


def _run_wrk(row: Row, seconds: float, script: str | None, lua_dir: Path) -> str:
    command = ["wrk", "-t2", f"-c{CONNECTIONS}", f"-d{seconds:g}s", "--latency"]
    for header in row.headers:
        command += ["-H", header]
    lua = f'wrk.method = "{row.method}"\n' if row.method != "GET" else ""
    if script:
        lua += script
    if lua:
        path = lua_dir / f"{abs(hash(lua))}.lua"
        path.write_text(lua)
        command += ["-s", str(path)]
    return subprocess.run(
        [*command, f"http://{HOST}:{row.port}{row.path}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 30,
    ).stdout


def wrk(row: Row, seconds: float, lua_dir: Path) -> tuple[float, int]:
    """One wrk run: requests/s, and how many answers were not 2xx (or connections failed)."""
    out = _run_wrk(row, seconds, None, lua_dir)
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    bad = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses: (\d+)", out))
    bad += sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
    return rate, bad


def _ms(text: str) -> float:
    """wrk's latency (``812.00us``, ``1.20ms``, ``2.00s``, ``1.01m``) in ms; NaN if unreadable."""
    found = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text)
    if found is None:
        return math.nan
    number, unit = found.groups()
    return float(number) * {"us": 0.001, "ms": 1.0, "s": 1e3, "m": 6e4, "h": 3.6e6}[unit]


def _pace(mean_ms: float) -> str:
    """wrk's ``delay()`` in whole milliseconds, dithered so that its mean is ``mean_ms``."""
    whole = math.floor(mean_ms)
    odds = mean_ms - whole
    return (
        f"function delay()\n  if math.random() < {odds:.4f} then return {whole + 1} end\n"
        f"  return {whole}\nend\n"
    )


def _paced_run(row: Row, mean_ms: float, seconds: float, lua_dir: Path) -> str:
    return _run_wrk(row, seconds, _pace(mean_ms), lua_dir)


def _achieved(out: str) -> float:
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]


def paced(row: Row, rate: float, seconds: float, lua_dir: Path) -> tuple[float, float, float]:
    """wrk at about ``rate`` requests/s: the achieved rate, p50 and p99 latency (ms).

    Each connection waits a while before its next request; wrk takes that wait in whole
    milliseconds, so it is dithered between two of them. A connection sends its next request
    only once answered (wrk is closed-loop), and its timers are coarse, so the rate is far from
    linear in the wait: the wait is found by bisection, in runs of a second (the rate falls as
    the wait grows), and the closest is kept.
    """
    low, high = 0.0, 2000 * CONNECTIONS / rate  # waits (ms): twice the period is too slow
    best = (math.inf, high)
    for _ in range(6):
        wait_ms = (low + high) / 2
        trial = _achieved(_paced_run(row, wait_ms, 1.0, lua_dir))
        best = min(best, (abs(trial - rate), wait_ms))
        if abs(trial - rate) <= 0.03 * rate:
            break
        low, high = (wait_ms, high) if trial > rate else (low, wait_ms)
    out = _paced_run(row, best[1], seconds, lua_dir)
    return _achieved(out), _percentile(out, 50), _percentile(out, 99)


def _percentile(out: str, percent: int) -> float:
    """A line of wrk's latency distribution (``     99%    1.47ms``), in ms; other lines may
    end in a percentage too (``Latency ... 80.50%``)."""
    found = re.search(rf"^\s*{percent}%\s+(\S+)\s*$", out, re.MULTILINE)
    return math.nan if found is None else _ms(found.group(1))


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> list[str] | None:
    """``/proc/PID/stat`` after the command's name (which may hold spaces), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants alive now (``--workers``: the parent and its workers)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            parents[int(entry.name)] = int(fields[1])
    found = [pid]
    for child, parent in sorted(parents.items()):
        if parent in found:
            found.append(child)
    return found


def cpu_seconds(pids: Iterable[int]) -> float:
    """User and system CPU time the processes ``pids`` have spent, in seconds."""
    total = 0
    for pid in pids:
        fields = _stat(pid)
        if fields is not None:  # utime and stime: the 14th and 15th fields of stat
            total += int(fields[11]) + int(fields[12])
    return total / _TICK


def requests_of(out: str) -> int:
    """The requests wrk completed (``79164 requests in 2.00s``)."""
    return int(re.search(r"^\s*(\d+) requests in ", out, re.MULTILINE).group(1))  # type: ignore[union-attr]


@dataclass
class CPU:
    """One row's CPU per request (us) in the mock's processes and in redis-server."""

    row: Row
    requests: int = 0
    mock_us: float = math.nan
    redis_us: float = 0.0


def measure_cpu(cpu: CPU, mock_pid: int, redis_pid: int | None, seconds: float, lua: Path) -> None:
    """One wrk run of ``cpu.row``, and the CPU the mock and redis-server spent on it."""
    mock_pids = tree(mock_pid)
    redis_pids = [redis_pid] if redis_pid is not None else []
    before = cpu_seconds(mock_pids), cpu_seconds(redis_pids)
    out = _run_wrk(cpu.row, seconds, None, lua)
    after = cpu_seconds(mock_pids), cpu_seconds(redis_pids)
    cpu.requests = requests_of(out)
    cpu.mock_us = (after[0] - before[0]) / cpu.requests * 1e6
    cpu.redis_us = (after[1] - before[1]) / cpu.requests * 1e6


def check_bytes(port: int, n: str = KNOWN, settings: Settings | None = None) -> None:
    """The mock's answer over HTTP is the Flask app's (with the same settings), byte for byte."""
    response = httpx.get(f"http://{HOST}:{port}/e", params={"n": n}, headers=AUTH_HEADERS)
    own = create_app(settings or Settings()).test_client().get(f"/e?n={n}", headers=AUTH_HEADERS)
    if response.status_code != 200 or response.content != own.get_data():
        sys.exit(f"the served answer for {n} differs from the app's own")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="per wrk run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--quick", action="store_true", help="only the floor and the 200 paths of /e"
    )
    parser.add_argument("--cpu", action="store_true", help="only CPU per GET /e: memory, Redis")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not on PATH (apt-get install wrk)")
    floor, fast, on_granian, limited = (free_port() for _ in range(4))
    staged = free_port()
    minted = create_app(Settings()).test_client().post("/_mock/sessions", json={}).get_json()["n"]
    rows = [
        Row("floor: bare WSGI app, granian 1 worker", floor, "/"),
        Row("verdict-mock: GET /e, demo session", fast, f"/e?n={KNOWN}"),
        Row("verdict-mock: GET /e, minted session", fast, f"/e?n={minted}"),
        Row("verdict-mock: GET /e, replayed (recorded)", staged, f"/e?n={REPLAYED}"),
        Row("verdict-mock: GET /e, standing 200 (always)", staged, f"/e?n={STANDING}"),
        Row("verdict-mock: GET /e, any id (--accept-any-…)", staged, f"/e?n={ANY_ID}"),
        Row("verdict-mock: 401 (no key)", fast, f"/e?n={KNOWN}", (), expect_2xx=False),
        Row("verdict-mock: 400 (no n)", fast, "/e", expect_2xx=False),
        Row("verdict-mock: 404 (unknown id)", fast, "/e?n=unknown", expect_2xx=False),
        Row("verdict-mock: 405 (POST /e)", fast, f"/e?n={KNOWN}", method="POST", expect_2xx=False),
        Row("verdict-mock: 429 (rate limited)", limited, f"/e?n={KNOWN}", expect_2xx=False),
        Row("the mock app under granian 1 worker: GET /e", on_granian, f"/e?n={KNOWN}"),
    ]
    served = 6  # the rows above: the floor and every 200 path of /e
    if args.quick:
        del rows[served:]
    redis_server = None if args.quick and not args.cpu else shutil.which("redis-server")
    on_redis, on_workers, redis_port = free_port(), free_port(), free_port()
    if redis_server is not None:
        rows += [
            Row("verdict-mock --state redis: GET /e, 1 process", on_redis, f"/e?n={KNOWN}"),
            Row("verdict-mock --state redis --workers 2: GET /e", on_workers, f"/e?n={KNOWN}"),
        ]
    elif not args.quick:
        print("no redis-server on PATH: the --state rows are left out", file=sys.stderr)
    budget = "--rate-limit=1000000000/3600"
    env = {"VERDICT_MOCK_RATE_LIMIT": "1000000000/3600", "VERDICT_MOCK_LOG_LEVEL": "warning"}
    cpus = [CPU(rows[1]), *(CPU(row) for row in rows if "--state" in row.name)]
    pids: dict[int, int] = {}  # the port's server process
    redis_pid = None
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as lua:
        if not args.cpu:  # the floor: granian, of the [bench] extra
            stack.enter_context(started(granian("bench_serve:bare_app", floor), floor))
        pids[fast] = stack.enter_context(started(mock(fast, budget), fast)).pid
        # its own directory, removed after the mock that watches it stops (the stack is LIFO)
        scenario = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "scenario.yaml"
        scenario.write_text(json.dumps(SCENARIO))  # JSON is YAML
        staging = mock(staged, budget, f"--scenario={scenario}", "--accept-any-session")
        stack.enter_context(started(staging, staged))
        if not (args.quick or args.cpu):
            stack.enter_context(started(mock(limited, "--rate-limit=1/3600"), limited))
            app = [*granian("bench_serve:mock_app", on_granian), "--factory"]
            stack.enter_context(started(app, on_granian, env))
        if redis_server is not None:
            flags = ["--port", str(redis_port), "--bind", HOST, "--save", "", "--appendonly", "no"]
            redis_pid = stack.enter_context(started([redis_server, *flags], redis_port)).pid
            url = f"redis://{HOST}:{redis_port}/0"
            shared = mock(on_redis, budget, f"--state={url}", "--secret=bench-1")
            pids[on_redis] = stack.enter_context(started(shared, on_redis)).pid
            workers = mock(on_workers, budget, f"--state={url}", "--secret=bench-2", "--workers=2")
            pids[on_workers] = stack.enter_context(started(workers, on_workers)).pid
            check_bytes(on_redis)
            check_bytes(on_workers)
        check_bytes(fast)
        staged_settings = Settings(scenario=scenario, accept_any_session=True)
        for n in (REPLAYED, STANDING, ANY_ID):
            check_bytes(staged, n, staged_settings)
        if not (
            args.quick or args.cpu
        ):  # the limited mock's one request: every row's request is a 429
            httpx.get(f"http://{HOST}:{limited}/e", params={"n": KNOWN}, headers=AUTH_HEADERS)
        for cpu in cpus:
            measure_cpu(cpu, pids[cpu.row.port], redis_pid, args.seconds, Path(lua))
        if args.cpu:
            report_cpu(cpus)
            return
        for round_ in range(args.rounds):
            for row in rows:
                rate, bad = wrk(row, args.seconds, Path(lua))
                row.rates = [*(row.rates or []), rate]
                row.non_2xx += bad
            print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)
        rate = statistics.median(rows[0].rates or [0.0]) / 2
        latencies = [(row, paced(row, rate, args.seconds, Path(lua))) for row in rows[:served]]
    report(rows, args)
    report_latency(latencies, rate, args)
    report_cpu(cpus)


def report_cpu(cpus: list[CPU]) -> None:
    memory = cpus[0].mock_us + cpus[0].redis_us
    print()
    print(
        "CPU per GET /e (user + system, /proc): the mock's processes and redis-server, one wrk run"
    )
    print(f"| {'what':45} | requests | mock us | redis us | total us | / memory |")
    print(f"|{'-' * 47}|---------:|--------:|---------:|---------:|---------:|")
    for cpu in cpus:
        total = cpu.mock_us + cpu.redis_us
        print(
            f"| {cpu.row.name:45} | {cpu.requests:8} | {cpu.mock_us:7.1f} | {cpu.redis_us:8.1f} "
            f"| {total:8.1f} | {total / memory:8.2f} |"
        )


def report(rows: list[Row], args: argparse.Namespace) -> None:
    medians = [statistics.median(row.rates or [0.0]) for row in rows]
    e_rate = medians[1]
    print(
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}: wrk -t2 -c32, {args.seconds:g} s x "
        f"{args.rounds} rounds (median)"
    )
    print(f"| {'what':45} | req/s | / floor | / GET /e | non-2xx |")
    print(f"|{'-' * 47}|------:|--------:|---------:|--------:|")
    for row, median in zip(rows, medians, strict=True):
        bad = str(row.non_2xx) if row.expect_2xx else "(all)"
        print(
            f"| {row.name:45} | {median / 1000:4.1f}k | {median / medians[0]:7.2f} "
            f"| {median / e_rate:8.2f} | {bad:>7} |"
        )
    shared = [median for row, median in zip(rows, medians, strict=True) if "--state" in row.name]
    if shared and shared[0]:
        cost = (1 / shared[0] - 1 / e_rate) * 1e6
        print(
            f"The round trip to Redis: {cost:.1f} us more per request than in memory, one process "
            f"(1/{shared[0] / 1000:.1f}k - 1/{e_rate / 1000:.1f}k, at 32 connections)"
        )


def report_latency(
    latencies: list[tuple[Row, tuple[float, float, float]]], rate: float, args: argparse.Namespace
) -> None:
    floor_p99 = latencies[0][1][2]
    print()
    print(
        f"Latency at a fixed rate of {rate / 1000:.1f}k req/s (half the floor's), "
        f"wrk -c{CONNECTIONS} paced, {args.seconds:g} s"
    )
    print(f"| {'what':45} | achieved | p50 ms | p99 ms | p99 / floor's |")
    print(f"|{'-' * 47}|---------:|-------:|-------:|--------------:|")
    for row, (achieved, p50, p99) in latencies:
        print(
            f"| {row.name:45} | {achieved / 1000:7.1f}k | {p50:6.2f} | {p99:6.2f} "
            f"| {p99 / floor_p99:13.2f} |"
        )


if __name__ == "__main__":
    main()
