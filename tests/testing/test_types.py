"""``verdict_contract.testing``: light to import, and typed for an integrator's type checker.

An integrator's test file annotated with its types is checked by ``mypy --strict`` and pyright
(strict), as the package installs, and run by pytest: a misspelt verdict kind is reported, and
nothing else is. The README's examples pass both checkers as they are written.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import verdict_contract.testing as public
from tests.test_readme import GUIDE, _blocks
from tests.typecheck import BIN, Checked, mypy, pyright

INTEGRATOR_TESTS = """
from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
import requests

from verdict_contract.testing import (
    JournalEntry,
    MakeVerdict,
    ResponsesVerdictMock,
    RespxVerdictMock,
    ScriptStep,
    Settings,
    Verdict,
    VerdictMock,
    VerificationError,
    reply,
)


@pytest.fixture
def verdict_mock_settings() -> Settings:
    return Settings.parse(port="0", rate_limit="2/60", api_keys="team-key-0123456789")


@pytest.mark.verdict_mock(api_keys=["team-key-0123456789"])
def test_respx(verdict_respx: RespxVerdictMock, make_verdict: MakeVerdict) -> None:
    until = datetime(2030, 1, 1, tzinfo=UTC)
    script: list[ScriptStep] = [reply(429), reply(503, retry_after=until)]
    n = verdict_respx.mint(verdict="refused", script=script)
    assert httpx.get(verdict_respx.url(n), headers=verdict_respx.headers).status_code == 429
    entry: JournalEntry = verdict_respx.last_request(n)
    assert entry.status == 429
    assert verdict_respx.router.calls.call_count == 1
    verdict_respx.assert_called_once(n, headers={"Authorization": "Bearer team-key-0123456789"})
    try:
        verdict_respx.assert_all_scripts_used()
    except VerificationError as error:
        assert "1 step(s) left" in str(error)
    body: Verdict = make_verdict("contradicted", conclusive=True)
    assert body["conclusive"] is True


def test_responses(verdict_responses: ResponsesVerdictMock) -> None:
    mock: VerdictMock = verdict_responses
    mock.assert_no_requests()
    n = mock.mint(verdict="disputed", script=(429,))
    assert requests.get(mock.url(n), headers=mock.headers, timeout=5).status_code == 429
    assert len(verdict_responses.responses.calls) == 1


def test_misspelt_kind(make_verdict: MakeVerdict) -> None:
    make_verdict("contradictd")
"""
MISSPELT_LINE = INTEGRATOR_TESTS.splitlines().index('    make_verdict("contradictd")') + 1


def test_its_types_load_nothing_heavy() -> None:
    """The types an integrator imports at the top of a test module load neither the Flask app,
    nor faker, jsonschema or prometheus-client, nor does a mock that mints and answers."""
    code = (
        "import sys, verdict_contract.testing as t\n"
        "heavy = {'flask', 'faker', 'jsonschema', 'prometheus_client', 'respx', 'responses'}\n"
        "assert not heavy & set(sys.modules), sys.modules\n"
        "t.VerdictMock, t.RespxVerdictMock, t.ResponsesVerdictMock, t.JournalEntry, t.Settings\n"
        "assert not heavy & set(sys.modules), sorted(heavy & set(sys.modules))\n"
        "from verdict_contract.testing.mocks import respx_mock\n"
        "with respx_mock() as mock:\n"
        "    mock.mint()\n"
        "assert not {'faker', 'flask'} & set(sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_every_name_is_exported_and_resolves() -> None:
    assert public.__all__ == sorted(public._EXPORTS)
    for name in public.__all__:
        assert getattr(public, name) is not None
    assert public.JournalEntry.__name__ == "JournalEntry"
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        public.Nope  # noqa: B018


def _check(checker: str, name: str, text: str, tmp_path: Path, typecheck: Checked) -> str:
    """What ``checker`` (mypy or pyright, strict) prints on ``text`` saved as ``name``."""
    path = tmp_path / name
    path.write_text(text)
    if checker == "mypy":
        return mypy([path], typecheck.cache, typecheck.copy)
    _need_pyright()
    return pyright([path], typecheck.copy, tmp_path)


def _need_pyright() -> None:
    if not (BIN / "pyright").exists() or shutil.which("node") is None:
        pytest.skip("pyright (the test extra) needs node on PATH (Debian's nodejs)")


def test_mypy_strict_reports_the_misspelt_kind_and_nothing_else(
    tmp_path: Path, typecheck: Checked
) -> None:
    output = _check("mypy", "test_typed.py", INTEGRATOR_TESTS, tmp_path, typecheck)
    errors = [line for line in output.splitlines() if ": error:" in line]
    assert len(errors) == 1, output
    assert f"test_typed.py:{MISSPELT_LINE}: error:" in errors[0]
    assert "Literal['contradictd']" in errors[0]


def test_pyright_strict_reports_the_misspelt_kind_and_nothing_else(
    tmp_path: Path, typecheck: Checked
) -> None:
    output = _check("pyright", "test_typed.py", INTEGRATOR_TESTS, tmp_path, typecheck)
    errors = [line for line in output.splitlines() if " - error:" in line]
    assert len(errors) == 1, output
    assert f"test_typed.py:{MISSPELT_LINE}:" in errors[0]
    assert "contradictd" in errors[0]


STEPS = """
from __future__ import annotations

