"""Whether a pytest run collects the contract suite: the one test of where its hooks belong.

The suite's options, hooks and markers exist only in runs that collect it (by a path inside
this package, or ``--pyargs verdict_contract.contract_tests``), never in an integrator's own
runs. This module imports nothing of the suite, so asking costs nothing.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from functools import cache
from pathlib import Path

PACKAGE = __name__.rpartition(".")[0]
"""``verdict_contract.contract_tests``."""


@cache
def package_dir() -> Path:
    """Where the suite's files are, resolved (an editable install's links lead to the source)."""
    spec = importlib.util.find_spec(PACKAGE)
    assert spec is not None  # this module is inside it
    assert spec.origin is not None
    return Path(spec.origin).resolve().parent


def collects_suite(args: Iterable[str], pyargs: bool, invocation_dir: Path) -> bool:
    """Whether ``args`` (pytest's positional arguments) name the suite or a part of it."""
    for arg in args:
        target = str(arg).split("::")[0]
        if pyargs and (target == PACKAGE or target.startswith(f"{PACKAGE}.")):
            return True
        path = (invocation_dir / target).resolve()
        if path == package_dir() or package_dir() in path.parents:
            return True
    return False
