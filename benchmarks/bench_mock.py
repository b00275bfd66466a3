"""Mock server load: requests/s and latency of ``GET /e`` under waitress, against a bare floor.

Run: ``python benchmarks/bench_mock.py`` (about 25 s on 2 cores; ``--seconds 20`` for steadier
numbers). Long memory check, a million requests to the mock alone (RSS should stay flat,
since the journal, the limiter and the render cache are bounded)::

    python benchmarks/bench_mock.py --mock-only --requests 1000000 --seconds 3600

The floor is a bare WSGI app that answers every request with the same bytes a verdict takes
(body and headers), served by waitress exactly as the mock is (``BackgroundServer``: same
threads, 127.0.0.1, an ephemeral port). The mock then answers ``/e?n=demo-contradicted``
with the default key and a rate limit no run reaches (``--minted N`` mixes in N minted ids).

Each server runs in its own process, and so does each load generator: one GIL per process,
so the client's Python does not slow the server's. The client keeps every connection alive
and sends one request at a time on it (no pipelining), so latency is per request. Every
status is counted: numbers measured on anything but 200s would mean nothing, so the run
fails if any request got another status or a connection error.

``--server gunicorn`` serves both apps with gunicorn instead (not a dependency of the project:
``pip install gunicorn``): ``python -m gunicorn`` in a child process, ``--workers 2
--worker-class gthread --threads 4`` unless ``--workers``, ``--worker-class`` and ``--threads``
say otherwise (``--gunicorn-option`` passes anything else), on a socket the benchmark binds to
127.0.0.1 with an ephemeral port and hands over (``--bind fd://N``). Each worker builds its app
with :func:`gunicorn_app` (``bench_mock:gunicorn_app()``): the mock from the VERDICT_MOCK_*
variables ``Settings().with_env`` reads, so it gets exactly the settings above. Server CPU and
RSS are then the sums over the gunicorn master and its workers (RSS counts the pages the
processes share once per process). Mind that the mock's rate limiter, journal and scripts are
per process (mockserver/state.py): under N workers a key gets N budgets, each worker journals
only what it answered, and a script plays once per worker.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import http.client
import importlib.metadata
import importlib.util
import json
import logging
import math
import multiprocessing
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnContext
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast
from urllib.parse import quote, urlsplit

from flask import Flask
from verdict_contract.mockserver.app import create_app
from verdict_contract.mockserver.explain import VERDICT_CACHE_CONTROL
from verdict_contract.mockserver.ratelimit import RateLimit
from verdict_contract.mockserver.serve import BackgroundServer
from verdict_contract.mockserver.sessions import SessionSpec
from verdict_contract.mockserver.settings import DEFAULT_API_KEY, ENV_PREFIX, Settings
from verdict_contract.mockserver.state import MockState

from verdict_contract import validate_verdict
from verdict_contract.core.spec import VERDICTS

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

TARGET_RATIO = 0.60
"""The mock should serve at least this share of the bare floor's requests per second."""

DEMO_ID = "demo-contradicted"
HOST = "127.0.0.1"
PROGRESS_BATCH = 100  # requests a thread counts before touching the shared counter (a lock)
MAX_CONSECUTIVE_ERRORS = 50  # a dead server should end the run, not spin on reconnects


# --- servers (child processes) -------------------------------------------------------------


