"""The light install: the mock's fast loop and shared state are extras, named when missing.

A plain install holds what the pytest plugin's fixtures need; ``[server]`` adds uvloop,
``[redis]`` the shared state. A setting that needs a missing one is refused in one line
that names the extra: simulated here by making its module unimportable (``sys.modules[name] =
None``), in this process or in a subprocess.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib
from types import SimpleNamespace

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.installs import ROOT
from verdict_contract import MissingExtraError
from verdict_contract.core.extras import EXTRAS
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.cli import loop_note, main

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


REDIS_REFUSAL = (
    "--state redis://127.0.0.1:6379/0 (VERDICT_MOCK_STATE) needs the redis package, which is "
    "not installed: install verdict-contract[redis] (from a checkout: pip install '.[redis]')"
)


def _names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def test_a_plain_install_leaves_each_extras_packages_out() -> None:
    plain = _names(PROJECT["dependencies"])
    extras = PROJECT["optional-dependencies"]
    for package, extra in EXTRAS.items():
        assert package not in plain, f"{package} is in every install: the [{extra}] extra has it"
        assert package in _names(extras[extra]), f"the [{extra}] extra lacks {package}"
    (own,) = [Requirement(r) for r in extras["test"] if "verdict-contract" in r]
    # the tests run every store, uvloop and faker's provider
    assert own.extras == {"server", "redis", "hypothesis", "faker", "parallel"}


def _refusal(extra: str, module: str, needed_by: str) -> str:
    return (
        f"{needed_by} needs the {module} package, which is not installed: "
        f"install verdict-contract[{extra}] (from a checkout: pip install '.[{extra}]')"
    )


def test_a_shared_state_without_redis_is_refused_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = Settings.parse(state="redis://:hunter2@127.0.0.1:6379/0")
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(MissingExtraError) as refused:
        create_app(settings)
    needed_by = "--state redis://127.0.0.1:6379/0 (VERDICT_MOCK_STATE)"  # no password shown
    assert str(refused.value) == _refusal("redis", "redis", needed_by)


def test_verdict_mock_without_the_extra_says_which_to_install_in_one_line() -> None:
    argv = ["--state", "redis://127.0.0.1:6379/0", "--workers", "2", "--port", "0"]
    code = (
        "import sys; sys.modules['redis'] = None\n"
        "from verdict_contract.mockserver.cli import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == f"verdict-mock: error: {REDIS_REFUSAL}"


@pytest.mark.parametrize(
    ("module", "extra", "needed_by"),
    [
        (
            "verdict_contract.mockserver.strategies",
            "hypothesis",
            "verdict_contract.mockserver.strategies",
        ),
        ("verdict_contract.mockserver.provider", "faker", "VerdictProvider"),
    ],
)
def test_a_module_of_an_extra_names_it_when_imported_without(
    module: str, extra: str, needed_by: str
) -> None:
    code = f"import sys; sys.modules[{extra!r}] = None\nimport {module}\n"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 1
    last = result.stderr.splitlines()[-1]
    assert (
        last
        == f"verdict_contract.core.errors.MissingExtraError: {_refusal(extra, extra, needed_by)}"
    )


def test_without_uvloop_verdict_mock_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert loop_note() is None  # installed here
    monkeypatch.setitem(sys.modules, "uvloop", None)
    note = loop_note()
    assert note == (
        "note: uvloop is not installed, so asyncio's own loop serves (slower under load): "
        "install verdict-contract[server] (from a checkout: pip install '.[server]')"
    )
    assert loop_note(platform="win32") is None  # uvloop has no Windows build

    def refuse(*args: object) -> None:
        raise AssertionError("main() went on to serve")

    monkeypatch.setattr(
        "verdict_contract.mockserver.cli.AsyncServer",
        lambda *args: SimpleNamespace(effective_port=8080),
    )
    monkeypatch.setattr("verdict_contract.mockserver.cli.serve_forever", refuse)
    with pytest.raises(AssertionError, match="went on to serve"):
        main([])
    assert note in capsys.readouterr().err.splitlines()


def test_the_fixtures_need_no_extra(pytester: pytest.Pytester) -> None:
    """An integrator's tests on every fixture, where redis and uvloop cannot load."""
    pytester.makeconftest(
        """
        import sys

        BLOCKED = ("redis", "hiredis", "uvloop")
        assert not [name for name in BLOCKED if name in sys.modules]
        for name in BLOCKED:
            sys.modules[name] = None
        """
    )
    pytester.makepyfile(
        """
        import httpx
        import requests

        def test_over_http(verdict_mock):
            n = verdict_mock.mint(verdict="refused")
            answer = httpx.get(verdict_mock.url(n), headers=verdict_mock.headers)
            assert answer.json()["verdict"] == "refused"

        def test_httpx_in_process(verdict_respx):
            n = verdict_respx.mint(script=[429])
            assert httpx.get(verdict_respx.url(n), headers=verdict_respx.headers).status_code == 429

        def test_requests_in_process(verdict_responses, make_verdict):
            n = verdict_responses.mint(verdict="disputed")
            answer = requests.get(verdict_responses.url(n), headers=verdict_responses.headers)
            assert answer.json()["verdict"] == make_verdict("disputed")["verdict"]
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_the_plugin_page_shows_the_refusal_as_it_prints() -> None:
    page = (ROOT / "docs" / "plugin.md").read_text(encoding="utf-8")
    assert f"```text\nverdict-mock: error: {REDIS_REFUSAL}\n```" in page


def _plain_install() -> set[str]:
    """The distributions a plain install of this package pulls here, by their requirements."""
    found: dict[str, frozenset[str]] = {}
    pending = [("verdict-contract", frozenset[str]())]
    while pending:
        name, extras = pending.pop()
        for text in importlib.metadata.requires(name) or []:
            requirement = Requirement(text)
            marker = requirement.marker
            if marker is not None and not any(
                marker.evaluate({"extra": e}) for e in extras or {""}
            ):
                continue
            key = canonicalize_name(requirement.name)
            wanted = found.get(key, frozenset()) | requirement.extras
            if key not in found or wanted != found[key]:
                found[key] = wanted
                pending.append((key, wanted))
    return set(found)


@pytest.mark.skipif(
    sys.platform != "linux" or sys.version_info[:2] not in {(3, 11), (3, 12)},
    reason="the figure was measured on Linux, Python 3.11 and 3.12",
)
def test_the_docs_count_the_packages_a_plain_install_pulls() -> None:
    plain = _plain_install()
    assert not plain & {"redis", "hiredis", "uvloop"}
    assert {"flask", "httptools", "respx", "responses", "pytest"} <= plain
    assert "faker" not in plain  # its pytest plugin would load in every run of the project
    figure = f"**{len(plain)} packages besides pip and setuptools, about"
    text = " ".join((ROOT / "docs" / "plugin.md").read_text(encoding="utf-8").split())
    assert figure in text, f"docs/plugin.md: a plain install pulls {len(plain)} packages here"
