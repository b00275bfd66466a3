"""Root conftest: without the test install, one line; the project root on ``sys.path``; plugins.

In this repository the suite's plugin is always on (``tests/`` runs the suite's own checks and
uses its markers); in an integrator's project it loads only where the suite runs.
"""

from __future__ import annotations

import compileall
import gc
import importlib.util
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from execnet import XSpec

TEST_COMMAND = (
    "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' "
    "--config-settings editable_mode=strict && .venv/bin/pytest -n auto"
)
"""The README's second command: what installs everything the tests need, then runs them."""

TEST_MODULES = (
    "verdict_contract",
    # the test extra (tests/test_first_run.py checks that each of its distributions is here)
    "h11",
    "hiredis",
    "openapi_spec_validator",
    "openapi_core",
    "schemathesis",
    "xdist",
    "setuptools",
    "importlinter",
    "vulture",
    "ruff",
    "mypy",
    "selenium",
    "pytest_httpserver",
    "pyright",
    "trustme",
    "httpx2",
    "trio",
    # the extras it pulls: [server], [redis], [hypothesis], [faker]
    *(() if sys.platform == "win32" else ("uvloop",)),
    "redis",
    "hypothesis",
    "faker",
)
"""What the tests import beyond pytest: the package and its test install."""


def missing_test_modules() -> list[str]:
    """Which of :data:`TEST_MODULES` this Python cannot import."""
    return [name for name in TEST_MODULES if importlib.util.find_spec(name) is None]


# Before anything imports them: without the test install, one line saying what to run (not a
# traceback ending in "No module named 'verdict_contract'", nor "unrecognized arguments: -n").
if _missing := missing_test_modules():
    print(
        f"ERROR: this Python ({sys.executable}) lacks the test install ({', '.join(_missing)}): "
        f"run the README's second command: {TEST_COMMAND}",
        file=sys.stderr,
    )
    raise SystemExit(4)  # pytest's exit code for a usage error; SystemExit, so pytest adds nothing

BYTECODE_OFF = bool(os.environ.pop("PYTHONDONTWRITEBYTECODE", None)) or sys.dont_write_bytecode
"""Whether Python was asked to write no bytecode (``PYTHONDONTWRITEBYTECODE``, as some
containers set, or ``python -B``): this run's processes write it all the same (``__pycache__``,
git-ignored), or each of the hundreds of processes the tests start compiles the package again."""

if BYTECODE_OFF:
    sys.dont_write_bytecode = False  # this process's later imports (the tests' modules) too

CHILD_PLUGINS_OFF = (
    "faker",
    "hypothesispytest",
    "respx",
    "anyio",
    "pytest_httpserver",
    "schemathesis",
)
"""Plugins of the test install that no pytest run started by a test uses: each imports its
library at every start of the hundreds of pytest runs the tests start (pytester's too:
``tests/conftest.py``). Runs that stand for an integrator's own (tests/test_integrator_project.py)
keep them, as theirs would, and so do this run's own xdist workers (the property tests use
hypothesis')."""

OUTER_ADDOPTS = os.environ.get("PYTEST_ADDOPTS", "")
"""``PYTEST_ADDOPTS`` as this run was given it."""

os.environ["PYTEST_ADDOPTS"] = " ".join(
    filter(None, [OUTER_ADDOPTS, *(f"-p no:{name}" for name in CHILD_PLUGINS_OFF)])
)

pytest_plugins = ["pytester", "verdict_contract.suite"]


WORKERS_PER_CORE = 2
"""``-n auto`` starts this many xdist workers per core: most long tests wait on a process they
started (a pytest run, the mock, pip, a browser, redis-server), and a second worker uses the
core meanwhile."""


@pytest.hookimpl(optionalhook=True)  # xdist's hooks: a run with `-p no:xdist` has none
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: :data:`WORKERS_PER_CORE` per core this process may run on; ``-n logical``
    and xdist's own ``PYTEST_XDIST_AUTO_NUM_WORKERS`` as xdist reads them."""
    if config.option.numprocesses != "auto" or os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return WORKERS_PER_CORE * (cores or 1)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(specs: Sequence[XSpec]) -> None:
    """This run's own workers get the outer ``PYTEST_ADDOPTS``, with every plugin of the run;
    the package is compiled first (:func:`compile_package`)."""
    for spec in specs:
        spec.env["PYTEST_ADDOPTS"] = OUTER_ADDOPTS
    compile_package()


def compile_package() -> None:
    """Write the package's bytecode where it is imported from, once, before the workers start:
    on a fresh checkout the first processes the tests start would each compile it at once."""
    spec = importlib.util.find_spec("verdict_contract")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        compileall.compile_dir(folder, quiet=1)


GC_THRESHOLD = (10_000, 50, 50)
"""The collector's thresholds once the tests are collected (Python's default: 700, 10, 10)."""


def pytest_collection_finish(session: pytest.Session) -> None:
    """Collect garbage less often in a process that holds every collected test: they are frozen
    out of the collector's scans (``gc.freeze``), which otherwise walked them all again hundreds
    of times a run. A test that needs garbage gone still calls ``gc.collect()``."""
    # hypothesis, on its first import, registers the PRNGs of the libraries it finds (trio's)
    # after checking with gc.get_referrers that something holds each, and that check does not
    # see frozen holders: it is imported first (the property tests import it in any case).
    import hypothesis  # noqa: F401

    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)
