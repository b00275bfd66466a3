"""The suite's plugin loads where the suite runs, and only there; ``--base-url`` either way.

``--base-url`` is pytest-base-url's option when that plugin is installed (it is not a dependency:
it would add the option to every pytest run of an integrator's venv) and the suite's own otherwise.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.contract_tests.servers import CONFORMING, KEY, serve
from tests.installs import shared_requirement

SUITE = ["--pyargs", "verdict_contract.contract_tests", "-p", "no:cacheprovider"]
ONE_CHECK = ["-q", "-k", "test_schema_version"]


def _pytest(where: Path, *args: str, pythonpath: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": pythonpath, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTEST_BASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_suites_options_exist_where_it_runs(tmp_path: Path) -> None:
    help_text = _pytest(tmp_path, *SUITE, "--help").stdout
    assert "--verdict-api-key" in help_text
    assert "--base-url=URL" in help_text


def test_an_explicit_p_loads_the_suites_plugin_anywhere(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    plain = _pytest(tmp_path, "--help").stdout
    assert "--verdict-api-key" not in plain
    explicit = _pytest(tmp_path, "-p", "verdict_contract.suite", "--help").stdout
    assert "--verdict-api-key" in explicit


def test_the_variable_gives_the_url_to_the_suites_own_option(tmp_path: Path) -> None:
    with serve(CONFORMING["extra fields"]) as running:
        env = {**os.environ, "PYTEST_BASE_URL": running.base_url, "VERDICT_API_KEY": KEY}
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                *SUITE,
                "--verdict-session-id",
                running.session_ids[0],
                *ONE_CHECK,
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(rf"target:\s+{re.escape(running.base_url)}\n", result.stdout)


@pytest.fixture(scope="module")
def with_pytest_base_url(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pytest-base-url installed beside us, as a QA venv with pytest-selenium would have it."""
    return shared_requirement(tmp_path_factory, "pytest-base-url>=2.1")


EXPLICIT = ["-p", "verdict_contract.suite"]
"""How ``verdict-contract check`` loads the suite: before pytest loads the installed plugins."""


@pytest.mark.parametrize(
    "block",
    [[], ["-p", "no:base_url"], EXPLICIT, [*EXPLICIT, "-p", "no:base_url"]],
    ids=["its option", "blocked", "-p suite, its option", "-p suite, blocked"],
)
def test_the_suite_works_with_pytest_base_url_installed_or_blocked(
    tmp_path: Path, with_pytest_base_url: Path, block: list[str]
) -> None:
    with serve(CONFORMING["extra fields"]) as running:
        result = _pytest(
            tmp_path,
            *SUITE,
            *block,
            "--base-url",
            running.base_url,
            "--verdict-api-key",
            KEY,
            "--verdict-session-id",
            running.session_ids[0],
            *ONE_CHECK,
            pythonpath=str(with_pytest_base_url),
        )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(rf"target:\s+{re.escape(running.base_url)}\n", result.stdout)
    help_text = _pytest(tmp_path, *SUITE, *block, "--help", pythonpath=str(with_pytest_base_url))
    owner = "the Explain API under test" if "no:base_url" in block else "--verify-base-url"
    assert owner in help_text.stdout


def test_check_runs_only_the_suite_from_a_project_with_its_own_conftest(tmp_path: Path) -> None:
    """An integrator's conftest.py (its own ``--base-url``, a failing hook) stays out of check."""
    (tmp_path / "conftest.py").write_text(
        "def pytest_addoption(parser):\n"
        "    parser.addoption('--base-url', help='our own')\n"
        "\n"
        "def pytest_collection_modifyitems(items):\n"
        "    raise RuntimeError('the project conftest ran')\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text("raise RuntimeError('tests/conftest ran')\n")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTEST_BASE_URL", None)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "verdict_contract.cli",
            "check",
            "-p",
            "no:cacheprovider",
            *ONE_CHECK,
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
