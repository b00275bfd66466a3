"""Fixtures shared by the packaging tests: one wheel and one install per run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.installs import shared_install


@pytest.fixture(scope="session")
def wheel_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The distribution as a wheel lays it out (no editable import hook), on ``PYTHONPATH``."""
    return shared_install(tmp_path_factory)
