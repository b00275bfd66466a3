"""Installing verdict-contract adds nothing to an integrator's pytest runs but its fixtures.

The throwaway project has its own top-level ``contract_tests`` and ``mockserver`` packages, its
own ``--base-url``, ``--api-key``, ``--session-id`` and ``--request-timeout`` options, its own
function-scoped ``base_url`` fixture and its own ``clause`` marker, all names the contract suite
uses. It runs with our plugin from the editable install (the dev venv) and from a wheel, serially
and under ``pytest -n 2``; ``pytest --help`` shows only ``--verdict-seed`` of ours.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.installs import ROOT

CONFTEST = """
import pytest


def pytest_addoption(parser):
    parser.addoption("--base-url", default="http://own.invalid")
    parser.addoption("--api-key", default="own-key")
    parser.addoption("--session-id", default="own-session")
    parser.addoption("--request-timeout", type=float, default=2.0)


def pytest_configure(config):
    config.addinivalue_line("markers", "clause(text): the integrator's own requirement ids")


@pytest.fixture
def base_url(pytestconfig):
    return pytestconfig.getoption("base_url")


@pytest.fixture
def own_options(pytestconfig):
    names = ("base_url", "api_key", "session_id", "request_timeout")
    return {name: pytestconfig.getoption(name) for name in names}
"""

SERVICE_TESTS = """
import httpx
import pytest

import contract_tests
import mockserver
import verdict_contract


def test_own_packages_and_options(own_options, base_url):
    assert contract_tests.OWNER == mockserver.OWNER == "integrator"
    assert own_options == {
        "base_url": "https://own.example", "api_key": "k-1", "session_id": "s-1",
        "request_timeout": 3.0,
    }
    assert base_url == "https://own.example"
    print("LOADED FROM", verdict_contract.__file__)


@pytest.mark.clause("REQ-7")
def test_own_clause_marker(base_url):
    assert base_url.startswith("https://")


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

