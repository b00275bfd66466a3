"""mypy and pyright as an integrator runs them on this package; mypy's cache warmed once per run."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.installs import shared_dir, shared_install

BIN = Path(sys.executable).parent
"""Where this venv's ``mypy`` and ``pyright`` are."""


class Checked(NamedTuple):
    """Where a type check finds what it needs."""

    cache: Path
    """A folder of mypy's: its config file and its cache (already holding the package's modules)."""
    copy: Path | None
    """Where the package is found: None where the install shows it (the strict editable one)."""


def run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    """What ``command`` printed, stdout and stderr."""
    done = subprocess.run(
        [str(c) for c in command], cwd=cwd, capture_output=True, text=True, env=env, timeout=300
    )
    return done.stdout + done.stderr


def mypy(paths: list[Path], cache: Path, copy: Path | None) -> str:
    """``mypy --strict`` (by its config file) on ``paths``, run from their folder."""
    config = cache / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\n")
    env = None if copy is None else {**os.environ, "MYPYPATH": str(copy)}
    command: list[str | Path] = [
        BIN / "mypy",
        "--config-file",
        config,
        "--cache-dir",
        cache / "cache",
    ]
    return run(*command, *paths, cwd=paths[0].parent, env=env)


def pyright(paths: list[Path], copy: Path | None, folder: Path) -> str:
    """pyright, strict, on ``paths``, with this interpreter's packages."""
    config = {"typeCheckingMode": "strict", "extraPaths": [str(copy)] if copy else []}
    (folder / "pyrightconfig.json").write_text(json.dumps(config))
    return run(BIN / "pyright", "--pythonpath", sys.executable, *paths, cwd=folder)


def _warm(cache: Path, factory: pytest.TempPathFactory) -> Path | None:
    """mypy run once into ``cache`` on the package as installed; where it cannot see it, on a
    copy installed as a wheel would be (``pip install --target``): an editable install through an
    import hook is opaque to type checkers, so the package is checked as an integrator gets it."""
    probe = cache / "probe" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("import verdict_contract.testing\n")
    if "Success" in mypy([probe], cache, None):
        return None
    copy = shared_install(factory)  # the run's one wheel, installed once (under its lock)
    mypy([probe], cache, copy)
    return copy


def shared_checked(factory: pytest.TempPathFactory, mine: Path) -> Checked:
    """A cache warmed once per run, whatever the number of xdist workers, copied into ``mine``:
    each test's mypy then checks only its own files, and writes to a cache of its own."""
    warmed = shared_dir(factory, "shared-mypy")
    with (warmed.parent / "shared-mypy.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if not warmed.is_dir():
            building = warmed.with_name("shared-mypy.building")
            shutil.rmtree(building, ignore_errors=True)
            building.mkdir()
            copy = _warm(building, factory)
            (building / "copy.txt").write_text(str(copy or ""))
            building.rename(warmed)
    shutil.copytree(warmed, mine, dirs_exist_ok=True)
    copy_text = (mine / "copy.txt").read_text()
    return Checked(mine, Path(copy_text) if copy_text else None)
