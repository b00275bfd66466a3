"""Root conftest: puts the project root on ``sys.path`` for ``tests`` and enables pytester."""

from __future__ import annotations

pytest_plugins = ["pytester"]
