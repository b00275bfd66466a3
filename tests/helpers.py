"""Helpers shared by the mock server's tests (a plain module: import what you need)."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from flask import Flask

from verdict_contract.testing.background import BackgroundServer

KEY = "team-key-0123456789abcdef"
"""A non-default API key: long enough that the journal shows its last 4 characters."""

OTHER_KEY = "other-key-fedcba9876543210"

ERROR_KEYS = {"code", "message"}


def bearer(key: str = KEY) -> dict[str, str]:
    """The Authorization header of a request with ``key``."""
    return {"Authorization": f"Bearer {key}"}


def error_of(status: int, content_type: str | None, data: bytes) -> dict[str, Any]:
    """Check the one error shape of the mock and return ``{"code", "message"}``."""
    assert status != 200
    assert content_type is not None
    assert content_type.split(";")[0].strip() == "application/json"
    body = json.loads(data)
    assert isinstance(body, dict)
    assert set(body) == {"error"}
    error = body["error"]
    assert isinstance(error, dict)
    assert set(error) == ERROR_KEYS
    assert isinstance(error["code"], str)
    assert error["code"]
    assert isinstance(error["message"], str)
    assert error["message"]
    return error


class FakeClock:
    """A clock for the rate limiter that moves only when told to."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


READY_DEADLINE = 120.0
"""How long a test waits for something to become ready (a child's banner, a port, a reload):
generous, so a loaded machine is slow rather than red; a ready thing ends the wait at once."""


def wait_until(
    predicate: Callable[[], bool], timeout: float = READY_DEADLINE, step: float = 0.02
) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds pass; return its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


@contextmanager
def running(app: Flask, threads: int = 4, server: str = "async") -> Iterator[BackgroundServer]:
    """Serve ``app`` on 127.0.0.1 and a free port, then stop; ``server="wsgi"``: the app called
    for every request, ``/e`` too, as ``flask run`` or any WSGI server calls it."""
    served = app if server == "async" else lambda environ, start: app(environ, start)
    background = BackgroundServer(served, port=0, threads=threads).start()
    try:
        yield background
    finally:
        background.stop()


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def raw_request(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    """Send raw bytes to 127.0.0.1:``port`` and return everything the server answers."""
    chunks: list[bytes] = []
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        with suppress(OSError):  # the server may already have closed the connection
            sock.shutdown(socket.SHUT_WR)
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except (ConnectionResetError, TimeoutError):
            pass
    return b"".join(chunks)


def clean_environ(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The current environment without VERDICT_MOCK_* variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERDICT_MOCK_")}
    env.update(extra or {})
    return env


def read_line(proc: subprocess.Popen[str], timeout: float = READY_DEADLINE) -> str | None:
    """Read one line of the child's stdout, or None if none comes within ``timeout`` seconds."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        return None
    return proc.stdout.readline()


def announced(
    proc: subprocess.Popen[str], err: Path, json_logs: bool, timeout: float = READY_DEADLINE
) -> dict[str, Any] | None:
    """What a started ``verdict-mock`` announced once it listens: its banner's ``url`` and
    ``banner`` lines, read from its stdout, or, under ``--log-format json``, from the banner's
    log record on its stderr (written to ``err``); None if none comes in ``timeout`` seconds."""
    if not json_logs:
        first = read_line(proc, timeout) or ""
        return {"url": first.strip().rpartition(" ")[2], "banner": []} if first else None

    def record() -> dict[str, Any] | None:
        for line in err.read_text().splitlines():
            if line.startswith("{") and '"url"' in line:
                found: dict[str, Any] = json.loads(line)
                return found
        return None

    wait_until(lambda: record() is not None or proc.poll() is not None, timeout)
    return record()


def stop_process(proc: subprocess.Popen[str]) -> None:
    """Terminate a child (kill it if it does not stop within 5 s) and close its pipes."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def run_threads(count: int, target: Callable[[int], None]) -> None:
    """Run ``target(index)`` on ``count`` threads started together; re-raise the first error."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            barrier.wait(timeout=10)
            target(index)
        except BaseException as exc:  # reported to the test below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a worker thread did not finish"
    if errors:
        raise errors[0]
