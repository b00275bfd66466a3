"""Build and install this distribution with pip, as a user would (for the packaging tests)."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""The repository: the distribution's source."""


def _pip(command: str, *args: str | Path) -> None:
    """Run pip; one run at a time, since a build from the repository writes its build/ folder."""
    lock = ROOT / "build" / ".pip.lock"
    lock.parent.mkdir(exist_ok=True)
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # xdist workers build in parallel otherwise
        result = subprocess.run(
            [sys.executable, "-m", "pip", command, "-q", "--no-deps", "--no-build-isolation"]
            + [str(arg) for arg in args],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert result.returncode == 0, f"pip {command} failed:\n{result.stdout}{result.stderr}"


def build_wheel(out: Path) -> Path:
    """Build the distribution's wheel into ``out`` and return it."""
    _pip("wheel", "-w", out, ROOT)
    (built,) = out.glob("verdict_contract-*.whl")
    return built


def install(source: Path, target: Path) -> Path:
    """Install ``source`` (the repository or a wheel) into the plain folder ``target``."""
    _pip("install", "--target", target, source)
    return target
