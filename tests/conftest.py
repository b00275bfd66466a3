"""Fixtures shared by the tests: one wheel and one install per run; pytester's runs kept light."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.installs import shared_install
from tests.typecheck import Checked, shared_checked

CHILD_ADDOPTS = os.environ.get("PYTEST_ADDOPTS", "")
"""What the root conftest gives every pytest run a test starts: the plugins none uses, off."""


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
