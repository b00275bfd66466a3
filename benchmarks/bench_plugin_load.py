"""Plugin load cost: ``pytest --co`` with and without the verdict_contract plugins, side by side.

Run: ``python benchmarks/bench_plugin_load.py`` (``--runs 9`` for steadier numbers).

The floor is the same collection with both of our entry points blocked (``-p no:...``), in the
same temporary project, interleaved run by run so machine load hits both alike. The plugins
import only pytest and the spec's facts at load time; the mock's app, its server and faker load
when a fixture asks for them. The target is under 0.3 s of extra load time (medians).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_SECONDS = 0.3
BLOCKED = ["-p", "no:verdict_contract", "-p", "no:verdict_contract_suite"]


def collect_seconds(project: Path, extra: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", *extra],
        cwd=project,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = max(1, min(parser.parse_args().runs, 50))
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        (project / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
        collect_seconds(project, [])  # warm the file system cache and bytecode
        loaded, floor = [], []
        for _ in range(runs):
            loaded.append(collect_seconds(project, []))
            floor.append(collect_seconds(project, BLOCKED))
    with_plugin, without = statistics.median(loaded), statistics.median(floor)
    extra = with_plugin - without
    print(f"pytest --co, plugins blocked (floor): {without:.3f} s (median of {runs})")
    print(f"pytest --co, plugins loaded:          {with_plugin:.3f} s")
    print(f"extra load time: {extra:+.3f} s ({with_plugin / without:.2f}x the floor)")
    verdict = "OK" if extra < TARGET_SECONDS else "OVER"
    print(f"target: under {TARGET_SECONDS} s extra: {verdict}")


if __name__ == "__main__":
    main()
