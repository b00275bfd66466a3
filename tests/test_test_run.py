"""The test run itself: spread over enough workers that steal work from each other, and the
pytest runs tests start are light.

The plugins none of those runs uses are left out of them (the root conftest), not out of this run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import conftest as root


def test_this_run_keeps_every_plugin(pytestconfig: pytest.Config) -> None:
    """Under xdist too: the workers get the run's own ``PYTEST_ADDOPTS``, not the children's."""
    for name in ("hypothesispytest", "respx", "anyio", "pytest_httpserver"):
        assert pytestconfig.pluginmanager.has_plugin(name), name


def test_a_pytest_run_a_test_starts_leaves_the_unused_plugins_out(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import sys

        def test_light(pytestconfig):
            for name in ("faker", "hypothesispytest", "respx", "anyio", "pytest_httpserver"):
                assert not pytestconfig.pluginmanager.has_plugin(name), name
            assert not {"faker", "hypothesis"} & set(sys.modules)
            assert pytestconfig.pluginmanager.has_plugin("verdict_contract")
        """
    )
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_auto_starts_two_workers_per_core(
    pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.setattr(pytestconfig.option, "numprocesses", "auto")
    assert root.pytest_xdist_auto_num_workers(pytestconfig) == 2 * (cores or 1)
    # xdist's own meanings stay: -n logical, and its variable
    monkeypatch.setattr(pytestconfig.option, "numprocesses", "logical")
    assert root.pytest_xdist_auto_num_workers(pytestconfig) is None
    monkeypatch.setattr(pytestconfig.option, "numprocesses", "auto")
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "3")
    assert root.pytest_xdist_auto_num_workers(pytestconfig) is None


def test_the_processes_a_test_starts_write_their_bytecode() -> None:
    """Even where the environment said not to (``PYTHONDONTWRITEBYTECODE``): see the root
    conftest's ``BYTECODE_OFF``."""
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ
    assert not sys.dont_write_bytecode
    child = subprocess.run(
        [sys.executable, "-c", "import sys; print(sys.dont_write_bytecode)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout.strip() == "False"


def test_the_package_is_compiled_where_it_is_imported_from() -> None:
    import importlib.util

    import verdict_contract.core.rates as module

    cached = Path(importlib.util.cache_from_source(module.__file__))
    cached.unlink(missing_ok=True)  # another worker importing it meanwhile writes it again
    root.compile_package()
    assert cached.is_file()


def test_this_run_collects_garbage_less_often_once_its_tests_are_collected() -> None:
    """The root conftest's ``pytest_collection_finish``: what was collected is frozen out of
    the collector's scans, and the collector runs less often."""
    import gc

    assert gc.get_threshold() == root.GC_THRESHOLD
    assert gc.get_freeze_count() > 10_000  # the collected tests, their modules, the plugins
