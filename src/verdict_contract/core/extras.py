"""The optional extras: what a setting needs beyond a plain install, refused in one line.

A plain install (of the wheel, the checkout or its git URL, no extra) holds what the pytest plugin's
fixtures, the contract suite and ``validate`` need. The mock's shared state and its fast loop
come with extras (``pyproject.toml``): ``[redis]`` and ``[server]``; faker's provider of
verdicts with ``[faker]``.
"""

from __future__ import annotations

import importlib.util
from typing import Final

from .errors import MissingExtraError

EXTRAS: Final = {
    "redis": "redis",
    "hiredis": "redis",
    "uvloop": "server",
    "faker": "faker",
    "hypothesis": "hypothesis",
}
"""The extra that brings each optional package this package imports."""


def install_hint(extra: str) -> str:
    """How to install ``extra``: from an index, and from a checkout."""
    return f"install verdict-contract[{extra}] (from a checkout: pip install '.[{extra}]')"


def is_installed(package: str) -> bool:
    """Whether ``package`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # a broken or half-removed package
        return False


def require_extra(package: str, needed_by: str) -> None:
    """Raise :class:`MissingExtraError` naming the extra if ``package`` is not installed."""
    if not is_installed(package):
        extra = EXTRAS[package]
        raise MissingExtraError(
            f"{needed_by} needs the {package} package, which is not installed: "
            f"{install_hint(extra)}"
        )
