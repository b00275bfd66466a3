"""verdict-contract: the Explain API contract as data, a validator, and a contract suite."""

from __future__ import annotations

from contract_tests.rules import RULES as RULES
from contract_tests.rules import Rule as Rule
from contract_tests.spec import SCHEMA_VERSION as SCHEMA_VERSION
from contract_tests.validator import assert_valid_verdict as assert_valid_verdict
from contract_tests.validator import unknown_properties as unknown_properties
from contract_tests.validator import validate_verdict as validate_verdict
from contract_tests.violations import Violation as Violation

__all__ = [
    "RULES",
    "SCHEMA_VERSION",
    "Rule",
    "Violation",
    "assert_valid_verdict",
    "unknown_properties",
    "validate_verdict",
]
