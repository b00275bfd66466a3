"""The development install is one static tools follow: strict editable links, no import hook."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from tests.installs import ROOT
from tests.typecheck import Checked, mypy


def test_the_install_is_a_tree_of_links_to_the_sources() -> None:
    tree = f"build/__editable__.verdict_contract-{version('verdict-contract')}-py3-none-any"
    installed = ROOT / tree / "verdict_contract" / "mockserver" / "web" / "app.py"
    assert installed.is_symlink(), "install with the README's second command (editable_mode=strict)"
    assert installed.resolve() == ROOT / "mockserver" / "web" / "app.py"


def test_python_m_from_the_checkout_imports_the_whole_package() -> None:
    """Nothing named verdict_contract at the checkout's root hides the installed package."""
    result = subprocess.run(
        [sys.executable, "-c", "import verdict_contract.mockserver.web.app, verdict_contract.cli"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_mypy_outside_the_checkout_finds_the_package(tmp_path: Path, typecheck: Checked) -> None:
    """mypy finds each module anew on every run: its cache, warmed once per run, hides nothing."""
    assert typecheck.copy is None, "mypy cannot follow the install: use editable_mode=strict"
    (tmp_path / "uses_it.py").write_text(
        "from verdict_contract.mockserver import Settings\n\nport: str = Settings().port\n"
    )
    output = mypy([tmp_path / "uses_it.py"], typecheck.cache, None)
    assert "Cannot find implementation" not in output, output
    assert 'expression has type "int", variable has type "str"' in output, output
