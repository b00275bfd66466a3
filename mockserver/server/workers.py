"""``--workers N``: N mock processes on one port, started and watched by a small parent.

The parent refuses a port another process holds, reserves it (SO_REUSEPORT, never listening),
starts N ``verdict-mock`` processes with the same flags on it and waits for each one's banner;
if one stops, it logs which and stops the others. Ctrl-C or SIGTERM stops them all (SIGTERM
passed on: each finishes within ``--grace-seconds``; what is left a few seconds later is killed);
a second one is passed on (each worker cuts at once), and so is SIGHUP once every worker listens
(each reloads its scenario and tenants file; with neither, SIGHUP stops the group, as SIGTERM).
"""

from __future__ import annotations

import contextlib
import errno
import http.client
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Final

from ..settings import Settings
from .logs import announce
from .wire import bound_socket

WORKER_MARK: Final = "_VERDICT_MOCK_WORKER_OF"
"""Set in a worker's environment (the parent's pid): it serves instead of starting workers."""

log = logging.getLogger("mockserver.workers")

ASK_TIMEOUT: Final = 1.0
"""Seconds given to the holder of a port to say what it is."""
_WILDCARDS: Final = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}  # noqa: S104


def taken(host: str, port: int) -> str | None:
    """The one line that refuses a port another process holds, or None when it is free: bound
    once without SO_REUSEPORT, which Linux grants to any socket of the user that sets it too (a
    second group would share the port, and the kernel split clients between two mocks)."""
    if port == 0:
        return None
    try:
        bound_socket(host, port).close()
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
    else:
        return None
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    who = _holder(host, port)
    if who is None:
        return f"{where} is in use by another process; pick another --port"
    return f"{where} is in use: {who}; stop it, or pick another --port"


def _holder(host: str, port: int) -> str | None:
    """What answers on ``host``:``port``: a verdict-mock's pid (its ``/_mock/livez`` says), or
    None where it cannot tell."""
    connection = http.client.HTTPConnection(_WILDCARDS.get(host, host), port, timeout=ASK_TIMEOUT)
    try:
        connection.request("GET", "/_mock/livez")
        answer = connection.getresponse()
        if answer.getheader("Server") != "verdict-mock" or answer.status != 200:
            return None
        pid = json.loads(answer.read(4096)).get("pid")
    except (OSError, ValueError, AttributeError, http.client.HTTPException):
        return None  # not HTTP, not JSON, too slow: someone else
    finally:
        connection.close()
    return f"a verdict-mock answers there (pid {pid})" if isinstance(pid, int) else None


def _log_death(processes: Sequence[subprocess.Popen[bytes]]) -> None:
    """One line for the first worker that stopped: its number, pid, and exit code or signal."""
    index, process = next((i, p) for i, p in enumerate(processes, 1) if p.returncode is not None)
    code, pid = process.returncode, process.pid
    signals = {-number: number.name for number in signal.Signals}  # SIGKILL ends it: -9
    ended = signals.get(code, f"signal {-code}") if code < 0 else None
    said = f"ended by {ended}" if ended else f"exited with code {code}"
    fields = {"worker": index, "pid": pid, "returncode": code, "signal": ended}
    log.error(
        "worker %d of %d (pid %d) %s; stopping the others", index, len(processes), pid, said,
        extra={"fields": fields},
    )  # fmt: skip


def parent_pid() -> int | None:
    """In a worker, the pid of the parent that started it; None in any other process."""
    mark = os.environ.get(WORKER_MARK)
    return None if mark is None else int(mark)


_MARGIN: Final = 5.0
"""Seconds a worker may take past its grace to stop (closing its loop and connections)."""


def _signal(processes: Sequence[subprocess.Popen[bytes]], signum: int) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signum)


def _stop(processes: Sequence[subprocess.Popen[bytes]], grace: float) -> None:
    _signal(processes, signal.SIGTERM)  # each finishes what is under way, within the grace
    deadline = time.monotonic() + grace + _MARGIN
    for process in processes:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_workers(argv: Sequence[str], settings: Settings, banner: Callable[[int], str]) -> int:
    """Start ``settings.workers`` processes serving ``argv`` on one port, say ``banner(port)``
    once they all listen, and watch them."""
    if (refusal := taken(settings.host, settings.port)) is not None:
        print(f"verdict-mock: {refusal}", file=sys.stderr, flush=True)
        return 2
    reserved = bound_socket(settings.host, settings.port, reuse_port=True)  # the workers' too
    port = reserved.getsockname()[1]
    environ = {**os.environ, WORKER_MARK: str(os.getpid())}
    command = [sys.executable, "-m", "verdict_contract.mockserver", *argv, "--port", str(port)]
    processes: list[subprocess.Popen[bytes]] = []
    reloads = settings.scenario is not None or settings.tenants is not None
    hangup = getattr(signal, "SIGHUP", None)  # none on Windows
    listening = stopping = hung_up = False

    def on_signal(signum: int, _: object) -> None:  # as the module's docstring says
        nonlocal stopping, hung_up
        if signum == hangup and reloads and not listening:
            hung_up = True  # passed on once every worker listens
        elif (signum == hangup and reloads) or stopping:
            _signal(processes, signum)
        else:
            stopping = True
            raise KeyboardInterrupt

    for signum in (signal.SIGINT, signal.SIGTERM, hangup):  # SIGINT too where it started
        if signum is not None:  # ignored (a shell's background job), as one process stops
            signal.signal(signum, on_signal)
    try:
        for _ in range(settings.workers):
            worker = subprocess.Popen(command, env=environ, stdout=subprocess.PIPE)  # noqa: S603
            processes.append(worker)
        for process in processes:  # each prints its banner once it listens
            assert process.stdout is not None
            if not process.stdout.readline():
                print(f"verdict-mock: worker {process.pid} did not start", file=sys.stderr)
                return 1
        reserved.close()
        listening = True
        if hung_up:
            _signal(processes, signal.SIGHUP)
        pids = ", ".join(str(p.pid) for p in processes)
        workers = f"  workers:  {settings.workers} processes ({pids}), state {settings.state.label}"
        announce(f"{banner(port)}\n{workers}", settings.log_format)
        while all(process.poll() is None for process in processes):  # until one stops
            with contextlib.suppress(subprocess.TimeoutExpired):
                processes[0].wait(timeout=1)
        _log_death(processes)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        stopping = True  # from now on, a signal is passed on: none leaves a worker running
        reserved.close()
        _stop(processes, settings.grace_seconds)
