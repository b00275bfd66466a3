"""verdict-mock: a Flask mock of the Explain API's ``GET /e``.

``flask --app verdict_contract.mockserver run`` finds :func:`create_app` for development;
``verdict-mock`` (or ``python -m verdict_contract.mockserver``) serves it. Names load on first
use, so importing a part of the mock (the in-process fixtures' types) loads neither Flask nor
faker.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .factory import InvalidVerdictError as InvalidVerdictError
    from .factory import make_verdict as make_verdict
    from .provider import VerdictProvider as VerdictProvider
    from .settings import DEFAULT_API_KEY as DEFAULT_API_KEY
    from .settings import Settings as Settings
    from .web.app import create_app as create_app

_EXPORTS = {  # public name: the module that defines it
    "DEFAULT_API_KEY": ".settings",
    "InvalidVerdictError": ".factory",
    "Settings": ".settings",
    "VerdictProvider": ".provider",
    "create_app": ".web.app",
    "make_verdict": ".factory",
}

__all__ = [
    "DEFAULT_API_KEY",
    "InvalidVerdictError",
    "Settings",
    "VerdictProvider",
    "create_app",
    "make_verdict",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