class BareApp:
    """The floor: the bytes of a verdict answer, with no work done to produce them."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        # The mock's headers too, so both send the same bytes and only the app's work differs.
        self.headers = [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("Cache-Control", VERDICT_CACHE_CONTROL),
            ("Vary", "Authorization"),
        ]

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        start_response("200 OK", list(self.headers))
        return [self.body]


def serve(kind: str, settings: Settings, body: bytes, control: Connection) -> None:
    """Child process: serve ``kind`` until the parent says stop (or goes away)."""
    # Under saturation waitress warns of its queue depth on every burst; that is the point here.
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    app = create_app(settings) if kind == "mock" else BareApp(body)
    # BackgroundServer only hands the app to waitress; going through it keeps the waitress
    # arguments the mock ships with identical for both servers.
    server = BackgroundServer(cast(Flask, app), host=HOST, port=0, threads=settings.threads)
    server.start()
    control.send(urlsplit(server.base_url).port)
    with contextlib.suppress(EOFError):  # EOF: the parent went away; stop all the same
        control.recv()
    server.stop()


@dataclass
class Served:
    """A running server, as the parent sees it."""

    port: int
    pids: list[int]  # the processes whose CPU time and RSS are the server's
    names: list[str]  # one per pid
    memory_what: str  # what the RSS figures are, for the report


@contextlib.contextmanager
def waitress_server(
    ctx: SpawnContext, kind: str, settings: Settings, body: bytes
) -> Iterator[Served]:
    """``kind`` served by waitress in a child process (:func:`serve`), until the block ends."""
    parent, child = ctx.Pipe()
    server = ctx.Process(
        target=serve, args=(kind, settings, body, child), name=f"bench-{kind}", daemon=True
    )
    server.start()
    assert server.pid is not None
    try:
        if not parent.poll(60):
            sys.exit(f"the {kind} server did not start")
        port: int = parent.recv()
        yield Served(port, [server.pid], ["waitress"], "VmRSS of the waitress process")
    finally:
        with contextlib.suppress(OSError):  # the server may be gone already
            parent.send("stop")
        server.join(timeout=10)
        if server.is_alive():
            server.terminate()


# --- gunicorn (optional): a `python -m gunicorn` child process ----------------------------

BENCH_ENV = "BENCH_MOCK_"
"""Prefix of the variables :func:`gunicorn_app` reads besides the mock's VERDICT_MOCK_*."""

GUNICORN_STOP_SECONDS = 15.0  # after SIGTERM (a graceful stop), then SIGKILL


@dataclass(frozen=True)
class GunicornOptions:
    workers: int = 2
    worker_class: str = "gthread"
    threads: int = 4  # per worker; the sync worker class has one
    extra: tuple[str, ...] = ()  # any other gunicorn arguments, as given

    def describe(self) -> str:
        threads = f" --threads {self.threads}" if self.worker_class == "gthread" else ""
        extra = "".join(f" {arg}" for arg in self.extra)
        return (
            f"gunicorn --workers {self.workers} --worker-class {self.worker_class}{threads}{extra}"
        )


def gunicorn_app() -> WSGIApplication:
    """What each gunicorn worker serves: ``bench_mock:gunicorn_app()``, set up by the parent.

    The mock takes its settings as ``verdict-mock`` does, from VERDICT_MOCK_* variables; the
    bare app takes the verdict bytes from BENCH_MOCK_BODY. The worker then leaves a file named
    by its pid in BENCH_MOCK_READY: the parent starts the load once every worker has one.
    """
    environ = os.environ
    app: WSGIApplication
    if environ[BENCH_ENV + "KIND"] == "mock":
        app = create_app(Settings().with_env(environ))
    else:
        app = BareApp(base64.b64decode(environ[BENCH_ENV + "BODY"]))
    Path(environ[BENCH_ENV + "READY"], str(os.getpid())).touch()
    return app


def settings_env(settings: Settings) -> dict[str, str]:
    """``settings`` as the VERDICT_MOCK_* variables that ``Settings().with_env`` reads back."""
    env: dict[str, str] = {}
    for setting in fields(settings):
        value = getattr(settings, setting.name)
        if value is None:
            continue  # unset: the default (None) applies
        if isinstance(value, bool):
            text = "1" if value else "0"
        elif isinstance(value, tuple):
            text = ",".join(value)
        elif isinstance(value, RateLimit):
            text = f"{value.budget}/{value.window!r}"  # str() would round the window
        elif isinstance(value, float):
            text = repr(value)
        else:
            text = str(value)
        env[ENV_PREFIX + setting.name.upper()] = text
    if Settings().with_env(env) != settings:
        raise ValueError(f"these settings do not survive VERDICT_MOCK_* variables: {settings}")
    return env


