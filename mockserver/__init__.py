"""verdict-mock: a Flask mock of the Explain API's ``GET /e``.

``flask --app verdict_contract.mockserver run`` finds :func:`create_app` for development;
``verdict-mock`` (or ``python -m verdict_contract.mockserver``) serves it.
"""

from __future__ import annotations

from .factory import InvalidVerdictError as InvalidVerdictError
from .factory import VerdictProvider as VerdictProvider
from .factory import make_verdict as make_verdict
from .settings import DEFAULT_API_KEY as DEFAULT_API_KEY
from .settings import Settings as Settings
from .web.app import create_app as create_app

__all__ = [
    "DEFAULT_API_KEY",
    "InvalidVerdictError",
    "Settings",
    "VerdictProvider",
    "create_app",
    "make_verdict",
]
