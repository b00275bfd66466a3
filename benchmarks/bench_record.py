"""Recording through the proxy: 100 sessions of about 1 MiB each.

An upstream answers every id with a ~1 MiB JSON 404; 16 new ids are fetched at a time through
a proxy recording to a temporary file, while an already-recorded id and ``/_mock/health`` are
fetched meanwhile. Prints the whole time, the slowest meanwhile answers, the growth of the
process's resident memory, and what the recording holds (the rest refused at its byte bound).

    .venv/bin/python benchmarks/bench_record.py [SESSIONS]
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.model.scenario import load_scenario
from verdict_contract.mockserver.settings import DEFAULT_API_KEY
from verdict_contract.mockserver.web.proxy import PROXY_EXTENSION
from verdict_contract.testing.background import BackgroundServer

BODY = b'{"error": {"code": "not_found", "pad": "' + b"x" * 1_000_000 + b'"}}'
HEADERS = {"Authorization": f"Bearer {DEFAULT_API_KEY}"}


def upstream(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    start_response("404 Not Found", [("Content-Type", "application/json")])
    return [BODY]


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main(sessions: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        record = Path(folder) / "recorded.json"
        with BackgroundServer(upstream, threads=4) as real:
            app = create_app(Settings(proxy_to=real.base_url, record=record, threads=16))
            with BackgroundServer(app, threads=16) as proxy:
                http = httpx.Client(base_url=proxy.base_url, timeout=60)
                http.get("/e", params={"n": "first"}, headers=HEADERS)
                app.extensions[PROXY_EXTENSION].recorder.flush()
                before, started = rss_mb(), time.perf_counter()
                slowest = {"recorded": 0.0, "health": 0.0}
                done = threading.Event()

                def meanwhile() -> None:
                    while not done.is_set():
                        for name, path, params in (
                            ("recorded", "/e", {"n": "first"}),
                            ("health", "/_mock/health", {}),
                        ):
                            at = time.perf_counter()
                            http.get(path, params=params, headers=HEADERS)
                            slowest[name] = max(slowest[name], time.perf_counter() - at)

                watcher = threading.Thread(target=meanwhile)
                watcher.start()
                with ThreadPoolExecutor(16) as pool:
                    list(
                        pool.map(
                            lambda i: http.get("/e", params={"n": f"s{i}"}, headers=HEADERS),
                            range(sessions),
                        )
                    )
                app.extensions[PROXY_EXTENSION].recorder.flush()
                elapsed = time.perf_counter() - started
                done.set()
                watcher.join()
                grown = rss_mb() - before
                kept = len(load_scenario(record).sessions)
                size = record.stat().st_size
    print(f"{sessions} sessions of {len(BODY)} bytes: {elapsed:.1f} s")
    print(
        f"slowest meanwhile: recorded id {slowest['recorded']:.3f} s, "
        f"health {slowest['health']:.3f} s"
    )
    print(f"RSS growth: {grown:.0f} MB")
    print(f"recording: {kept} sessions, {size} bytes (the rest refused at its byte bound)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
