"""The README's and docs' Python examples run as written; the README's commands are CI's."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = {path.name: path.read_text(encoding="utf-8") for path in sorted(ROOT.glob("docs/*.md"))}
"""The reference pages the README links to, by file name."""
GUIDE = "\n".join([README, *PAGES.values()])
"""The README and its pages: one guide, whose examples all run."""


def _blocks(language: str, text: str = README) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def test_every_page_is_linked_from_the_readme_and_every_link_resolves() -> None:
    for name in PAGES:
        assert f"](docs/{name}" in README, f"docs/{name} is not linked from the README"
    for where, text in [("README.md", README), *((f"docs/{n}", t) for n, t in PAGES.items())]:
        base = ROOT if where == "README.md" else ROOT / "docs"
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            assert (base / target).exists(), f"{where} links to {target}, which does not exist"


def test_the_readme_is_a_page() -> None:
    assert len(README.splitlines()) <= 150


def test_python_examples_pass(pytester: pytest.Pytester) -> None:
    blocks = _blocks("python", GUIDE)
    assert len(blocks) >= 10
    parts = []
    for index, block in enumerate(blocks):
        if "def test_" in block:
            parts.append(block)
        else:  # a plain snippet becomes a test of its own
            parts.append(f"def test_readme_snippet_{index}():\n{textwrap.indent(block, '    ')}")
    pytester.makepyfile(test_readme="\n\n".join(parts))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=len(blocks))


def test_ci_runs_the_readme_test_command() -> None:
    commands = [b.strip() for b in _blocks("bash") if "pytest" in b and "pip install" in b]
    assert len(commands) == 1
    assert commands[0] in (ROOT / ".ci" / "run").read_text()


def test_every_editable_install_in_the_guide_is_a_strict_one() -> None:
    """A plain ``pip install -e`` swaps the links for an import hook that mypy cannot follow."""
    sources = [GUIDE, *(p.read_text(encoding="utf-8") for p in ROOT.glob("benchmarks/*.py"))]
    commands = [c for text in sources for c in re.findall(r"pip install -e [^`\n]*", text)]
    assert commands
    for command in commands:
        assert "editable_mode=strict" in command, command
