"""A CI cancels ``verdict-contract check``: the run stops, says so, and nothing keeps calling.

Real signals, sent to the real command (or to its process group, as a CI runner or a terminal's
Ctrl-C does), while it runs against a local service that answers slowly, so a call is in flight.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from werkzeug.wrappers import Request, Response

from tests.contract_tests.command import environment, verdict_contract
from tests.contract_tests.servers import Running, Variant, serve

DEADLINE = 60.0
"""Generous: how long the run may take to start, or to stop once cancelled."""


class Arrivals:
    """The calls of ``/e`` a service received, counted as each one arrives."""

    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()

    def slowly(self, seconds: float) -> Callable[[Request], Response | None]:
        def before(request: Request) -> Response | None:
            if request.path == "/e":
                with self.lock:
                    self.count += 1
                time.sleep(seconds)
            return None

        return before


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (read from /proc)."""
    return [process for process, parent, _ in _processes() if parent == pid]


def session_of(sid: int) -> list[int]:
    """The processes of session ``sid`` (read from /proc): all that the session's leader
    started in turn, whatever their parent now, unless one made a session of its own."""
    return [process for process, _, session in _processes() if session == sid]


def _processes() -> Iterator[tuple[int, int, int]]:
    """(pid, parent pid, session id) of each process (``/proc/<pid>/stat``)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()  # state, ppid, pgrp, session, ...
        if fields[0] not in ("Z", "X"):  # a zombie has ended: it waits only to be reaped
            yield int(entry.name), int(fields[1]), int(fields[3])


def _left_over(started: list[int], leaders: list[int]) -> list[int]:
    """What is still running of ``started`` and of the sessions ``leaders`` lead, after a few
    seconds' grace for processes killed as the command exited."""
    deadline = time.monotonic() + 5.0
    while True:
        left = [pid for pid in started if alive(pid)]
        left += [pid for leader in leaders for pid in session_of(leader)]
        if not left or time.monotonic() > deadline:
            return sorted(set(left))
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def start(running: Running, tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *verdict_contract(),
            "check",
            running.base_url,
            *running.session_args(),
            "-p",
            "no:cacheprovider",
            f"--junitxml={tmp_path / 'junit.xml'}",
            f"--verdict-report={tmp_path / 'report.md'}",
            *extra,
        ],
        cwd=tmp_path,
        env=environment(VERDICT_API_KEY=running.key),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a CI job's
    )


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, "the run never got going"
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("signum", "to_group"),
    [
        (signal.SIGTERM, False),  # a CI's cancel, to the command
        (signal.SIGTERM, True),  # a CI's cancel, to the job's process group
        (signal.SIGINT, True),  # Ctrl-C in a terminal: the foreground process group
    ],
    ids=["SIGTERM", "SIGTERM to the group", "SIGINT to the group"],
)
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_cancelled_run_stops_writes_its_outputs_and_leaves_nothing_running(
    tmp_path: Path, signum: signal.Signals, to_group: bool, workers: list[str]
) -> None:
    arrivals = Arrivals()
    with serve(Variant(before=arrivals.slowly(0.4))) as running:
        process = start(running, tmp_path, *workers)
        try:
            wait_for(lambda: arrivals.count >= 3)  # mid-flight: calls answered, one pending
            started = children_of(process.pid)
            assert started, "the command runs pytest as a child"
            if workers:  # what the leftover check below reads sees the workers, grandchildren
                wait_for(lambda: len(session_of(started[0])) >= 3)  # pytest and its 2 workers
            if to_group:
                os.killpg(process.pid, signum)
            else:
                process.send_signal(signum)
            out, err = process.communicate(timeout=DEADLINE)
        finally:
            if process.poll() is None:  # the test failed: leave nothing behind
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        # Nothing the command started is left, however deep (an xdist worker is a grandchild,
        # in the session of the pytest the command started in a session of its own); a process
        # killed as the command exits may take a moment to go (it is polled for, not slept on).
        leftovers = _left_over(started, [process.pid, *started])
        at_exit = arrivals.count
        # and no call comes after: one slow answer's time (an orphan that left the sessions)
        time.sleep(0.5)
        after = arrivals.count
    for pid in set(leftovers):  # the test failed: leave nothing behind
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    output = out + err
    assert process.returncode == 1, output
    assert "Traceback" not in err, err
    assert leftovers == [], output
    assert after == at_exit, "the service was called after the command exited"
    junit = (tmp_path / "junit.xml").read_text()
    assert 'name="verdict_outcome" value="interrupted (exit 1)"' in junit
    assert 'name="run_outcome"' in junit
    report = (tmp_path / "report.md").read_text()
    name = signal.Signals(signum).name
    assert report.splitlines()[2] == (
        f"**INTERRUPTED (exit 1): the run was interrupted: cancelled by {name}**"
    ), report
    # JUnit and the report (above) are what a pipeline reads, and are checked every time. The
    # terminal summary may be cut where the run is killed past the grace, and, seen once on a
    # loaded machine, where a signal to the whole group reaches the xdist workers too.
    if "the run did not stop in time: killed" not in err and not (workers and to_group):
        assert f"INTERRUPTED (exit 1): the run was interrupted: cancelled by {name}" in out
