"""How long the contract suite takes against the bundled mock, beside pytest's own floor.

Run: ``python benchmarks/bench_suite.py`` (``--runs 5`` for a steadier median).

The baseline, measured in the same run, is a pytest session with one empty test and the same
plugins loaded: what any run costs before the suite does anything.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stdout[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each (median reported)")
    runs = parser.parse_args().runs
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder)
        (cwd / "test_empty.py").write_text("def test_empty():\n    pass\n")
        rows = {
            "baseline: pytest with one empty test": [*pytest, "test_empty.py"],
            "contract suite vs bundled mock": [
                *pytest,
                "--pyargs",
                "verdict_contract.contract_tests",
            ],
            "contract suite vs bundled mock, -n 2": [
                *pytest,
                "--pyargs",
                "verdict_contract.contract_tests",
                "-n",
                "2",
            ],
        }
        medians = {
            name: statistics.median(timed(cmd, cwd) for _ in range(runs))
            for name, cmd in rows.items()
        }
    baseline = medians["baseline: pytest with one empty test"]
    print(f"{'measurement':40} {'seconds':>8} {'vs baseline':>12}")
    for name, seconds in medians.items():
        print(f"{name:40} {seconds:8.2f} {seconds / baseline:11.1f}x")


if __name__ == "__main__":
    main()
