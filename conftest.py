"""Root conftest: puts the project root on ``sys.path`` for ``tests``; pytester; the suite's plugin.

In this repository the suite's plugin is always on (``tests/`` runs the suite's own checks and
uses its markers); in an integrator's project it loads only where the suite runs.
"""

from __future__ import annotations

pytest_plugins = ["pytester", "verdict_contract.suite"]