def gunicorn_version() -> tuple[int, ...] | None:
    """The installed gunicorn's version, or None if this Python has no gunicorn."""
    if importlib.util.find_spec("gunicorn") is None:
        return None
    try:
        version = importlib.metadata.version("gunicorn")
    except importlib.metadata.PackageNotFoundError:
        return (0,)
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def parent_pid(pid: int) -> int | None:
    """The parent of a process (Linux /proc); None if it is gone or /proc is not there."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return int(stat.read().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def log_lines(path: Path, *, problems_only: bool = False, last: int = 20) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    if problems_only:
        lines = [line for line in lines if re.search(r"\[(WARNING|ERROR|CRITICAL)\]", line)]
    return "\n".join(f"  gunicorn: {line}" for line in lines[-last:])


@contextlib.contextmanager
def gunicorn_server(
    kind: str, settings: Settings, body: bytes, options: GunicornOptions
) -> Iterator[Served]:
    """``kind`` served by gunicorn (a ``python -m gunicorn`` child process) until the block ends.

    The socket is bound here (127.0.0.1, an ephemeral port) and handed over, so the port is
    known without a race and nothing but loopback is ever listened on.
    """
    version = gunicorn_version()
    if version is None:
        sys.exit("gunicorn is not installed in this Python: pip install gunicorn")
    here = Path(__file__).resolve()
    with contextlib.ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-gunicorn-")))
        ready = scratch / "ready"
        ready.mkdir()
        log_path = scratch / "gunicorn.log"
        listener = stack.enter_context(socket.create_server((HOST, 0), backlog=2048))
        port: int = listener.getsockname()[1]
        env = {
            name: value
            for name, value in os.environ.items()
            # Only the settings here: none inherited, nor GUNICORN_CMD_ARGS (--gunicorn-option).
            if not name.startswith(ENV_PREFIX) and name != "GUNICORN_CMD_ARGS"
        }
        env.update(settings_env(settings))
        env.update(
            {
                BENCH_ENV + "KIND": kind,
                BENCH_ENV + "BODY": base64.b64encode(body).decode(),
                BENCH_ENV + "READY": str(ready),
            }
        )
        command = [
            sys.executable,
            "-m",
            "gunicorn",
            f"--bind=fd://{listener.fileno()}",
            f"--pythonpath={here.parent}",
            f"--workers={options.workers}",
            f"--worker-class={options.worker_class}",
            f"--threads={options.threads}",
            "--log-level=info",
            # gunicorn >= 25.1 opens a control socket under $XDG_RUNTIME_DIR or ~/.gunicorn.
            *(["--no-control-socket"] if version >= (25, 1) else []),
            *options.extra,
            f"{here.stem}:gunicorn_app()",
        ]
        with open(log_path, "wb") as log:
            master = subprocess.Popen(  # the cwd is empty: no gunicorn.conf.py is picked up
                command,
                cwd=scratch,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(listener.fileno(),),
            )
        listener.close()  # gunicorn has its own copy
        workers: list[int] = []
        try:
            workers = wait_for_workers(master, ready, options.workers, log_path)
            yield Served(
                port,
                [master.pid, *workers],
                ["master", *(f"worker {i + 1}" for i in range(len(workers)))],
                f"sum of VmRSS of the gunicorn master and its {len(workers)} workers",
            )
        finally:
            stop_gunicorn(master, workers)
            booted = {int(marker.name) for marker in ready.iterdir()}
            if workers and booted - set(workers):
                print(f"WARNING: gunicorn booted {len(booted - set(workers))} more worker(s)")
            problems = log_lines(log_path, problems_only=True)
            if problems:
                print(problems)


def wait_for_workers(
    master: subprocess.Popen[bytes], ready: Path, count: int, log_path: Path, timeout: float = 60
) -> list[int]:
    """The pids of the master's workers, once ``count`` of them have their app loaded."""
    procfs = os.path.isdir("/proc/self")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if master.poll() is not None:
            sys.exit(f"gunicorn exited with status {master.returncode}:\n{log_lines(log_path)}")
        booted = sorted(int(marker.name) for marker in ready.iterdir())
        workers = [pid for pid in booted if not procfs or parent_pid(pid) == master.pid]
        if len(workers) >= count:
            return workers
        time.sleep(0.05)
    sys.exit(f"gunicorn did not load {count} worker(s) in {timeout:g} s:\n{log_lines(log_path)}")


