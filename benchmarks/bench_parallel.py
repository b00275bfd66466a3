"""When ``verdict-contract check -n N`` pays: serial against -n 2 and -n 4, fast and slow target.

Run: ``python benchmarks/bench_parallel.py`` (``--runs 3`` for a steadier median).

The target is the mock's app as a live service (no control API: the suite is given its sessions),
on a local server, answering ``/e`` at once or after ``--latency`` seconds (a staging host far
away). Each row is ``verdict-contract check`` as a pipeline runs it; the ratio is against the
serial run of the same target, measured in the same run. The floor is pytest-xdist's own cost:
``pytest -n N`` of one empty test beside ``pytest`` of it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from verdict_contract.core.rates import RateLimit
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.model.sessions import parse_spec
from verdict_contract.mockserver.web.answers import state_of
from verdict_contract.testing.background import BackgroundServer

KEY = "bench-parallel-key-0123456789"
WORKERS = (0, 2, 4)


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stdout[-2000:]}{result.stderr}")
    return elapsed


def slowed(app: Any, latency: float) -> Callable[[dict[str, Any], Any], Iterable[bytes]]:
    """``app``, answering ``/e`` ``latency`` seconds late (a far-away host)."""

    def wsgi(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if latency and environ.get("PATH_INFO") == "/e":
            time.sleep(latency)
        result: Iterable[bytes] = app(environ, start_response)
        return result

    return wsgi


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="runs of each (median reported)")
    parser.add_argument("--latency", type=float, default=0.1, help="the slow target's delay")
    options = parser.parse_args()
    check = [sys.executable, "-m", "verdict_contract.cli", "check"]
    quiet = ["-q", "-p", "no:cacheprovider"]
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    env = {**os.environ, "VERDICT_API_KEY": KEY}
    env.pop("PYTEST_BASE_URL", None)
    rows: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder)
        (cwd / "test_empty.py").write_text("def test_empty():\n    pass\n")
        for n in WORKERS:
            name = f"floor: pytest, one empty test, -n {n}"
            rows[name] = statistics.median(
                timed([*pytest, "test_empty.py", "-n", str(n)], cwd, env)
                for _ in range(options.runs)
            )
        for latency in (0.0, options.latency):
            app = create_app(
                Settings(api_keys=(KEY,), control=False, rate_limit=RateLimit.parse("off"))
            )
            state = state_of(app)
            ids = [state.mint(parse_spec({"verdict": v})).id for v in ("refused", "disputed")]
            expired = state.mint(parse_spec({"age_seconds": 901})).id
            with BackgroundServer(slowed(app, latency), threads=16) as server:
                sessions = [a for n in ids for a in ("--verdict-session-id", n)]
                target = [server.base_url, *sessions, "--verdict-expired-session-id", expired]
                for n in WORKERS:
                    name = f"check, /e answered in {latency * 1000:.0f} ms, -n {n}"
                    rows[name] = statistics.median(
                        timed([*check, *target, *quiet, "-n", str(n)], cwd, env)
                        for _ in range(options.runs)
                    )
    print(f"{'measurement':44} {'seconds':>8} {'vs serial':>10}")
    for name, seconds in rows.items():
        serial = rows[name.rpartition("-n ")[0] + "-n 0"]
        print(f"{name:44} {seconds:8.2f} {seconds / serial:9.2f}x")


if __name__ == "__main__":
    main()
