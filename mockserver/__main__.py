"""``python -m verdict_contract.mockserver``: the same as ``verdict-mock``."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
