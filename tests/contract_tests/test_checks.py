"""The suite is sharp (a broken service fails the named check) and fair (conforming ones pass).

Every run is the real suite, in live mode, over real HTTP, against a wrapped mock.
"""

from __future__ import annotations

import pytest

from tests.contract_tests.servers import BROKEN, CONFORMING, run_suite


@pytest.mark.parametrize("name", list(BROKEN))
def test_broken_service_fails_the_suite(pytester: pytest.Pytester, name: str) -> None:
    variant = BROKEN[name]
    result, _ = run_suite(pytester, variant, "-q")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert variant.fails
    for test in variant.fails:
        result.stdout.fnmatch_lines([f"FAILED *::{test}*"])


@pytest.mark.parametrize("name", list(CONFORMING))
def test_conforming_service_passes_the_suite(pytester: pytest.Pytester, name: str) -> None:
    result, _ = run_suite(pytester, CONFORMING[name], "-q")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 20
    assert "failed" not in outcomes
