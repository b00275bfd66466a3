"""What installing verdict-contract costs every pytest run of a venv: a one-test run, side by side.

Run: ``python benchmarks/bench_plugin_load.py`` (``--runs 9`` for steadier numbers; it builds
three throwaway venvs first, which takes a minute or two).

The floor is a venv with the same pytest and nothing else; the second has this distribution
installed from its wheel, with its dependencies; the third adds the ``[faker]`` extra. Each runs
the same one-test project, interleaved run by run so machine load hits them alike. The second
against the floor is what every project that installs the package and does not use it pays:
our plugin (it imports only pytest and the spec's facts at load time) and the plugins our
dependencies ship. The third shows why faker is an extra, not a dependency: its pytest plugin
imports faker at every start. The target is under 0.3 s of extra time (medians).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

TARGET_SECONDS = 0.3
ROOT = Path(__file__).resolve().parents[1]


def _venv(where: Path, *requirements: str | Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    python = where / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", *map(str, requirements)],
        check=True,
        timeout=900,
    )
    return python


def run_seconds(python: Path, project: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
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
        base = Path(folder)
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(base), str(ROOT)],
            check=True,
            timeout=300,
        )
        (wheel,) = base.glob("verdict_contract-*.whl")
        pytest_pin = f"pytest=={version('pytest')}"
        floor_python = _venv(base / "floor", pytest_pin)
        ours_python = _venv(base / "ours", pytest_pin, wheel)
        faker_python = _venv(base / "faker", pytest_pin, f"{wheel}[faker]")
        project = base / "project"
        project.mkdir()
        (project / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
        pythons = {"floor": floor_python, "ours": ours_python, "faker": faker_python}
        for python in pythons.values():  # warm the file system cache and bytecode
            run_seconds(python, project)
        times: dict[str, list[float]] = {name: [] for name in pythons}
        for _ in range(runs):
            for name, python in pythons.items():
                times[name].append(run_seconds(python, project))
    floor, ours, faker = (statistics.median(times[name]) for name in pythons)
    print(f"pytest, one test, pytest alone (floor):        {floor:.3f} s (median of {runs})")
    print(f"pytest, one test, verdict-contract installed:  {ours:.3f} s ({ours - floor:+.3f} s)")
    print(f"pytest, one test, with the [faker] extra:      {faker:.3f} s ({faker - floor:+.3f} s)")
    verdict = "OK" if ours - floor < TARGET_SECONDS else "OVER"
    print(f"target: under {TARGET_SECONDS} s extra for a plain install: {verdict}")


if __name__ == "__main__":
    main()
