"""The log an operator reads: the state store going down and coming back, a worker that died.

Real ``verdict-mock`` processes over real sockets, a real ``redis-server`` stopped and started
again, real signals sent to a real worker; each line is read from the process's stderr, in
text and in ``--log-format json``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import announced, clean_environ, stop_process, wait_until
from tests.redisserver import redis_server

KEY = "ops-logs-key-000001"
DEADLINE = 30.0  # generous: a loaded machine


@contextmanager
def verdict_mock(*flags: str, err: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``verdict-mock FLAGS`` on a free port, its stderr in ``err``; its base URL."""
    argv = [sys.executable, "-m", "verdict_contract.mockserver", "--port", "0", "--api-key", KEY]
    with err.open("w") as stderr:
        process = subprocess.Popen(
            [*argv, *flags], stdout=subprocess.PIPE, stderr=stderr, text=True, env=clean_environ()
        )
    try:
        said = announced(process, err, json_logs="json" in flags)
        assert said is not None, err.read_text()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", said["url"]), said
        yield process, said["url"]
    finally:
        stop_process(process)


def _json_lines(err: Path, logger: str) -> list[dict[str, Any]]:
    """The JSON log lines of ``logger`` (every line must be JSON: the format is whole)."""
    lines = [json.loads(line) for line in err.read_text().splitlines() if line.strip()]
    return [line for line in lines if line["logger"] == logger]


def test_json_log_lines_are_objects_with_the_named_fields(tmp_path: Path) -> None:
    err = tmp_path / "mock.err"
    with verdict_mock("--log-format", "json", "--access-log", err=err) as (process, base):
        answer = httpx.get(f"{base}/e", params={"n": "demo-contradicted", "k": KEY})
        assert answer.status_code == 401  # no header: the query's key is masked in the log
        assert wait_until(lambda: bool(_json_lines(err, "mockserver.access")), DEADLINE)
    (line,) = _json_lines(err, "mockserver.access")
    assert set(line) == {"time", "level", "logger", "process", "message"}
    assert line["process"] == process.pid  # whose line it is, under --workers too
    (banner,) = _json_lines(err, "mockserver")  # the banner: on the logs' stream, as one
    assert banner["message"] == f"verdict-mock serving the Explain API on {base}"
    assert banner["url"] == base
    assert any(line.startswith("API key:") for line in banner["banner"]), banner
    assert KEY not in json.dumps(banner)  # masked there too
    assert line["level"] == "info"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", line["time"])
    assert '"GET /e?n=demo-contradicted' in line["message"]
    assert KEY not in err.read_text()


def test_a_wrong_log_format_is_refused_in_one_line() -> None:
    command = [sys.executable, "-m", "verdict_contract.mockserver", "--log-format", "xml"]
    done = subprocess.run(command, capture_output=True, text=True, env=clean_environ(), check=False)
    assert done.returncode == 2
    assert "--log-format" in done.stderr
    assert "xml" in done.stderr
    assert "json" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_503_of_a_frozen_store_is_logged_with_the_time_it_waited(tmp_path: Path) -> None:
    """The access log and the latency histogram show how long a request waited on a store that
    never answered (the store's timeout, 1 s), not 0: that wait is what an operator looks for."""
    err = tmp_path / "mock.err"
    headers = {"Authorization": f"Bearer {KEY}"}
    with (
        redis_server() as server,
        verdict_mock("--state", server.url, "--secret", "frozen", "--access-log", err=err) as (
            _,
            base,
        ),
        httpx.Client(base_url=base, headers=headers, timeout=10) as client,
    ):
        server.pause()
        assert client.get("/e", params={"n": "demo-contradicted"}).status_code == 503
        server.resume()
        assert wait_until(lambda: client.get("/_mock/readyz").status_code == 200, DEADLINE)
        metrics = client.get("/_mock/metrics").text
    (line,) = [line for line in err.read_text().splitlines() if '"GET /e?n=' in line]
    assert line.split()[-3] == "503", line
    assert float(line.split()[-1]) >= 0.9, line  # received; documented: the store's 1 s timeout
    (waited,) = re.findall(r"(?m)^verdict_mock_request_seconds_sum (\S+)$", metrics)
    assert float(waited) >= 0.9, metrics  # the one request to /e: the 503


