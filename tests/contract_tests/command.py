"""The real ``verdict-contract check`` command, run as a pipeline runs it (a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TIMEOUT = 180.0
"""Generous: a whole run of the suite on a busy machine."""


def verdict_contract() -> list[str]:
    """``verdict-contract`` as installed beside this interpreter."""
    script = Path(sys.executable).with_name("verdict-contract")
    return [str(script)] if script.exists() else [sys.executable, "-m", "verdict_contract.cli"]


def environment(**variables: str) -> dict[str, str]:
    """This process's environment, without a base URL from outside, with ``variables``."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **variables}
    env.pop("PYTEST_BASE_URL", None)
    return env


def check(*args: str, cwd: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    """``verdict-contract check ARGS`` in ``cwd``, its output captured."""
    return subprocess.run(
        [*verdict_contract(), "check", *args, "-p", "no:cacheprovider"],
        cwd=cwd,
        env=environment(**variables),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
