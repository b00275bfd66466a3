"""The test run itself: its longest modules start first, and the pytest runs tests start are light.

The plugins none of those runs uses are left out of them (the root conftest), not out of this run.
"""

from __future__ import annotations

import pytest

from tests.conftest import LONGEST_FIRST, run_order
from tests.installs import ROOT


def test_every_module_named_longest_first_exists() -> None:
    missing = [name for name in LONGEST_FIRST if not (ROOT / name).is_file()]
    assert missing == [], "renamed or removed: update LONGEST_FIRST in tests/conftest.py"


def test_the_longest_modules_come_first_and_the_others_keep_their_order() -> None:
    modules = [
        "tests/core/test_rules.py",
        "tests/test_plugin.py",
        "contract_tests/test_auth.py",
        "tests/test_readme.py",
        "tests/core/test_spec.py",
    ]
    ordered = sorted(modules, key=lambda name: run_order(ROOT / name))
    assert ordered == [
        "tests/test_readme.py",
        "tests/test_plugin.py",
        "tests/core/test_rules.py",
        "contract_tests/test_auth.py",
        "tests/core/test_spec.py",
    ]


def test_this_run_keeps_every_plugin(pytestconfig: pytest.Config) -> None:
    """Under xdist too: the workers get the run's own ``PYTEST_ADDOPTS``, not the children's."""
    for name in ("hypothesispytest", "respx", "anyio"):
        assert pytestconfig.pluginmanager.has_plugin(name), name


def test_a_pytest_run_a_test_starts_leaves_the_unused_plugins_out(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import sys

        def test_light(pytestconfig):
            for name in ("faker", "hypothesispytest", "respx", "anyio"):
                assert not pytestconfig.pluginmanager.has_plugin(name), name
            assert not {"faker", "hypothesis"} & set(sys.modules)
            assert pytestconfig.pluginmanager.has_plugin("verdict_contract")
        """
    )
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
