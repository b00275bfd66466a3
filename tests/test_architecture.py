"""ARCHITECTURE.md holds: the layers are kept, imports resolve in the checkout, the map is true.

The repository maps its folders under one import package (``pyproject.toml``'s package-dir).
import-linter needs the package laid out as a wheel lays it out, so the test assembles that copy
(from the same mapping) and lints it. A reader needs no install: inside a mapped folder every
import of the project is relative, so it names a file by path; across folders an import names
the package, and the mapping table (four lines) says which folder that is.
"""

from __future__ import annotations

import ast
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


def _module_name(path: Path) -> str:
    """The import name of a module of the distribution, from its path."""
    folder = path.parent
    package = next(p for p, f in PACKAGES.items() if f == folder)
    return package if path.stem == "__init__" else f"{package}.{path.stem}"


def _resolves(name: str) -> bool:
    """Whether an absolute import name is a module or package of the repository (by mapping)."""
    if name in PACKAGES:
        return True
    parent, _, leaf = name.rpartition(".")
    return parent in PACKAGES and (PACKAGES[parent] / f"{leaf}.py").is_file()


def _mapped_root(package: str) -> str:
    """The mapped folder's package a package belongs to (the longest package-dir prefix)."""
    mapped: str = max(
        (p for p in SETUPTOOLS["package-dir"] if f"{package}.".startswith(f"{p}.")), key=len
    )
    return mapped


def _import_problems(path: Path, source: str | None = None) -> list[str]:
    """What in one file's imports (or ``source``, as if it were that file's) a reader of the
    checkout could not follow by path."""
    module = _module_name(path)
    package = module if path.stem == "__init__" else module.rpartition(".")[0]
    own_root = _mapped_root(package)
    # pytest imports a conftest.py by its path, under a name of its own (rootdir-based, and no
    # hook names it otherwise): it imports the package by name, so that it meets the one copy of
    # every module (a relative import would load a second). The suite's test modules are imported
    # by their name in the package (contract_tests/hooks.py), and import relatively as the rest.
    conftest = path.name == "conftest.py"
    problems = []
    if source is None:
        source = path.read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.level and conftest:
            problems.append(f"line {node.lineno}: a conftest.py imports the package by name")
            continue
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            stem = ".".join(base + ([node.module] if node.module else []))
            if _mapped_root(stem) != own_root:
                problems.append(f"line {node.lineno}: a relative import leaves its folder")
                continue
            targets = [stem] if node.module else [f"{stem}.{a.name}" for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            targets = [node.module]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        for target in targets:
            if target.split(".")[0] != "verdict_contract":
                continue
            if not _resolves(target):
                problems.append(f"line {node.lineno}: {target} is no file of the checkout")
            elif (
                not conftest
                and not (isinstance(node, ast.ImportFrom) and node.level)
                and _mapped_root(target if target in PACKAGES else target.rpartition(".")[0])
                == own_root
                and own_root != "verdict_contract"  # src/: cross-folder names start there too
            ):
                problems.append(
                    f"line {node.lineno}: {target} is in this folder: import it relatively"
                )
    return problems


def test_every_import_of_the_project_resolves_to_a_file_of_the_checkout() -> None:
    problems = {
        name: found for name, path in _modules().items() if (found := _import_problems(path))
    }
    assert not problems, problems


def test_the_import_check_can_fail(tmp_path: Path) -> None:
    """An absolute import of the mock inside the mock, and a relative one out of it, are found."""
    bad = PACKAGES["verdict_contract.mockserver.model"] / "_probe_for_test.py"
    try:
        bad.write_text(
            "from verdict_contract.mockserver.model.answer import Answer\n"
            "from ...core import spec\n"
            "from .nothing_here import x\n",
            encoding="utf-8",
        )
        found = _import_problems(bad)
    finally:
        bad.unlink()
    assert len(found) == 3, found
    assert "import it relatively" in found[0]
    assert "leaves its folder" in found[1]
    assert "no file of the checkout" in found[2]


@pytest.mark.parametrize(
    ("name", "source", "expected"),
    [
        (
            "test_auth.py",
            "from verdict_contract.contract_tests.client import KEY\nfrom .nothing_here import x\n",
            ["import it relatively", "no file of the checkout"],
        ),
        ("conftest.py", "from .client import KEY\n", ["imports the package by name"]),
    ],
)
def test_the_import_check_covers_the_suites_test_modules_and_its_conftest(
    name: str, source: str, expected: list[str]
) -> None:
    """The suite's test modules import the rest of their folder relatively; its conftest.py, the
    one file pytest imports by its path, names the package."""
    found = _import_problems(PACKAGES["verdict_contract.contract_tests"] / name, source)
    assert len(found) == len(expected), found
    for problem, words in zip(found, expected, strict=True):
        assert words in problem


MAX_TOP_MODULES = 14


def test_the_mocks_top_is_a_few_named_parts() -> None:
    """At most 14 modules and folders at the mock's top: the rest lives in folders that name
    its parts. No cap on a module's length: a module is one idea, whatever its length."""
    top = PACKAGES["verdict_contract.mockserver"]
    entries = [p for p in top.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()]
    assert len(entries) <= MAX_TOP_MODULES, sorted(p.name for p in entries)


MOCK_LINES = 9_000
"""The mock's size, in lines of Python as ``ruff format`` writes them: one endpoint's mock."""


def test_the_mock_stays_within_its_size() -> None:
    lines = sum(
        len(p.read_text(encoding="utf-8").splitlines()) for p in (ROOT / "mockserver").rglob("*.py")
    )
    assert lines <= MOCK_LINES, f"mockserver/ holds {lines} lines of Python; at most {MOCK_LINES}"


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
    assert "3 kept, 0 broken" in result.stdout


def test_the_linter_would_see_a_broken_layer(assembled: Path, tmp_path: Path) -> None:
    """The check can fail: the core importing the mock breaks the layers contract."""
    broken = tmp_path / "site"
    shutil.copytree(assembled, broken)
    spec = broken / "verdict_contract" / "core" / "spec.py"
    spec.write_text(spec.read_text() + "\nimport verdict_contract.mockserver.web.app\n")
    result = _lint_imports(broken)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout


def test_the_linter_would_see_the_model_import_the_web(assembled: Path, tmp_path: Path) -> None:
    """The mock's own layers: its model importing its Flask app breaks the inner contract."""
    broken = tmp_path / "site"
    shutil.copytree(assembled, broken)
    steps = broken / "verdict_contract" / "mockserver" / "model" / "steps.py"
    steps.write_text(steps.read_text() + "\nfrom ..web import app\n")
    result = _lint_imports(broken)
    assert result.returncode != 0
    assert "Inside the mock" in result.stdout
    assert "verdict_contract.mockserver.model is not allowed to import" in result.stdout


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
