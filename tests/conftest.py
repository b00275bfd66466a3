"""Fixtures shared by the tests: one wheel and one install per run; pytester's runs kept light."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.installs import ROOT, shared_install
from tests.typecheck import Checked, shared_checked

CHILD_ADDOPTS = os.environ.get("PYTEST_ADDOPTS", "")
"""What the root conftest gives every pytest run a test starts: the plugins none uses, off."""


LONGEST_FIRST = (
    "tests/test_readme.py",
    "tests/test_integrator_project.py",
    "tests/contract_tests/test_parallel.py",
    "tests/contract_tests/test_staging.py",
    "tests/mockserver/test_redisstate.py",
    "tests/test_plugin_coverage.py",
    "tests/contract_tests/test_hooks.py",
    "tests/contract_tests/test_gate.py",
    "tests/test_plugin.py",
    "tests/test_dev_install.py",
    "tests/test_suite.py",
    "tests/contract_tests/test_cancel.py",
    "tests/contract_tests/test_credentials.py",
    "tests/test_testing.py",
    "tests/test_extras.py",
)
"""The modules whose tests build, install or start pytest runs, those with the longest tests first
(by a measured ``--durations`` run). They start first, on the first worker under xdist's work
stealing (the root ``conftest.py``), and the other workers take them from the end of its queue
once done with their own short tests. Each module stays whole in the order (a worker given
several of its tests runs them one after the other: its module-scoped fixtures start once), and
its tests keep their order."""


def run_order(path: Path) -> int:
    """Where the module at ``path`` comes: its rank in :data:`LONGEST_FIRST`, or after them."""
    where = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else ""
    return LONGEST_FIRST.index(where) if where in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: run_order(item.path))  # stable: the others keep pytest's order


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest's own, whose runs also leave out the plugins none of them use (pytester drops the
    outer ``PYTEST_ADDOPTS``, so each of its runs would import faker and hypothesis again)."""
    monkeypatch.setenv("PYTEST_ADDOPTS", CHILD_ADDOPTS)
    return pytester


@pytest.fixture(scope="session")
def wheel_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The distribution as a wheel lays it out (no editable import hook), on ``PYTHONPATH``."""
    return shared_install(tmp_path_factory)


@pytest.fixture
def typecheck(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Checked:
    """mypy's folder for this test, its cache warmed once per run; where the package is found."""
    return shared_checked(tmp_path_factory, tmp_path / "mypy")
