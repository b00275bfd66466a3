"""verdict-mock: a Flask mock of the Explain API's ``GET /e``.

``flask --app mockserver run`` finds :func:`create_app` for development; ``verdict-mock`` (or
``python -m mockserver``) serves it with waitress.
"""

from __future__ import annotations

from mockserver.app import create_app as create_app
from mockserver.factory import InvalidVerdictError as InvalidVerdictError
from mockserver.factory import VerdictProvider as VerdictProvider
from mockserver.factory import make_verdict as make_verdict
from mockserver.settings import DEFAULT_API_KEY as DEFAULT_API_KEY
from mockserver.settings import Settings as Settings

__all__ = [
    "DEFAULT_API_KEY",
    "InvalidVerdictError",
    "Settings",
    "VerdictProvider",
    "create_app",
    "make_verdict",
]
