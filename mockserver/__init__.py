"""verdict-mock: a Flask mock of the Explain API's ``GET /e``.

``flask --app verdict_contract.mockserver run`` finds :func:`create_app` for development;
``verdict-mock`` (or ``python -m verdict_contract.mockserver``) serves it.
"""

from __future__ import annotations

from verdict_contract.mockserver.app import create_app as create_app
from verdict_contract.mockserver.factory import InvalidVerdictError as InvalidVerdictError
from verdict_contract.mockserver.factory import VerdictProvider as VerdictProvider
from verdict_contract.mockserver.factory import make_verdict as make_verdict
from verdict_contract.mockserver.settings import DEFAULT_API_KEY as DEFAULT_API_KEY
from verdict_contract.mockserver.settings import Settings as Settings

__all__ = [
    "DEFAULT_API_KEY",
    "InvalidVerdictError",
    "Settings",
    "VerdictProvider",
    "create_app",
    "make_verdict",
]
