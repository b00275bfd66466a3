"""The plugin drops into an integrator's project that uses the same common names as we do.

The throwaway project has its own top-level ``contract_tests`` and ``mockserver`` packages and
its own ``--api-key``, ``--session-id`` and ``--request-timeout`` options; it runs with our
plugin loaded from the editable install (the dev venv) and from a wheel-style install.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.installs import ROOT, install

CONFTEST = """
import pytest


def pytest_addoption(parser):
    parser.addoption("--api-key", default="own-key")
    parser.addoption("--session-id", default="own-session")
    parser.addoption("--request-timeout", type=float, default=2.0)


@pytest.fixture
def own_options(pytestconfig):
    names = ("api_key", "session_id", "request_timeout")
    return {name: pytestconfig.getoption(name) for name in names}
"""

SERVICE_TESTS = """
import httpx
import pytest

import contract_tests
import mockserver
import verdict_contract


def test_own_packages_and_options(own_options):
    assert contract_tests.OWNER == mockserver.OWNER == "integrator"
    assert own_options == {"api_key": "k-1", "session_id": "s-1", "request_timeout": 3.0}
    print("LOADED FROM", verdict_contract.__file__)


@pytest.mark.verdict_mock(rate_limit="1/60")
def test_our_fixtures_next_to_theirs(verdict_mock, own_options):
    n = verdict_mock.mint(verdict="refused")
    with httpx.Client(headers=verdict_mock.headers, timeout=own_options["request_timeout"]) as c:
        assert [c.get(verdict_mock.url(n)).status_code for _ in range(2)] == [200, 429]
    verdict_mock.assert_called(n, times=2)


def test_respx_too(verdict_respx):
    n = verdict_respx.mint(verdict="contradicted")
    body = httpx.get(verdict_respx.url(n), headers=verdict_respx.headers).json()
    assert body["conclusive"] is True
"""

OWN_OPTIONS = ["--api-key=k-1", "--session-id=s-1", "--request-timeout=3"]


def _make_project(where: Path) -> Path:
    where.mkdir()
    for package in ("contract_tests", "mockserver"):
        (where / package).mkdir()
        (where / package / "__init__.py").write_text('OWNER = "integrator"\n')
    (where / "plugin.py").write_text("# the integrator's own module named plugin\n")
    (where / "conftest.py").write_text(CONFTEST)
    (where / "test_service.py").write_text(SERVICE_TESTS)
    return where


def _run(project: Path, *args: str, pythonpath: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": pythonpath, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", *OWN_OPTIONS, *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_integrator_project_with_the_same_names_runs_with_the_editable_install(
    tmp_path: Path,
) -> None:
    project = _make_project(tmp_path / "project")
    result = _run(project, "-p", "no:verdict_contract_suite")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout
    assert f"LOADED FROM {ROOT}" in result.stdout


def test_the_suites_plugin_also_leaves_the_integrators_options_alone(tmp_path: Path) -> None:
    project = _make_project(tmp_path / "project")
    result = _run(project)
    assert "already added" not in result.stderr
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def wheel_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The distribution installed as a wheel lays it out (no editable import hook)."""
    return install(ROOT, tmp_path_factory.mktemp("site"))


def test_an_integrator_project_with_the_same_names_runs_with_a_wheel_install(
    tmp_path: Path, wheel_install: Path
) -> None:
    project = _make_project(tmp_path / "project")
    result = _run(project, "-p", "no:verdict_contract_suite", pythonpath=str(wheel_install))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout
    assert f"LOADED FROM {wheel_install}" in result.stdout
    # Nothing of ours sits at the top level where the integrator's packages live.
    top_level = {p.name for p in wheel_install.iterdir() if not p.name.endswith("-info")}
    assert top_level - {"bin"} == {"verdict_contract"}  # bin: the console scripts
