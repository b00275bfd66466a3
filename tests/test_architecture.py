"""ARCHITECTURE.md holds: import-linter's contracts are kept, and the map matches the tree.

The repository maps its folders under one import package (``pyproject.toml``), which an
editable install serves through an import hook that import-linter cannot walk. So the test
assembles the package as a wheel lays it out (from the same mapping) and lints that copy.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def _folder(package: str) -> Path:
    """Where a package's files are in the repository, by pyproject's package-dir mapping."""
    mapped = max(
        (p for p in SETUPTOOLS["package-dir"] if f"{package}.".startswith(f"{p}.")), key=len
    )
    rest = package.removeprefix(mapped).strip(".").split(".")
    return ROOT.joinpath(SETUPTOOLS["package-dir"][mapped], *filter(None, rest))


LINT_IMPORTS = [
    sys.executable,
    "-c",
    "import sys; from importlinter.cli import lint_imports_command as c; c(sys.argv[1:])",
    "--config",
    str(ROOT / "pyproject.toml"),
    "--no-cache",
]

PACKAGES: dict[str, Path] = {package: _folder(package) for package in SETUPTOOLS["packages"]}


def _modules() -> dict[str, Path]:
    """Every module of the distribution, by its path in the repository."""
    return {
        path.relative_to(ROOT).as_posix(): path
        for folder in PACKAGES.values()
        for path in sorted(folder.glob("*.py"))
    }


def test_every_module_is_on_the_map_and_the_map_names_no_missing_module() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([\w/]+\.py)` \|", text, flags=re.MULTILINE))
    modules = set(_modules())
    assert not modules - listed, f"modules missing from ARCHITECTURE.md: {modules - listed}"
    assert not listed - modules, (
        f"ARCHITECTURE.md lists modules that do not exist: {listed - modules}"
    )


@pytest.fixture(scope="module")
def assembled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package as a wheel lays it out, built from pyproject's package-dir mapping."""
    site = tmp_path_factory.mktemp("site")
    for package, folder in sorted(PACKAGES.items()):
        target = site.joinpath(*package.split("."))
        target.mkdir(parents=True, exist_ok=True)
        for path in folder.glob("*.py"):
            shutil.copy(path, target / path.name)
    return site


def _lint_imports(site: Path) -> subprocess.CompletedProcess[str]:
    """Run import-linter where only ``site``'s copy is importable as ``verdict_contract``."""
    return subprocess.run(
        LINT_IMPORTS,
        cwd=site,
        env={"PYTHONPATH": str(site), "PATH": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_import_linter_contracts_are_kept(assembled: Path) -> None:
    result = _lint_imports(assembled)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


def test_the_linter_would_see_a_broken_layer(assembled: Path, tmp_path: Path) -> None:
    """The check can fail: the core importing the mock breaks the layers contract."""
    broken = tmp_path / "site"
    shutil.copytree(assembled, broken)
    spec = broken / "verdict_contract" / "core" / "spec.py"
    spec.write_text(spec.read_text() + "\nimport verdict_contract.mockserver.app\n")
    result = _lint_imports(broken)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout


@pytest.mark.parametrize(
    "layer",
    [
        "verdict_contract.core.validator",
        "verdict_contract.mockserver",
        "verdict_contract.contract_tests.hooks",
    ],
)
def test_each_layer_imports_alone(layer: str) -> None:
    code = f"import {layer}, sys; print(sorted(m for m in sys.modules if 'verdict' in m))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT.parent
    )
    loaded = result.stdout
    if layer.startswith("verdict_contract.core"):
        assert "mockserver" not in loaded
        assert "contract_tests" not in loaded
    if "mockserver" in layer:
        assert "contract_tests" not in loaded
    if "contract_tests" in layer:
        assert "mockserver" not in loaded


def test_no_dead_code() -> None:
    """vulture finds no unused import, variable or unreachable code in the package."""
    folders = sorted({str(folder) for folder in PACKAGES.values()})
    result = subprocess.run(
        [sys.executable, "-m", "vulture", *folders, "--min-confidence", "70"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
