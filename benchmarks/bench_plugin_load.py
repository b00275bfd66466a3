"""What installing verdict-contract costs every pytest run of a venv: ``pytest --co``, side by side.

Run: ``python benchmarks/bench_plugin_load.py`` (``--runs 9`` for steadier numbers; it builds
two throwaway venvs first, which takes a minute).

The floor is a venv with the same pytest and nothing else; the other has this distribution
installed from its wheel, with its dependencies. Both collect the same one-test project,
interleaved run by run so machine load hits both alike. The difference is everything the install
adds to a run that uses none of our fixtures: our plugin (it imports only pytest and the spec's
facts at load time) and the plugins our dependencies ship. Of those, faker's (the ``faker``
fixture) imports faker on every start; ``-p no:faker`` in an integrator's ``addopts`` drops it,
and its share is printed on its own. The target is under 0.3 s of extra load time (medians)
without faker's plugin.
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


def collect_seconds(python: Path, project: Path, extra: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        [str(python), "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", *extra],
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
        project = base / "project"
        project.mkdir()
        (project / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
        for python in (floor_python, ours_python):  # warm the file system cache and bytecode
            collect_seconds(python, project, [])
        floor, ours, no_faker = [], [], []
        for _ in range(runs):
            floor.append(collect_seconds(floor_python, project, []))
            ours.append(collect_seconds(ours_python, project, []))
            no_faker.append(collect_seconds(ours_python, project, ["-p", "no:faker"]))
    without, with_all, with_ours = map(statistics.median, (floor, ours, no_faker))
    print(f"pytest --co, pytest alone (floor):           {without:.3f} s (median of {runs})")
    print(f"pytest --co, verdict-contract installed:     {with_all:.3f} s")
    print(f"pytest --co, installed, -p no:faker:         {with_ours:.3f} s")
    print(f"extra load time, all plugins:  {with_all - without:+.3f} s")
    print(f"  of which faker's plugin:     {with_all - with_ours:+.3f} s")
    print(f"  ours and the rest:           {with_ours - without:+.3f} s")
    verdict = "OK" if with_ours - without < TARGET_SECONDS else "OVER"
    print(f"target: under {TARGET_SECONDS} s extra without faker's plugin: {verdict}")


if __name__ == "__main__":
    main()