from verdict_contract.testing import (
    DelayStep,
    FaultName,
    RespxVerdictMock,
    ScriptStep,
    StatusStep,
    reply,
)


def test_steps(verdict_respx: RespxVerdictMock) -> None:
    fault: FaultName = "truncated"
    slow: DelayStep = {"delay_ms": 200}
    late: StatusStep = reply(503, retry_after=2, delay_ms=300)
    good: list[ScriptStep] = [429, "reset", fault, slow, late, {"status": 418}]
    verdict_respx.mint(script=good)
    verdict_respx.mint(script=["reset"] * 4)
    verdict_respx.mint(script=[429] * 3)
    verdict_respx.mint(script=[{"delay_ms": 9000}] * 4)
    verdict_respx.mint(script=("reset", 429), summary="Written by hand.")
    faults: list[FaultName] = ["reset", "truncated"]
    verdict_respx.mint(script=faults)
    verdict_respx.mint(allow_invalid=True, summary=3, debug="on")
    verdict_respx.mint(script=["rest"])  # misspelt
    verdict_respx.mint(verdcit="refused")  # misspelt
    verdict_respx.mint(summary=3)  # misspelt
    verdict_respx.mint(script=[{"dleay_ms": 200}])  # misspelt
    verdict_respx.mint(script=[402])  # misspelt
    reply(503, dleay_ms=200)  # misspelt
"""
STEP_LINES = [i for i, line in enumerate(STEPS.splitlines(), 1) if line.endswith("# misspelt")]


def _error_lines(output: str, marker: str) -> list[int]:
    """The lines of ``test_steps.py`` a checker reports an error on, in order, once each."""
    found = re.findall(rf"test_steps\.py:(\d+)(?::\d+)?{marker}", output)
    return sorted({int(line) for line in found})


def test_mypy_strict_reports_each_misspelt_step_and_nothing_else(
    tmp_path: Path, typecheck: Checked
) -> None:
    output = _check("mypy", "test_steps.py", STEPS, tmp_path, typecheck)
    assert _error_lines(output, r": error:") == STEP_LINES, output


def test_pyright_strict_reports_each_misspelt_step_and_nothing_else(
    tmp_path: Path, typecheck: Checked
) -> None:
    output = _check("pyright", "test_steps.py", STEPS, tmp_path, typecheck)
    assert _error_lines(output, r" - error:") == STEP_LINES, output


def test_the_well_typed_steps_run_and_the_misspelt_ones_are_refused(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_steps=STEPS)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*SpecError: mint().script[[]0[]] must be one of the statuses*"])
    result.stdout.fnmatch_lines(['*verdict_respx.mint(script=[[]"rest"[]])*'])
    assert "def parse_spec(" not in result.stdout.str()  # the test's line, not the parser's


def test_a_misspelt_field_points_at_the_test_not_at_mint(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_field="def test_field(verdict_respx):\n    verdict_respx.mint(verdcit='refused')\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*'verdcit' is not a field of the verdict; did you mean 'verdict'?"]
    )
    assert "def mint(" not in result.stdout.str()  # the test's line, not mint()'s source


def test_the_typed_file_runs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_typed=INTEGRATOR_TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "not misspelt")
    result.assert_outcomes(passed=2, deselected=1)


def _readme_examples(folder: Path) -> list[Path]:
    paths = []
    for index, block in enumerate(_blocks("python", GUIDE)):
        path = folder / f"readme_{index}.py"
        path.write_text(block)
        paths.append(path)
    return paths


def test_the_readmes_examples_pass_mypy_strict(tmp_path: Path, typecheck: Checked) -> None:
    cache, copy = typecheck
    paths = _readme_examples(tmp_path)
    output = mypy(paths, cache, copy)
    assert f"Success: no issues found in {len(paths)} source files" in output, output


def test_the_readmes_examples_pass_pyright_strict(tmp_path: Path, typecheck: Checked) -> None:
    _need_pyright()
    output = pyright(_readme_examples(tmp_path), typecheck.copy, tmp_path)
    assert output.splitlines()[-1].startswith("0 errors, 0 warnings"), output


ENTRY_TYPES = """
from __future__ import annotations

from typing import Literal

from verdict_contract.testing import JournalEntry, RespxVerdictMock


def test_entry(verdict_respx: RespxVerdictMock) -> None:
    entry: JournalEntry = verdict_respx.journal[0]
    kind: Literal["contradicted", "refused", "disputed", "uncontradicted", "insufficient"] | None
    kind = entry.verdict
    reveal_type(entry)
"""


def test_type_checkers_name_the_entry_as_the_docs_do_and_type_its_verdict(
    tmp_path: Path, typecheck: Checked
) -> None:
    """``JournalEntry`` in messages (not an internal name), and ``verdict`` as the kind."""
    output = _check("mypy", "test_entry.py", ENTRY_TYPES, tmp_path, typecheck)
    assert "fallback=verdict_contract.mockserver.store.journal.JournalEntry]" in output
    assert "Success: no issues found" in output, output
