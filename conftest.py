"""Root conftest: puts the project root on ``sys.path`` for ``tests``; pytester; the suite's plugin.

In this repository the suite's plugin is always on (``tests/`` runs the suite's own checks and
uses its markers); in an integrator's project it loads only where the suite runs.
"""

from __future__ import annotations

import os

# faker's own pytest plugin (its `faker` fixture, unused here) imports faker at every pytest start:
# about 0.6 s of CPU in each of the hundreds of pytest runs the tests start. Runs that stand for an
# integrator's own (tests/test_integrator_project.py) drop this and keep it, as theirs would.
os.environ["PYTEST_ADDOPTS"] = " ".join(
    filter(None, [os.environ.get("PYTEST_ADDOPTS", ""), "-p no:faker"])
)

pytest_plugins = ["pytester", "verdict_contract.suite"]