OWN_OPTIONS = ["--base-url=https://own.example", "--api-key=k-1", "--session-id=s-1"]
OWN_OPTIONS += ["--request-timeout=3", "--strict-markers"]
SUITE_TRACES = ("Explain API contract", "no verdict body was verified", "spec clause")


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
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _passes_alone(result: subprocess.CompletedProcess[str], where: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "4 passed" in result.stdout, output
    assert f"LOADED FROM {where}" in result.stdout or "-n" in result.args, output
    assert [trace for trace in SUITE_TRACES if trace in output] == []


def test_an_integrator_project_runs_as_before_with_the_editable_install(tmp_path: Path) -> None:
    project = _make_project(tmp_path / "project")
    _passes_alone(_run(project, "-s", *OWN_OPTIONS), str(ROOT))


def test_an_integrator_project_runs_as_before_under_xdist(tmp_path: Path) -> None:
    project = _make_project(tmp_path / "project")
    _passes_alone(_run(project, "-n", "2", *OWN_OPTIONS), str(ROOT))


def test_an_integrator_project_runs_as_before_with_a_wheel_install(
    tmp_path: Path, wheel_install: Path
) -> None:
    project = _make_project(tmp_path / "project")
    result = _run(project, "-s", *OWN_OPTIONS, pythonpath=str(wheel_install))
    _passes_alone(result, str(wheel_install))
    result = _run(project, "-n", "2", *OWN_OPTIONS, pythonpath=str(wheel_install))
    _passes_alone(result, str(wheel_install))
    # Nothing of ours sits at the top level where the integrator's packages live.
    top_level = {p.name for p in wheel_install.iterdir() if not p.name.endswith("-info")}
    assert top_level - {"bin"} == {"verdict_contract"}  # bin: the console scripts


def test_pytest_help_in_an_integrator_project_shows_only_the_plugins_own_options(
    tmp_path: Path, wheel_install: Path
) -> None:
    project = _make_project(tmp_path / "project")
    result = _run(project, "--help", pythonpath=str(wheel_install))
    assert result.returncode == 0, result.stdout + result.stderr
    ours = sorted(set(re.findall(r"--verdict-[a-z-]+", result.stdout)))
    # The seed, and the consumer coverage report (docs/plugin.md); none of the suite's options.
    assert ours == [
        "--verdict-coverage",
        "--verdict-coverage-json",
        "--verdict-require-coverage",
        "--verdict-require-coverage-per",
        "--verdict-seed",
    ]
    assert "verdict_seed" in result.stdout
    assert "the Explain API under test" not in result.stdout  # the suite's --base-url
    plugins = _run(project, "--co", "-q", "--trace-config", pythonpath=str(wheel_install))
    assert "verdict_contract.plugin" in plugins.stdout
    assert "verdict_contract.suite" not in plugins.stdout
    assert "contract_tests.hooks" not in plugins.stdout


def test_the_suite_runs_from_the_integrators_venv_where_asked(
    tmp_path: Path, wheel_install: Path
) -> None:
    project = _make_project(tmp_path / "project")
    (project / "conftest.py").unlink()  # the suite's own --base-url would meet theirs here
    result = _run(
        project,
        "--pyargs",
        "verdict_contract.contract_tests",
        "-q",
        "-x",
        "-k",
        "clause_9",
        pythonpath=str(wheel_install),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Explain API contract" in result.stdout


STACK_TESTS = """
import anyio
import httpx
import httpx2
import pytest


@pytest.mark.verdict_mock(base_url="https://api.example/v2")
def test_httpx2_at_our_own_host(verdict_respx):
    n = verdict_respx.mint(verdict="refused", script=[503])
    with httpx2.Client(base_url="https://api.example/v2", headers=verdict_respx.headers) as api:
        assert api.get("/e", params={"n": n}).status_code == 503
        assert api.get("/e", params={"n": n}).json()["verdict"] == "refused"
        assert api.get("/e", params={"n": n}).status_code == 200  # no cache: a refetch


def test_an_async_client_under_trio(verdict_respx):
    n = verdict_respx.mint(verdict="insufficient", schema=8, script=[{"delay_ms": 10}])

    async def fetch():
        async with httpx.AsyncClient(headers=verdict_respx.headers) as client:
            return (await client.get(verdict_respx.url(n))).json()

    assert anyio.run(fetch, backend="trio")["schema"] == 8


def test_a_cancelled_call(verdict_respx):
    n = verdict_respx.mint(script=[{"delay_ms": 60000}])

    async def give_up():
        async with httpx2.AsyncClient(headers=verdict_respx.headers, timeout=None) as client:
            with anyio.fail_after(0.2):
                await client.get(verdict_respx.url(n))

    with pytest.raises(TimeoutError):
        anyio.run(give_up, backend="trio")
    assert [e.fault for e in verdict_respx.journal] == ["cancelled"]
"""


def _coverage(project: Path, wheel: Path, *args: str) -> tuple[str, dict[str, Any]]:
    result = _run(
        project,
        "test_stack.py",
        "--verdict-coverage",
        "--verdict-coverage-json=cov.json",
        *args,
        pythonpath=str(wheel),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout, result.stdout
    data: dict[str, Any] = json.loads((project / "cov.json").read_text())
    return result.stdout, data


def _sets(data: dict[str, Any]) -> tuple[object, ...]:
    met = {b: (m["exercised"], tuple(m["tests"])) for b, m in data["behaviours"].items()}
    habits = sorted((h["id"], h["test"]) for h in data["habits"])
    return met, tuple(data["never"]), tuple(habits)


def test_an_integrator_project_from_a_wheel_gets_coverage_on_a_2026_stack(
    tmp_path: Path, wheel_install: Path
) -> None:
    project = _make_project(tmp_path / "project")
    (project / "test_stack.py").write_text(STACK_TESTS)
    serial, alone = _coverage(project, wheel_install)
    parallel, spread = _coverage(project, wheel_install, "-n", "2")
    assert _sets(alone) == _sets(spread)  # the same sets, serially and from two workers
    for output in (serial, parallel):
        assert "verdict coverage" in output
        assert "5 of 21 behaviours of the spec served" in output
        assert "never served (16): verdict.contradicted.conclusive" in output
        assert "refetch  test_stack.py::test_httpx2_at_our_own_host" in output
    met = {b for b, m in alone["behaviours"].items() if m["exercised"]}
    assert met == {
        "verdict.refused.inconclusive",
        "verdict.insufficient",
        "status.5xx",
        "slow",
        "schema.unexpected",
    }
    failed = _run(
        project,
        "test_stack.py",
        "--verdict-require-coverage=status.5xx,fault.malformed",
        pythonpath=str(wheel_install),
    )
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "required behaviour(s) never served: fault.malformed" in failed.stdout
