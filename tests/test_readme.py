"""The README's Python examples run as written, and its commands are the ones CI runs."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


def test_python_examples_pass(pytester: pytest.Pytester) -> None:
    blocks = _blocks("python")
    assert len(blocks) >= 3
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
