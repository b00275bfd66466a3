"""What a test costs with the in-process mock, beside bare respx: two pytest runs, side by side.

Run: ``python benchmarks/bench_inprocess.py`` (``--tests 300 --rounds 3``).

Both runs hold the same number of trivial tests, one shared httpx client, in one throwaway
project. The floor: respx's own ``respx_mock`` fixture with a hand-written route answering a
verdict. The other: the plugin's ``verdict_respx`` fixture, a ``mint()`` and one ``GET /e``
(its checks at teardown included). A plugin in each run notes the wall time of every test's
whole protocol (setup, call, teardown); the median leaves out the first test's one-off cost
(imports, the mock built once per process), which is printed apart. Rounds alternate the two
runs so load on the machine hits both alike. The goal: a test's own cost within 2x the floor.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

GOAL = 2.0

TIMING_PLUGIN = """
import json, os, time
import pytest

times = []

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start = time.perf_counter()
    yield
    times.append(time.perf_counter() - start)

def pytest_sessionfinish(session):
    with open(os.environ["BENCH_TIMES"], "w") as out:
        json.dump(times, out)
"""

FLOOR = """
import httpx
import pytest

client = httpx.Client()
BODY = {{"schema_version": 7, "verdict": "refused", "conclusive": True}}


@pytest.mark.parametrize("i", range({tests}))
def test_bare_respx(i, respx_mock):
    respx_mock.get("https://verdict.mock/e", params={{"n": "s-1"}}).respond(200, json=BODY)
    answer = client.get("https://verdict.mock/e", params={{"n": "s-1"}},
                        headers={{"Authorization": "Bearer k"}})
    assert answer.json()["verdict"] == "refused"
"""

MOCK = """
import httpx
import pytest

client = httpx.Client()


@pytest.mark.parametrize("i", range({tests}))
def test_verdict_respx(i, verdict_respx):
    n = verdict_respx.mint(verdict="refused")
    answer = client.get(verdict_respx.url(n), headers=verdict_respx.headers)
    assert answer.json()["verdict"] == "refused"
"""


def run(project: Path, name: str) -> list[float]:
    times = project / f"{name}.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "timing",
            "-p",
            "no:xdist",
            f"{name}.py",
        ],
        cwd=project,
        env={**os.environ, "BENCH_TIMES": str(times), "PYTHONPATH": str(project)},
        check=True,
        capture_output=True,
        timeout=600,
    )
    result: list[float] = json.loads(times.read_text())
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        (project / "timing.py").write_text(TIMING_PLUGIN)
        (project / "floor.py").write_text(FLOOR.format(tests=args.tests))
        (project / "mock.py").write_text(MOCK.format(tests=args.tests))
        medians: dict[str, list[float]] = {"floor": [], "mock": []}
        firsts: dict[str, list[float]] = {"floor": [], "mock": []}
        for _ in range(args.rounds):
            for name in ("floor", "mock"):
                times = run(project, name)
                firsts[name].append(times[0])
                medians[name].append(statistics.median(times[1:]))
    floor = statistics.median(medians["floor"])
    mock = statistics.median(medians["mock"])
    print(f"{args.tests} tests a run, {args.rounds} rounds, medians of a test's whole protocol:")
    print(f"  bare respx, a hand-written route: {floor * 1000:.2f} ms a test")
    print(f"  verdict_respx, mint + GET /e:     {mock * 1000:.2f} ms a test")
    print(
        f"  first test (one-off): floor {statistics.median(firsts['floor']) * 1000:.0f} ms, "
        f"verdict_respx {statistics.median(firsts['mock']) * 1000:.0f} ms"
    )
    ratio = mock / floor
    print(
        f"ratio {ratio:.2f}x (goal: at most {GOAL:.1f}x): {'met' if ratio <= GOAL else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
