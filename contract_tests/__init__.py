"""verdict-contract: the Explain API contract as data, a validator, and a contract suite.

Names are imported on first use, so the pytest plugin (loaded into every pytest run where
this package is installed) costs next to nothing until a fixture or check needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contract_tests.rules import RULES as RULES
    from contract_tests.rules import Rule as Rule
    from contract_tests.spec import SCHEMA_VERSION as SCHEMA_VERSION
    from contract_tests.validator import assert_valid_verdict as assert_valid_verdict
    from contract_tests.validator import unknown_properties as unknown_properties
    from contract_tests.validator import validate_verdict as validate_verdict
    from contract_tests.violations import Violation as Violation

_EXPORTS = {
    "RULES": "contract_tests.rules",
    "Rule": "contract_tests.rules",
    "SCHEMA_VERSION": "contract_tests.spec",
    "Violation": "contract_tests.violations",
    "assert_valid_verdict": "contract_tests.validator",
    "unknown_properties": "contract_tests.validator",
    "validate_verdict": "contract_tests.validator",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'contract_tests' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
