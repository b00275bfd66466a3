"""``pytest`` before the README's second command: one line saying what to run, no traceback."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from conftest import TEST_COMMAND, TEST_MODULES, missing_test_modules
from tests.installs import ROOT


def _pytest_lacking(modules: tuple[str, ...], *args: str) -> subprocess.CompletedProcess[str]:
    """``pytest ARGS`` in the checkout, in a Python where ``modules`` cannot be imported.

    Without autoloaded plugins, as in a venv that lacks them (an installed xdist or
    hypothesis would load its plugin, which imports what is blocked here).
    """
    code = (
        "import sys\n"
        f"for name in {modules!r}:\n"
        "    sys.modules[name] = None\n"
        "import pytest\n"
        f"sys.exit(pytest.main({list(args)!r}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTEST_ADDOPTS": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _the_one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 4, result.stdout + result.stderr
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("ERROR: ")
    assert line.endswith(f"run the README's second command: {TEST_COMMAND}")
    return line


def test_pytest_before_any_install_says_what_to_run() -> None:
    line = _the_one_line(_pytest_lacking(("verdict_contract",)))
    assert "lacks the test install (verdict_contract)" in line


def test_pytest_n_auto_after_the_first_command_only_says_what_to_run() -> None:
    """The first command installs the package, not xdist, hypothesis or trustme."""
    line = _the_one_line(_pytest_lacking(("xdist", "hypothesis", "trustme"), "-n", "auto"))
    assert "lacks the test install (xdist, trustme, hypothesis)" in line
    assert "unrecognized arguments" not in line


def test_with_the_test_install_nothing_is_missing() -> None:
    assert missing_test_modules() == []


def test_the_message_names_the_readmes_second_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"```bash\n{TEST_COMMAND}\n```" in readme


def _test_install() -> list[Requirement]:
    """The test extra's requirements for this platform, the package's own extras expanded."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]
    pending, found = list(extras["test"]), []
    while pending:
        requirement = Requirement(pending.pop(0))
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        if canonicalize_name(requirement.name) == "verdict-contract":
            pending += [text for extra in sorted(requirement.extras) for text in extras[extra]]
        else:
            found.append(requirement)
    return found


def test_the_check_names_a_module_of_each_distribution_of_the_test_install() -> None:
    """A test dependency added to pyproject.toml without its module in conftest.py fails here."""
    provided: dict[str, set[str]] = {}
    for module, distributions in importlib.metadata.packages_distributions().items():
        for distribution in distributions:
            provided.setdefault(canonicalize_name(distribution), set()).add(module)
    requirements = _test_install()
    assert {"pytest-xdist", "hypothesis", "trustme", "redis"} <= {
        canonicalize_name(r.name) for r in requirements
    }
    for requirement in requirements:
        name = canonicalize_name(requirement.name)
        if name.startswith("types-"):  # stubs: nothing to import, mypy reads them
            continue
        assert provided.get(name, set()) & set(TEST_MODULES), (
            f"{requirement.name} is in the test install: add its module "
            f"({', '.join(sorted(provided.get(name, ())))}) to conftest.py's TEST_MODULES"
        )
