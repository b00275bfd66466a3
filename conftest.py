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
    # the extras it pulls: [server], [redis], [hypothesis]
    "waitress",
    *(() if sys.platform == "win32" else ("uvloop",)),
    "redis",
    "hypothesis",
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
containers set, or ``python -B``): this run's Python processes write it all the same, where
Python keeps it (``__pycache__`` folders, which git ignores).

Without it, each of the hundreds of Python processes the tests start (pytest runs, the mock, the
CLI, their xdist workers) compiles every module of the package and of the tests it imports from
source, and each pytest run rewrites the asserts of the suite again: about 40 s of CPU in a run
of 250 s. (Installed packages keep the bytecode pip wrote at install.) A ``PYTHONPYCACHEPREFIX``
would keep it all out of the tree, but Python then ignores that bytecode of the installed
packages and compiles them all again (70 MB on a fresh run).
"""

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
"""Plugins of the test install that no pytest run started by a test uses, and their cost.

Each imports its library at every pytest start: faker's (its `faker` fixture) about 0.6 s of CPU,
hypothesis' 0.55 s, respx's and anyio's together 0.3 s (httpx, httpcore, trio),
pytest-httpserver's 0.02 s (werkzeug's server), schemathesis' 0.55 s (its CLI is what
tests/test_openapi_mock.py runs); an empty run takes 0.2 s without them, 1.6 s
with them, in each of the hundreds of pytest runs the tests start (pytester's too:
``tests/conftest.py``). Runs that stand for an integrator's own
(tests/test_integrator_project.py) drop this and keep them, as theirs would. This run's own
xdist workers keep them (``pytest_xdist_setupnodes`` below): the property tests use hypothesis'.
"""

OUTER_ADDOPTS = os.environ.get("PYTEST_ADDOPTS", "")
"""``PYTEST_ADDOPTS`` as this run was given it."""

os.environ["PYTEST_ADDOPTS"] = " ".join(
    filter(None, [OUTER_ADDOPTS, *(f"-p no:{name}" for name in CHILD_PLUGINS_OFF)])
)

pytest_plugins = ["pytester", "verdict_contract.suite"]


WORKERS_PER_CORE = 2
"""``-n auto`` starts this many xdist workers per core. Most of the run's longest tests wait on
another process (a pytest run, the mock, pip, a browser, a redis-server) or on the network
more than they compute: with one worker per core, a core idles while its worker waits. Two
per core fill those waits with other tests (measured on 2 cores: 198 s with 2 workers, 139 s
with 4; the CPU of the run grew 8 %, each worker collecting the tests once)."""


# tryfirst, as xdist's own (which turns an unset --dist into "load"): among hooks of one kind the
# last registered runs first, and a conftest registers after the plugins installed
# (tests/test_test_run.py runs it through xdist).
@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """``-n`` without ``--dist`` schedules by work stealing: a worker out of tests takes half of
    what another has left, so no worker runs the last long tests alone while the others idle.

    xdist's default (``load``) sends each worker a block of tests and more only while its tests
    are short: the worker given the first long ones kept getting the next (a suite run, pip, mypy),
    and ran the cancel tests (27 s of waiting on signals) alone at the end while the other three
    idled: 117 to 143 s on 2 cores against 114 s with work stealing, run after run. An explicit
    ``--dist`` wins.

    Work stealing first gives each worker a contiguous quarter of the run, so every module of
    ``LONGEST_FIRST`` (``tests/conftest.py``) starts on the first worker; the others, done with
    their short tests, take the long ones from the end of its queue.
    """
    option = config.option
    if getattr(option, "numprocesses", None) and getattr(option, "dist", None) == "no":
        option.dist = "worksteal"


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
    """Write the package's bytecode where it is imported from, once, before the workers start.

    On a fresh checkout none is there yet, and the dozens of Python processes the first tests
    start at once (pytest runs, the mock, pip) each compiled the whole package: about 30 s of
    CPU of a first run (128 s and 243 s of CPU against 114 s and 211 s warm, 2 cores). Here it
    costs about 2 s once, and a stat per module when the bytecode is there.
    """
    spec = importlib.util.find_spec("verdict_contract")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        compileall.compile_dir(folder, quiet=1)


GC_THRESHOLD = (10_000, 50, 50)
"""The collector's thresholds once the tests are collected (Python's default: 700, 10, 10)."""


def pytest_collection_finish(session: pytest.Session) -> None:
    """Collect garbage less often in a process that holds every collected test.

    The tests, their modules and the plugins' state, all alive until the run ends, are frozen
    out of the collector's scans (``gc.freeze``), and the collector runs less often
    (:data:`GC_THRESHOLD`): each full collection walked every one of them again, hundreds of
    times a run, in each worker and in the pytest runs tests start in it. Measured in turn on
    2 cores, warm: 107 s and 110 s (185 and 194 s of CPU) against 120.5 s and 119.3 s (219 and
    214 s of CPU) with Python's defaults; the thresholds alone gained nothing (124.6 s). A test
    that needs garbage gone still calls ``gc.collect()``, which frees all that is not frozen.
    """
    # hypothesis, on its first import, registers the PRNGs of the libraries it finds (trio's)
    # after checking with gc.get_referrers that something holds each, and that check does not
    # see frozen holders: it is imported first (the property tests import it in any case).
    import hypothesis  # noqa: F401

    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)