def stop_gunicorn(master: subprocess.Popen[bytes], workers: Sequence[int]) -> None:
    """Stop the master (its workers with it); then end any of ``workers`` that outlived it."""
    if master.poll() is None:
        master.send_signal(signal.SIGTERM)  # graceful: workers finish their requests
        try:
            master.wait(timeout=GUNICORN_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            master.kill()
            master.wait(timeout=10)
    # A worker whose master is gone exits within a second or so by itself; wait for that,
    # then end it if it is still there (and still a gunicorn worker: pids are reused).
    deadline = time.monotonic() + 5
    for pid in workers:
        while parent_pid(pid) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if b"gunicorn" in cmdline.read():
                    os.kill(pid, signal.SIGKILL)
        except OSError:
            pass  # gone (or no /proc)


# --- load generator (child processes) ------------------------------------------------------


class Client(Protocol):
    def get(self, target: str) -> int: ...

    def close(self) -> None: ...


class RawClient:
    """HTTP/1.1 keep-alive over a bare socket: parses just enough to frame each answer.

    http.client spends more CPU per request than a bare WSGI app does; this keeps the client
    from becoming the floor. ``--client http.client`` cross-checks it.
    """

    def __init__(self, port: int, key: str) -> None:
        self.port = port
        self.prefix = f"Host: {HOST}:{port}\r\nAuthorization: Bearer {key}\r\n\r\n".encode()
        self.wire: dict[str, bytes] = {}
        self.sock: socket.socket | None = None
        self.buf = bytearray()
        self.connect()

    def connect(self) -> None:
        self.close()
        self.sock = socket.create_connection((HOST, self.port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock = None
        self.buf.clear()

    def _fill(self) -> None:
        assert self.sock is not None
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buf += chunk

    def get(self, target: str) -> int:
        request = self.wire.get(target)
        if request is None:
            request = self.wire[target] = f"GET {target} HTTP/1.1\r\n".encode() + self.prefix
        if self.sock is None:
            self.connect()
        assert self.sock is not None
        self.sock.sendall(request)
        buf = self.buf
        while (end := buf.find(b"\r\n\r\n")) < 0:
            self._fill()
        head = bytes(buf[:end]).lower()
        status = int(head[9:12])
        at = head.find(b"\r\ncontent-length:")
        if at < 0:  # waitress frames a bytes body with Content-Length; anything else is a bug
            raise ConnectionError(f"no Content-Length in {head[:200]!r}")
        stop = head.find(b"\r\n", at + 2)
        length = int(head[at + 17 : stop if stop >= 0 else None])
        total = end + 4 + length
        while len(buf) < total:
            self._fill()
        del buf[:total]
        if b"\r\nconnection: close" in head:
            self.close()
        return status


class StdlibClient:
    """The same with http.client: slower, but an independent parser."""

    def __init__(self, port: int, key: str) -> None:
        self.conn = http.client.HTTPConnection(HOST, port, timeout=30)
        self.headers = {"Authorization": f"Bearer {key}"}
        self.conn.connect()

    def get(self, target: str) -> int:
        self.conn.request("GET", target, headers=self.headers)
        response = self.conn.getresponse()
        response.read()
        return response.status

    def close(self) -> None:
        self.conn.close()


CLIENTS: dict[str, type[RawClient] | type[StdlibClient]] = {
    "raw": RawClient,
    "http.client": StdlibClient,
}


@dataclass(frozen=True)
class LoadPlan:
    port: int
    key: str
    targets: tuple[str, ...]
    connections: int  # in this process
    requests: int  # in this process, spread over its connections
    seconds: float
    client: str


@dataclass
class Tally:
    """What one load process measured."""

    latencies: array[float] = field(default_factory=lambda: array("d"))
    statuses: Counter[int] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    elapsed: float = 0.0
    cpu: float = 0.0

    def add(self, other: Tally) -> None:
        self.latencies.extend(other.latencies)
        self.statuses.update(other.statuses)
        self.errors.update(other.errors)
        self.elapsed = max(self.elapsed, other.elapsed)
        self.cpu += other.cpu


def drive(
    client: Client,
    targets: Sequence[str],
    count: int,
    deadline: float,
    progress: Synchronized[int],
    tally: Tally,
) -> None:
    """One connection's loop: ``count`` requests or until ``deadline``, whichever comes first."""
    latencies, statuses, clock = tally.latencies, tally.statuses, time.perf_counter
    failures = 0
    done = 0
    for i in range(count):
        begin = clock()
        if begin >= deadline:
            break
        try:
            status = client.get(targets[i % len(targets)])
        except (OSError, ValueError, http.client.HTTPException) as exc:
            tally.errors[type(exc).__name__] += 1
            failures += 1
            client.close()  # the next request reconnects (RawClient) or http.client does
            if failures >= MAX_CONSECUTIVE_ERRORS:
                break
            continue
        latencies.append(clock() - begin)
        statuses[status] += 1
        failures = 0
        done += 1
        if done == PROGRESS_BATCH:
            with progress.get_lock():
                progress.value += done
            done = 0
    with progress.get_lock():
        progress.value += done


def generate_load(
    plan: LoadPlan, start: Barrier, progress: Synchronized[int], results: queue.Queue[Tally]
) -> None:
    """Child process: open the connections, wait for the others, then run one thread each."""
    factory = CLIENTS[plan.client]
    clients = [factory(plan.port, plan.key) for _ in range(plan.connections)]
    shares = [plan.requests // plan.connections] * plan.connections
    for i in range(plan.requests % plan.connections):
        shares[i] += 1
    tallies = [Tally() for _ in clients]
    start.wait()
    began, cpu = time.perf_counter(), time.process_time()
    deadline = began + plan.seconds
    threads = [
        threading.Thread(
            target=drive, args=(c, plan.targets, n, deadline, progress, t), daemon=True
        )
        for c, n, t in zip(clients, shares, tallies, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = Tally(elapsed=time.perf_counter() - began, cpu=time.process_time() - cpu)
    for tally, client in zip(tallies, clients, strict=True):
        total.add(tally)
        client.close()
    results.put(total)


# --- the parent: orchestration and report ---------------------------------------------------


def rss_kib(pid: int) -> int | None:
    """Resident set size of a process (Linux /proc); None where that is not available."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time a process has used (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_total(pids: Sequence[int]) -> int | None:
    """The summed RSS of processes, in KiB; None if any of them is unavailable."""
    sizes = [rss_kib(pid) for pid in pids]
    return None if None in sizes else sum(size or 0 for size in sizes)


def cpu_each(pids: Sequence[int]) -> list[float] | None:
    """The CPU seconds of each process; None if any of them is unavailable."""
    times = [cpu_seconds(pid) for pid in pids]
    return None if None in times else [t or 0.0 for t in times]


@dataclass
class Run:
    name: str
    tally: Tally
    requests: int
    server_cpu: float | None  # all the server's processes
    memory: list[tuple[float, int, int | None]]  # (seconds into the load, requests, RSS KiB)
    processes: list[str] = field(default_factory=lambda: ["server"])
    process_cpu: list[float] | None = None  # one per process, in the order of ``processes``
    process_rss: list[int | None] = field(default_factory=list)  # KiB, at the end of the load
    memory_what: str = "VmRSS"

    @property
    def per_second(self) -> float:
        return self.requests / self.tally.elapsed if self.tally.elapsed else 0.0

    @functools.cached_property
    def _ordered(self) -> list[float]:
        return sorted(self.tally.latencies)

    def percentile(self, p: float) -> float:
        """Latency in seconds below which a share ``p`` of the requests finished."""
        ordered = self._ordered
        return ordered[min(len(ordered) - 1, int(len(ordered) * p))] if ordered else math.nan

    @property
    def non_200(self) -> int:
        return sum(n for status, n in self.tally.statuses.items() if status != 200)


def check(port: int, key: str, targets: Sequence[str], warm: int) -> None:
    """Every target answers 200 with a valid verdict before any load; then warm caches."""
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    headers = {"Authorization": f"Bearer {key}"}
    for i in range(max(warm, len(targets))):
        target = targets[i % len(targets)]
        conn.request("GET", target, headers=headers)
        response = conn.getresponse()
        body = response.read()
        if i >= len(targets):
            continue
        kind = response.getheader("Content-Type")
        if response.status != 200 or kind != "application/json":
            sys.exit(f"GET {target}: {response.status} {kind}, not 200 application/json: {body!r}")
        problems = validate_verdict(json.loads(body))
        if problems:
            sys.exit(f"GET {target}: the body is not a valid verdict: {problems}")
    conn.close()


def measure(
    ctx: SpawnContext,
    name: str,
    kind: str,
    settings: Settings,
    body: bytes,
    targets: Sequence[str],
    args: argparse.Namespace,
) -> Run:
    server = (
        gunicorn_server(kind, settings, body, gunicorn_options(args))
        if args.server == "gunicorn"
        else waitress_server(ctx, kind, settings, body)
    )
    with server as served:
        pids = served.pids
        memory: list[tuple[float, int, int | None]] = [(0.0, 0, rss_total(pids))]
        check(served.port, DEFAULT_API_KEY, targets, warm=500)
        per_process = split(args.connections, args.processes)
        counts = split(args.requests, args.connections)
        start = ctx.Barrier(len(per_process) + 1)
        progress = cast("Synchronized[int]", ctx.Value("q", 0))
        results: queue.Queue[Tally] = cast("queue.Queue[Tally]", ctx.Queue())
        loaders, first = [], 0
        for connections in per_process:
            plan = LoadPlan(
                port=served.port,
                key=DEFAULT_API_KEY,
                targets=tuple(targets),
                connections=connections,
                requests=sum(counts[first : first + connections]),
                seconds=args.seconds,
                client=args.client,
            )
            first += connections
            loader = ctx.Process(
                target=generate_load, args=(plan, start, progress, results), daemon=True
            )
            loader.start()
            loaders.append(loader)
        start.wait(timeout=60)
        began, cpu_before = time.perf_counter(), cpu_each(pids)
        memory.append((0.0, 0, rss_total(pids)))  # after the warm-up, as the load starts
        total, reported = Tally(), 0
        next_sample = began + args.sample_every
        while reported < len(loaders):
            try:
                total.add(results.get(timeout=max(0.01, next_sample - time.perf_counter())))
                reported += 1
            except queue.Empty:
                if not any(loader.is_alive() for loader in loaders):
                    sys.exit("a load generator died without reporting")
            now = time.perf_counter()
            if now >= next_sample:
                memory.append((now - began, progress.value, rss_total(pids)))
                next_sample += args.sample_every
        cpu_after = cpu_each(pids)
        memory.append((time.perf_counter() - began, progress.value, rss_total(pids)))
        rss_end = [rss_kib(pid) for pid in pids]
        for loader in loaders:
            loader.join()
    used = (
        None
        if cpu_before is None or cpu_after is None
        else [after - before for before, after in zip(cpu_before, cpu_after, strict=True)]
    )
    return Run(
        name,
        total,
        len(total.latencies),
        None if used is None else sum(used),
        memory,
        served.names,
        used,
        rss_end,
        served.memory_what,
    )


def split(total: int, parts: int) -> list[int]:
    """``total`` in ``parts`` near-equal whole shares."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def report(runs: Sequence[Run]) -> None:
    print(
        f"{'server':32} {'requests':>9} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'non-200':>7} {'errors':>6} {'srv µs/req':>10} {'srv CPU':>7} {'gen CPU':>7}"
    )
    for run in runs:
        elapsed = run.tally.elapsed or math.nan
        cpu = run.server_cpu
        print(
            f"{run.name:32} {run.requests:9,} {run.per_second:8,.0f} "
            f"{run.percentile(0.50) * 1000:7.2f} {run.percentile(0.99) * 1000:7.2f} "
            f"{run.non_200:7,} {sum(run.tally.errors.values()):6,} "
            + (
                f"{cpu / max(run.requests, 1) * 1e6:10.0f} {cpu / elapsed:7.0%} "
                if cpu is not None
                else f"{'n/a':>10} {'n/a':>7} "
            )
            + f"{run.tally.cpu / elapsed:7.0%}"
        )
    if len(runs) == 2:
        bare, mock = runs
        ratio = mock.per_second / bare.per_second if bare.per_second else math.nan
        verdict = "meets" if ratio >= TARGET_RATIO else "MISSES"
        print(
            f"mock / bare: {ratio:.2f}x requests/s "
            f"(target >= {TARGET_RATIO:.2f}x: {verdict}); "
            f"p50 {mock.percentile(0.5) / bare.percentile(0.5):.2f}x, "
            f"p99 {mock.percentile(0.99) / bare.percentile(0.99):.2f}x"
        )
    print("srv CPU and gen CPU: share of one core used by the server and by all load processes")
    for run in runs:
        if len(run.processes) > 1 and run.process_cpu is not None and run.tally.elapsed:
            shares = ", ".join(
                f"{name} {cpu / run.tally.elapsed:.0%}"
                for name, cpu in zip(run.processes, run.process_cpu, strict=True)
            )
            print(f"srv CPU by process, {run.name}: {shares}")
    memory_trend(runs[-1])
    bad = [
        f"{run.name}: statuses {dict(run.tally.statuses)}, errors {dict(run.tally.errors)}"
        for run in runs
        if run.non_200 or run.tally.errors
    ]
    if bad:
        sys.exit("FAILED, the numbers above are not of 200s:\n  " + "\n  ".join(bad))


def memory_trend(run: Run, rows: int = 10) -> None:
    """Print the mock's RSS through the run: flat after the warm-up, or a leak."""
    memory = run.memory
    if memory[0][2] is None:
        print("mock RSS: not available on this platform (reads /proc/<pid>/status)")
        return
    start, warm, *during = memory
    step = max(1, math.ceil(len(during) / rows))
    shown = during[::step]
    if during and shown[-1] is not during[-1]:
        shown.append(during[-1])
    print(f"\nmock server RSS ({run.memory_what}), requests counted from the start of the load:")
    print(f"{'point':24} {'requests':>10} {'RSS MiB':>8}")
    print(f"{'started':24} {0:10,} {(start[2] or 0) / 1024:8.1f}")
    print(f"{'after the warm-up':24} {'':>10} {(warm[2] or 0) / 1024:8.1f}")
    for seconds, requests, kib in shown:
        print(f"{f'{seconds:.1f} s into the load':24} {requests:10,} {(kib or 0) / 1024:8.1f}")
    if len(run.processes) > 1:
        print(
            "RSS by process at the end: "
            + ", ".join(
                f"{name} {(kib or 0) / 1024:.1f} MiB"
                for name, kib in zip(run.processes, run.process_rss, strict=True)
            )
        )
    half = [m for m in memory if m[1] >= run.requests // 2 and m[2] is not None]
    if len(half) >= 2 and half[-1][1] > half[0][1]:
        grown = ((half[-1][2] or 0) - (half[0][2] or 0)) / 1024
        per_100k = grown / (half[-1][1] - half[0][1]) * 100_000
        print(
            f"second half: {grown:+.1f} MiB over {half[-1][1] - half[0][1]:,} requests "
            f"({per_100k:+.2f} MiB per 100k requests)"
        )


def gunicorn_options(args: argparse.Namespace) -> GunicornOptions:
    return GunicornOptions(
        workers=args.workers,
        worker_class=args.worker_class,
        threads=args.threads,
        extra=tuple(args.gunicorn_option),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--seconds", type=float, default=10.0, help="time limit of the load per server")
    add("--requests", type=int, default=1_000_000, help="request limit per server")
    add("--connections", type=int, default=8, help="keep-alive connections, all processes")
    add("--processes", type=int, default=2, help="load generator processes")
    add("--server", choices=("waitress", "gunicorn"), default="waitress", help="WSGI server")
    add(
        "--threads",
        type=int,
        help=f"waitress threads (default {Settings().threads}), or gunicorn threads per worker "
        f"(default {GunicornOptions.threads})",
    )
    add("--workers", type=int, default=GunicornOptions.workers, help="gunicorn workers")
    add(
        "--worker-class",
        choices=("gthread", "sync"),
        default=GunicornOptions.worker_class,
        help="gunicorn worker class",
    )
    add(
        "--gunicorn-option",
        action="append",
        default=[],
        metavar="ARG",
        help="another gunicorn argument, e.g. --gunicorn-option=--keep-alive=5 (repeatable)",
    )
    add("--minted", type=int, default=0, help="minted ids mixed in with demo-contradicted")
    add("--client", choices=sorted(CLIENTS), default="raw", help="HTTP client of the load")
    add("--sample-every", type=float, default=1.0, help="seconds between RSS samples")
    add("--mock-only", action="store_true", help="skip the bare floor (long memory runs)")
    args = parser.parse_args()
    if not 1 <= args.processes <= args.connections or args.requests < args.connections:
        parser.error("need 1 <= --processes <= --connections <= --requests")
    if args.threads is None:
        args.threads = GunicornOptions.threads if args.server == "gunicorn" else Settings().threads
    if args.threads < 1 or args.workers < 1:
        parser.error("need --threads >= 1 and --workers >= 1")
    if args.server == "gunicorn" and gunicorn_version() is None:
        sys.exit(f"gunicorn is not installed for {sys.executable}: pip install gunicorn")

    settings = replace(
        Settings(),
        threads=args.threads,
        # A budget no run reaches: the limiter counts every request, as by default, but never
        # refuses one ("off" would skip its lock and understate the cost of the mock).
        rate_limit=RateLimit(10**12, 60.0),
        demo_sessions=True,
        session_lifetime=30 * 86400.0,  # minted ids must not expire during a long run
    )
    # Minted ids are signed and stateless, so ids minted here serve in the child as well.
    state = MockState(settings)
    minted = [
        state.mint(SessionSpec(verdict=VERDICTS[i % len(VERDICTS)])).id for i in range(args.minted)
    ]
    targets = [f"/e?n={quote(n, safe='')}" for n in [DEMO_ID, *minted]]
    demo = state.lookup(DEMO_ID)
    assert demo is not None
    body = state.generator.render(demo.id, demo.spec)

    per_process = split(args.connections, args.processes)
    server = (
        gunicorn_options(args).describe()
        if args.server == "gunicorn"
        else f"waitress threads={args.threads}"
    )
    print(
        f"{server} on {HOST}, {args.connections} keep-alive connections "
        f"({' + '.join(map(str, per_process))} in {args.processes} processes, {args.client}), "
        f"up to {args.requests:,} requests or {args.seconds:g} s per server; "
        f"verdict body {len(body)} bytes; {len(targets)} id(s); {os.cpu_count()} CPUs"
    )
    ctx = multiprocessing.get_context("spawn")  # clean children: no copy of this process
    runs = []
    if not args.mock_only:
        runs.append(
            measure(ctx, "bare WSGI app, constant body", "bare", settings, body, targets, args)
        )
    label = f"mock /e, demo + {args.minted} minted ids" if minted else f"mock /e?n={DEMO_ID}"
    runs.append(measure(ctx, label, "mock", settings, body, targets, args))
    report(runs)


if __name__ == "__main__":
    main()
