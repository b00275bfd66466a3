"""``python -m mockserver``: the same as ``verdict-mock``."""

from __future__ import annotations

import sys

from mockserver.cli import main

sys.exit(main())
