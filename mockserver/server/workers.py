"""``--workers N``: N mock processes on one port, started and watched by a small parent.

The parent refuses a port another process holds (:mod:`.ports`: SO_REUSEPORT would let a
second group share it), reserves the port (a socket bound with SO_REUSEPORT, never listening:
with port 0 the kernel picks it), starts N ``verdict-mock`` processes with the same flags on
that port, waits until each has printed its banner (it listens by then), and then only
watches: if one stops, it logs one line naming it (its number, pid, and exit code or signal)
and stops the others; Ctrl-C or SIGTERM stops them all: SIGTERM is passed
on to each, and the parent waits for them while they finish the requests under way
(``--grace-seconds``, and a few seconds more), then kills what is left. The kernel spreads
connections among the processes. They share the per-call state through ``--state``
(settings.py refuses N > 1 without it), so they behave as one mock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from ..settings import Settings
from .ports import taken
from .wire import bound_socket

WORKER_MARK: Final = "_VERDICT_MOCK_WORKER_OF"
"""Set in a worker's environment (the parent's pid): it serves instead of starting workers."""


log = logging.getLogger("mockserver.workers")


@dataclass(frozen=True)
class Death:
    """A worker that stopped: which (its number from 1, its pid) and why (exit code, signal)."""

    index: int
    pid: int
    returncode: int

    @property
    def signal(self) -> str | None:
        """The signal that ended it (``SIGKILL``), or None if it exited."""
        if self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"

    def log(self, count: int) -> None:
        why = f"ended by {self.signal}" if self.signal else f"exited with code {self.returncode}"
        fields = {"worker": self.index, "pid": self.pid, "returncode": self.returncode}
        log.error(
            "worker %d of %d (pid %d) %s; stopping the others",
            *(self.index, count, self.pid, why),
            extra={"fields": {**fields, "signal": self.signal}},
        )


def _dead(processes: Sequence[subprocess.Popen[bytes]]) -> Death | None:
    for index, process in enumerate(processes, 1):
        code = process.poll()
        if code is not None:
            return Death(index, process.pid, code)
    return None


def is_worker() -> bool:
    return WORKER_MARK in os.environ


def reserve_port(host: str, port: int) -> socket.socket:
    """A socket bound to the port with SO_REUSEPORT, so the workers can bind it too."""
    return bound_socket(host, port, reuse_port=True)


_MARGIN: Final = 5.0
"""Seconds a worker may take past its grace to stop (closing its loop and connections)."""


def _stop(processes: Sequence[subprocess.Popen[bytes]], grace: float) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()  # SIGTERM: each finishes what is under way, within the grace
    deadline = time.monotonic() + grace + _MARGIN
    for process in processes:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_workers(argv: Sequence[str], settings: Settings, banner: Callable[[int], str]) -> int:
    """Start ``settings.workers`` processes serving ``argv`` on one port; watch them.

    ``banner(port)``: what to print once they all listen.
    """
    refusal = taken(settings.host, settings.port)  # SO_REUSEPORT would share it: see ports.py
    if refusal is not None:
        print(f"verdict-mock: {refusal}", file=sys.stderr, flush=True)
        return 2
    reserved = reserve_port(settings.host, settings.port)
    port = reserved.getsockname()[1]
    environ = {**os.environ, WORKER_MARK: str(os.getpid())}
    command = [sys.executable, "-m", "verdict_contract.mockserver", *argv, "--port", str(port)]
    processes: list[subprocess.Popen[bytes]] = []

    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
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
        print(banner(port), flush=True)
        pids = ", ".join(str(p.pid) for p in processes)
        print(f"  workers:  {settings.workers} processes ({pids}), state {settings.state.label}")
        sys.stdout.flush()
        while (death := _dead(processes)) is None:  # until one stops
            with contextlib.suppress(subprocess.TimeoutExpired):
                processes[0].wait(timeout=1)
        death.log(len(processes))
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        reserved.close()
        with contextlib.suppress(KeyboardInterrupt):
            _stop(processes, settings.grace_seconds)
