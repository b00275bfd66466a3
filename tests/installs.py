"""Build and install this distribution with pip, as a user would (for the packaging tests)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
"""The repository: the distribution's source."""


def _pip(command: str, *args: str | Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", command, "-q", "--no-deps", "--no-build-isolation"]
        + [str(arg) for arg in args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"pip {command} failed:\n{result.stdout}{result.stderr}"


def checkout_copy(target: Path) -> Path:
    """The checkout's files (tracked, and new ones not ignored) copied to ``target``: what a
    clean clone would hold, without the build/ folder a build in place leaves (whose stale
    modules a wheel built there would ship)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    return target


def build_wheel(out: Path) -> Path:
    """Build the distribution's wheel, from a copy of the checkout, into ``out``; return it."""
    _pip("wheel", "-w", out, checkout_copy(out / "source"))
    (built,) = out.glob("verdict_contract-*.whl")
    return built


def install(source: Path | str, target: Path) -> Path:
    """Install ``source`` (the repository, a wheel or a requirement) into the folder ``target``."""
    _pip("install", "--target", target, source)
    return target


def shared_dir(factory: pytest.TempPathFactory, name: str) -> Path:
    """A folder every pytest-xdist worker of this run shares (the run's base temp, else ours)."""
    base = factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return root / name


def shared_wheel(factory: pytest.TempPathFactory) -> Path:
    """The distribution's wheel, built once per run whatever the number of xdist workers."""
    out = shared_dir(factory, "shared-wheel")
    out.mkdir(exist_ok=True)
    with (out.parent / "shared-wheel.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        built = list(out.glob("verdict_contract-*.whl"))
        return built[0] if built else build_wheel(out)


def shared_install(factory: pytest.TempPathFactory) -> Path:
    """That wheel installed in a plain folder (``PYTHONPATH``), once per run."""
    target = shared_dir(factory, "shared-site")
    wheel = shared_wheel(factory)
    with (target.parent / "shared-site.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if not (target / "verdict_contract").is_dir():
            install(wheel, target)
        return target


def shared_requirement(factory: pytest.TempPathFactory, requirement: str) -> Path:
    """``requirement`` (from the index, without its dependencies) installed in a plain folder
    (``PYTHONPATH``), once per run whatever the number of xdist workers."""
    target = shared_dir(
        factory, "shared-" + "".join(c if c.isalnum() else "-" for c in requirement)
    )
    with (target.parent / f"{target.name}.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if not target.is_dir():
            building = target.with_name(f"{target.name}.building")
            install(requirement, building)
            building.rename(target)
        return target
