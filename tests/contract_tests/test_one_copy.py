"""One copy of each of the suite's modules, whatever way the suite runs.

The suite's test modules import the rest of the suite relatively, and the suite keeps state in
its modules (the clock its waits read, the hooks' stash keys, the throttling record): a test
module must meet the same module objects the hooks and fixtures do. From a checkout pytest would
name a test module after its folder (``contract_tests.test_auth``) and its relative imports
would load a second copy of the suite; the suite's hooks import it by its name in the package.
Each run here loads ``onecopy.py`` into every process of the run, which reports any second copy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.contract_tests import onecopy
from tests.contract_tests.command import verdict_contract

ROOT = Path(__file__).resolve().parents[2]
PROBE_FOLDER = str(Path(onecopy.__file__).parent)
"""Where ``-p onecopy`` finds the probe, as a top-level module."""
QUIET = ["-q", "-p", "no:cacheprovider", "-p", "onecopy"]


Report = dict[str, Any]


def _run(
    command: list[str], cwd: Path, reports: Path, pythonpath: str = "", plant: bool = False
) -> list[Report]:
    """Run ``command`` with ``onecopy`` loadable; what each of its pytest processes reported."""
    reports.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [PROBE_FOLDER, pythonpath])),
        onecopy.REPORTS: str(reports),
        onecopy.PLANT: "1" if plant else "",
    }
    env.pop("PYTEST_BASE_URL", None)
    result = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    found = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(reports.glob("*.json"))]
    assert found, result.stdout[-3000:]
    return found


def _one_copy(reports: list[Report], folder: Path = ROOT / "contract_tests") -> None:
    """No second copy in any process; the suite's test modules by their names, from ``folder``."""
    assert {r["folder"] for r in reports} == {str(folder)}
    assert [r["problems"] for r in reports] == [[]] * len(reports)
    modules = {name for r in reports for name in r["test_modules"]}
    assert "verdict_contract.contract_tests.test_auth" in modules, modules
    assert all(name.startswith("verdict_contract.contract_tests.test_") for name in modules)


PYTEST = [sys.executable, "-m", "pytest"]


@pytest.mark.parametrize(
    "way",
    [
        pytest.param(["contract_tests"], id="pytest contract_tests"),
        pytest.param(["contract_tests", "-n", "2"], id="pytest contract_tests -n 2"),
        pytest.param(["--pyargs", "verdict_contract.contract_tests"], id="pyargs"),
    ],
)
def test_a_checkout_run_holds_one_copy(way: list[str], tmp_path: Path) -> None:
    _one_copy(_run([*PYTEST, *way, *QUIET], ROOT, tmp_path / "reports"))


def test_verdict_contract_run_holds_one_copy(tmp_path: Path) -> None:
    _one_copy(_run([*verdict_contract(), "run", *QUIET], tmp_path, tmp_path / "reports"))


def test_a_wheel_install_holds_one_copy(tmp_path: Path, wheel_install: Path) -> None:
    command = [*PYTEST, "--pyargs", "verdict_contract.contract_tests", *QUIET]
    reports = _run(command, tmp_path, tmp_path / "reports", pythonpath=str(wheel_install))
    _one_copy(reports, wheel_install.resolve() / "verdict_contract" / "contract_tests")


def test_imported_by_path_a_test_module_brings_second_copies(tmp_path: Path) -> None:
    """What the suite's hooks prevent: pytest's own import of a checkout's test module."""
    command = [*PYTEST, "contract_tests", "--collect-only", *QUIET]
    (report,) = _run(command, ROOT, tmp_path / "reports", plant=True)
    problems = "\n".join(report["problems"])
    assert "contract_tests.test_auth: test_auth.py imported under a name of its own" in problems
    assert "client.py loaded 2 times" in problems
    assert "contract_tests.clock: clock.py imported under a name of its own" in problems
