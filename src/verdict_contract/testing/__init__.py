"""The types that annotate tests using the plugin's fixtures, in one light module.

``def test_x(verdict_respx: RespxVerdictMock, make_verdict: MakeVerdict) -> None`` type-checks
with mypy and pyright: a misspelt verdict kind, a journal field that does not exist, a router
used where there is none are errors before the test runs. Names load on first use, so importing
this module imports neither Flask nor faker (only type checkers see them all at once).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verdict_contract.mockserver.factory import MakeVerdict as MakeVerdict
    from verdict_contract.mockserver.model.sessions import DelayStep as DelayStep
    from verdict_contract.mockserver.model.sessions import FaultName as FaultName
    from verdict_contract.mockserver.model.sessions import StatusStep as StatusStep
    from verdict_contract.mockserver.settings import Settings as Settings
    from verdict_contract.mockserver.store.journal import JournalEntry as JournalEntry

    from ..core.errors import VerificationError as VerificationError
    from ..core.types import Verdict as Verdict
    from ..core.types import VerdictKind as VerdictKind
    from ..core.types import VerdictRow as VerdictRow
    from .mocks import (
        ResponsesVerdictMock as ResponsesVerdictMock,
    )
    from .mocks import RespxVerdictMock as RespxVerdictMock
    from .mocks import ScriptStep as ScriptStep
    from .mocks import VerdictMock as VerdictMock
    from .mocks import reply as reply

_EXPORTS = {  # public name: (module, name there)
    "DelayStep": ("verdict_contract.mockserver.model.sessions", "DelayStep"),
    "FaultName": ("verdict_contract.mockserver.model.sessions", "FaultName"),
    "JournalEntry": ("verdict_contract.mockserver.store.journal", "JournalEntry"),
    "MakeVerdict": ("verdict_contract.mockserver.factory", "MakeVerdict"),
    "ResponsesVerdictMock": ("verdict_contract.testing.mocks", "ResponsesVerdictMock"),
    "RespxVerdictMock": ("verdict_contract.testing.mocks", "RespxVerdictMock"),
    "ScriptStep": ("verdict_contract.testing.mocks", "ScriptStep"),
    "Settings": ("verdict_contract.mockserver.settings", "Settings"),
    "StatusStep": ("verdict_contract.mockserver.model.sessions", "StatusStep"),
    "Verdict": ("verdict_contract.core.types", "Verdict"),
    "VerdictKind": ("verdict_contract.core.types", "VerdictKind"),
    "VerdictMock": ("verdict_contract.testing.mocks", "VerdictMock"),
    "VerdictRow": ("verdict_contract.core.types", "VerdictRow"),
    "VerificationError": ("verdict_contract.core.errors", "VerificationError"),
    "reply": ("verdict_contract.testing.mocks", "reply"),
}

__all__ = [  # written out, as type checkers read it (a test keeps it equal to _EXPORTS)
    "DelayStep",
    "FaultName",
    "JournalEntry",
    "MakeVerdict",
    "ResponsesVerdictMock",
    "RespxVerdictMock",
    "ScriptStep",
    "Settings",
    "StatusStep",
    "Verdict",
    "VerdictKind",
    "VerdictMock",
    "VerdictRow",
    "VerificationError",
    "reply",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'verdict_contract.testing' has no attribute {name!r}")
    module, attribute = _EXPORTS[name]
    return getattr(importlib.import_module(module), attribute)
