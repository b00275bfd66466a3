"""Root conftest: without the test install, one line; the project root on ``sys.path``; plugins.

In this repository the suite's plugin is always on (``tests/`` runs the suite's own checks and
uses its markers); in an integrator's project it loads only where the suite runs.
"""

from __future__ import annotations

import importlib.util
import os
import sys

TEST_COMMAND = (
    "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' "
    "--config-settings editable_mode=strict && .venv/bin/pytest -n auto"
)
"""The README's second command: what installs everything the tests need, then runs them."""

TEST_MODULES = (
    "verdict_contract",
    # the test extra (tests/test_first_run.py checks that each of its distributions is here)
    "h11",
    "openapi_spec_validator",
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

# faker's own pytest plugin (its `faker` fixture, unused here) imports faker at every pytest start:
# about 0.6 s of CPU in each of the hundreds of pytest runs the tests start. Runs that stand for an
# integrator's own (tests/test_integrator_project.py) drop this and keep it, as theirs would.
os.environ["PYTEST_ADDOPTS"] = " ".join(
    filter(None, [os.environ.get("PYTEST_ADDOPTS", ""), "-p no:faker"])
)

pytest_plugins = ["pytester", "verdict_contract.suite"]
