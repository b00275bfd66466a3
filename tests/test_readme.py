"""The README's and docs' Python examples run as written; the README's commands are CI's."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.installs import checkout_copy, shared_wheel

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


def test_the_readmes_integrator_example_shows_no_client_habit(pytester: pytest.Pytester) -> None:
    (example,) = [b for b in _blocks("python") if "def test_" in b and "verdict_respx" in b]
    pytester.makepyfile(test_example=example)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--verdict-coverage")
    result.assert_outcomes(passed=1)
    output = result.stdout.str()
    assert "verdict coverage" in output
    assert "client habits" not in output  # e.g. early_retry: a retry before Retry-After ran out


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


VENV_COMMANDS = ("verdict-contract", "verdict-mock", "pip", "pip3", "pytest")
"""Commands that exist only in the venv the README's commands make (or an integrator's own)."""

ACTIVATED = re.compile(r"^(\.|source) \.venv/bin/activate\b", flags=re.MULTILINE)


def _commands(block: str) -> list[str]:
    """Each simple command of a shell block: continuations joined, comments and env dropped."""
    text = block.replace("\\\n", " ")
    found = []
    for line in text.splitlines():
        line = re.sub(r"(^|\s)#.*", "", line)
        for command in re.split(r"&&|\|\||;|\|", line):
            words = command.split()
            while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
                words.pop(0)  # VAR=value before the command
            if words:
                found.append(" ".join(words))
    return found


def _not_from_the_venv(block: str) -> list[str]:
    """The commands of ``block`` that a fresh shell would not find: not ``.venv/bin/...``.

    A block that activates a venv first runs them from it, as written.
    """
    if ACTIVATED.search(block):
        return []
    return [c for c in _commands(block) if c.split()[0] in VENV_COMMANDS]


def test_the_venv_check_sees_a_bare_command() -> None:
    assert _not_from_the_venv("verdict-contract check https://x \\\n  --flag\n") == [
        "verdict-contract check https://x --flag"
    ]
    assert _not_from_the_venv("export K=1\nK=2 verdict-mock --port 1  # or pip install x\n")
    assert _not_from_the_venv("python3 -m venv .venv && pip install .\n") == ["pip install ."]
    assert not _not_from_the_venv(".venv/bin/verdict-mock --help\n")
    assert not _not_from_the_venv(". .venv/bin/activate\npip install x\n")


def test_every_shell_command_runs_from_the_venv_or_after_activating_it() -> None:
    """A newcomer pastes a line in a fresh shell: ``.venv/bin/verdict-contract``, not
    ``verdict-contract`` (not on PATH until the venv is activated)."""
    blocks = _blocks("bash", GUIDE)
    named = [b for b in blocks if re.search(r"verdict-(contract|mock)\b", b)]
    assert len(named) >= 5
    for block in blocks:
        assert not _not_from_the_venv(block), block


def test_the_first_command_installs_the_mocks_servers_and_starts_it() -> None:
    (first,) = [b.strip() for b in _blocks("bash") if "verdict-mock" in b and "pip install" in b]
    assert "\n" not in first
    assert first.endswith("&& .venv/bin/verdict-mock")
    assert "pip install '.[server]'" in first


def _pip_install_target(argument: str, target: Path, cwd: Path) -> Path:
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    result = subprocess.run(
        [*pip, "--target", str(target), argument],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"pip install {argument}:\n{result.stdout}{result.stderr}"
    return target


def test_the_integrators_install_lines_work(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The wheel line run as written in a copy of the checkout; then each install line, with
    the copy's path (and a git repository of it) for the placeholders."""
    (build,) = [b.strip() for b in _blocks("bash") if "pip wheel" in b]
    line = build.split("#")[0].strip()
    assert line == "python3 -m venv .venv && .venv/bin/pip wheel . -w dist --no-deps"
    assert line.replace(" && ", " &&\n") in PAGES["plugin.md"].replace("`", "")
    checkout = checkout_copy(tmp_path / "checkout")
    result = subprocess.run(
        ["bash", "-c", line], cwd=checkout, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = checkout.glob("dist/verdict_contract-*.whl")
    with zipfile.ZipFile(wheel) as built, zipfile.ZipFile(shared_wheel(tmp_path_factory)) as ours:
        assert set(built.namelist()) == set(ours.namelist())  # the wheel the tests install

    (block,) = [b for b in _blocks("bash") if ACTIVATED.search(b)]
    installs = [shlex.split(c) for c in _commands(block) if c.startswith("pip install ")]
    assert [len(words) for words in installs] == [3, 3, 3]
    subprocess.run(["git", "init", "-q"], cwd=checkout, check=True)
    subprocess.run(["git", "add", "-A"], cwd=checkout, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "copy"],
        cwd=checkout,
        check=True,
    )
    for index, (_, _, argument) in enumerate(installs):
        argument = argument.replace("/path/to/checkout", str(checkout))
        # with a host: the pip of Python 3.11 venvs (23.2) refuses git+file:///path after "name @"
        argument = re.sub(r"git\+https://\S+", f"git+file://localhost{checkout}", argument)
        if "*" in argument:
            (match,) = Path("/").glob(argument.lstrip("/"))
            argument = str(match)
        site = _pip_install_target(argument, tmp_path / f"site-{index}", tmp_path)
        assert (site / "verdict_contract" / "mockserver" / "web" / "static").is_dir(), argument
        (info,) = site.glob("verdict_contract-*.dist-info")
        assert "verdict_contract.plugin" in (info / "entry_points.txt").read_text()


def test_the_readme_says_the_second_command_reinstalls_the_firsts_venv() -> None:
    """Both commands install into ``.venv``: the second replaces what a running mock runs."""
    first, second = [b.strip() for b in _blocks("bash") if "pip install" in b][:2]
    for command in (first, second):
        assert command.startswith("python3 -m venv .venv && .venv/bin/pip install ")
    text = " ".join(README.split())
    assert "reinstalls the package in the same `.venv`" in text
    assert "stop a running mock first (Ctrl-C)" in text