@pytest.mark.parametrize("form", ["text", "json"])
def test_the_state_store_going_down_and_back_is_logged_once_each(form: str, tmp_path: Path) -> None:
    err = tmp_path / "mock.err"
    headers = {"Authorization": f"Bearer {KEY}"}
    demo = {"n": "demo-contradicted"}
    with (
        redis_server() as server,
        verdict_mock("--state", server.url, "--secret", "logs", "--log-format", form, err=err) as (
            _,
            base,
        ),
        httpx.Client(base_url=base, headers=headers, timeout=10) as client,
    ):
        assert client.get("/e", params=demo).status_code == 200
        server.stop()
        for _ in range(5):  # the event loop's calls, and the control API's threads'
            assert client.get("/e", params=demo).status_code == 503
            assert client.get("/_mock/requests").status_code == 503
        server.start()
        assert wait_until(lambda: client.get("/e", params=demo).status_code == 200, DEADLINE)
        for _ in range(3):
            assert client.get("/e", params=demo).status_code == 200
            assert client.get("/_mock/requests").status_code == 200

        def logged() -> list[str]:
            lines = err.read_text().splitlines()
            return [line for line in lines if "state store" in line]

        assert wait_until(lambda: len(logged()) >= 2, DEADLINE)
    down, back = logged()  # one line each, however many calls failed
    label = f"redis://127.0.0.1:{server.port}/0"
    if form == "json":
        (down_line, back_line) = _json_lines(err, "mockserver.state")
        assert down_line["level"] == "error"
        assert back_line["level"] == "warning"
        down, back = down_line["message"], back_line["message"]
        assert (down_line["state"], down_line["code"]) == (label, "state_unavailable")
        assert back_line["state"] == label
    shown = re.escape(f"state store down: the mock's shared state ({label}) did not answer: ")
    assert re.search(rf"{shown}.+; its calls answer 503 until it is back$", down)
    assert re.search(rf"state store back: {re.escape(label)} answers again after [\d.]+ s", back)
    failed = int(re.search(r"\(calls failed meanwhile: (\d+)\)", back).group(1))  # type: ignore[union-attr]
    assert failed >= 10


@pytest.mark.parametrize(
    ("sent", "form", "why"),
    [
        (signal.SIGKILL, "json", "ended by SIGKILL"),
        (signal.SIGINT, "text", "exited with code 0"),  # Ctrl-C: it stopped as asked
    ],
    ids=["SIGKILL", "SIGINT"],
)
def test_a_dead_worker_is_named_with_its_cause(
    sent: signal.Signals, form: str, why: str, tmp_path: Path
) -> None:
    err = tmp_path / "group.err"
    flags = ["--workers", "2", "--log-format", form, "--secret", f"dead-worker-{form}"]
    with (
        redis_server() as server,
        verdict_mock("--state", server.url, *flags, err=err) as (
            group,
            _,
        ),
    ):
        assert group.stdout is not None
        line = ""
        if form == "json":  # the banner is a log record: its lines in "banner"
            (banner,) = [r for r in _json_lines(err, "mockserver") if "url" in r]
            line = next(line for line in banner["banner"] if line.startswith("workers:"))
        while "workers:" not in line:  # the banner's lines: printed at once, after the URL
            line = group.stdout.readline()
            assert line, err.read_text()
        pids = [int(pid) for pid in re.findall(r"\d+", line.partition("(")[2].partition(")")[0])]
        assert len(pids) == 2
        os.kill(pids[1], sent)
        assert group.wait(timeout=DEADLINE) == 1  # one died: the group stops
    text = err.read_text()
    expected = f"worker 2 of 2 (pid {pids[1]}) {why}; stopping the others"
    if form == "text":
        assert re.search(rf" ERROR mockserver\.workers: {re.escape(expected)}$", text, re.M), text
        return
    (death,) = _json_lines(err, "mockserver.workers")
    assert death["message"] == expected
    assert death["level"] == "error"
    assert (death["worker"], death["pid"], death["returncode"]) == (2, pids[1], -sent)
    assert death["signal"] == "SIGKILL"
