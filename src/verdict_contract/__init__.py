"""verdict-contract: the Explain API contract as data, a validator, a mock and a contract suite.

Names are imported on first use, so the pytest plugin (loaded into every pytest run where
this package is installed) costs next to nothing until a fixture or check needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verdict_contract.mockserver.factory import make_verdict as make_verdict
    from verdict_contract.mockserver.provider import VerdictProvider as VerdictProvider

    from .core.errors import InvalidVerdictError as InvalidVerdictError
    from .core.errors import MissingExtraError as MissingExtraError
    from .core.errors import ScenarioError as ScenarioError
    from .core.errors import SettingsError as SettingsError
    from .core.errors import SpecError as SpecError
    from .core.errors import VerdictContractError as VerdictContractError
    from .core.errors import VerificationError as VerificationError
    from .core.rules import RULES as RULES
    from .core.rules import Rule as Rule
    from .core.spec import SCHEMA_VERSION as SCHEMA_VERSION
    from .core.types import Family as Family
    from .core.types import Signal as Signal
    from .core.types import Tier as Tier
    from .core.types import Verdict as Verdict
    from .core.types import VerdictKind as VerdictKind
    from .core.validator import assert_valid_verdict as assert_valid_verdict
    from .core.validator import unknown_properties as unknown_properties
    from .core.validator import validate_verdict as validate_verdict
    from .core.violations import Violation as Violation

_EXPORTS = {
    "InvalidVerdictError": "verdict_contract.core.errors",
    "MissingExtraError": "verdict_contract.core.errors",
    "ScenarioError": "verdict_contract.core.errors",
    "SettingsError": "verdict_contract.core.errors",
    "SpecError": "verdict_contract.core.errors",
    "VerdictContractError": "verdict_contract.core.errors",
    "VerificationError": "verdict_contract.core.errors",
    "Family": "verdict_contract.core.types",
    "Signal": "verdict_contract.core.types",
    "Tier": "verdict_contract.core.types",
    "Verdict": "verdict_contract.core.types",
    "VerdictKind": "verdict_contract.core.types",
    "RULES": "verdict_contract.core.rules",
    "Rule": "verdict_contract.core.rules",
    "SCHEMA_VERSION": "verdict_contract.core.spec",
    "Violation": "verdict_contract.core.violations",
    "assert_valid_verdict": "verdict_contract.core.validator",
    "unknown_properties": "verdict_contract.core.validator",
    "validate_verdict": "verdict_contract.core.validator",
    "VerdictProvider": "verdict_contract.mockserver.provider",
    "make_verdict": "verdict_contract.mockserver.factory",
}

# Written out (not sorted(_EXPORTS)) so type checkers read it; a test keeps the two equal.
__all__ = [
    "RULES",
    "SCHEMA_VERSION",
    "Family",
    "InvalidVerdictError",
    "MissingExtraError",
    "Rule",
    "ScenarioError",
    "SettingsError",
    "Signal",
    "SpecError",
    "Tier",
    "Verdict",
    "VerdictContractError",
    "VerdictKind",
    "VerdictProvider",
    "VerificationError",
    "Violation",
    "assert_valid_verdict",
    "make_verdict",
    "unknown_properties",
    "validate_verdict",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'verdict_contract' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
