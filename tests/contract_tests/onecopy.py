"""A pytest plugin that finds second copies of the suite's modules in a run (``-p onecopy``).

Loaded by its file's folder on ``PYTHONPATH`` (it imports nothing of the tests), in every
process of the run (xdist workers too); each writes what it found, as JSON, into the folder
named by ``ONE_COPY_REPORTS``. ``ONE_COPY_PLANT=1`` lets pytest import the suite's test
modules its own way, by their path (as without the suite's ``SuiteModule``): in a checkout,
their relative imports then load second copies, which the report must show.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

import pytest

PACKAGE = "verdict_contract.contract_tests"
REPORTS = "ONE_COPY_REPORTS"
PLANT = "ONE_COPY_PLANT"


def _file(module: ModuleType) -> Path | None:
    where = getattr(module, "__file__", None)
    return Path(where).resolve() if where else None


def _in(module: ModuleType, folder: Path) -> bool:
    path = _file(module)
    return path is not None and path.parent == folder


def second_copies(modules: Mapping[str, ModuleType], folder: Path) -> list[str]:
    """What in ``modules`` (``sys.modules``) breaks "one copy of each module of the suite".

    Each file of ``folder`` (the suite's, resolved) is loaded once, and under its name in the
    package, but a ``conftest.py``: pytest imports a conftest by its path, under a name of its
    own (and, above it, the folder's ``__init__.py``: a docstring). And every module of the
    suite that a module of the folder holds (``from . import clock``), or holds a class or
    function of (``from .client import ExplainClient``), is the one ``modules`` has by that name.
    """
    found: list[str] = []
    by_file: dict[Path, list[str]] = {}
    for name, module in list(modules.items()):
        path = _file(module)
        if path is None or path.parent != folder:
            continue
        if path.name != "__init__.py":
            by_file.setdefault(path, []).append(name)
        if path.name not in ("__init__.py", "conftest.py") and not name.startswith(f"{PACKAGE}."):
            found.append(f"{name}: {path.name} imported under a name of its own")
        for held, value in vars(module).items():
            if isinstance(value, ModuleType):
                owner, one = value.__name__, modules.get(value.__name__)
            elif inspect.isclass(value) or inspect.isfunction(value):
                owner = value.__module__
                one = getattr(modules.get(owner), value.__name__, None)
            else:
                continue
            if owner.startswith(f"{PACKAGE}.") and one is not value:
                found.append(f"{name}.{held} is not the one of {owner} in sys.modules")
    found += [
        f"{path.name} loaded {len(names)} times: {sorted(names)}"
        for path, names in by_file.items()
        if len(names) > 1
    ]
    return found


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(
    module_path: Path, parent: pytest.Collector
) -> pytest.Module | None:
    if os.environ.get(PLANT) == "1":
        return pytest.Module.from_parent(parent, path=module_path)  # pytest's import, by path
    return None


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    from verdict_contract.contract_tests.activation import package_dir

    folder = package_dir()
    held = [getattr(item, "module", None) for item in session.items]
    tests = {m.__name__ for m in held if isinstance(m, ModuleType) and _in(m, folder)}
    problems = second_copies(sys.modules, folder)
    report = {"folder": str(folder), "test_modules": sorted(tests), "problems": problems}
    out = Path(os.environ[REPORTS]) / f"{os.getpid()}.json"
    out.write_text(json.dumps(report), encoding="utf-8")
