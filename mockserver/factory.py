"""Verdicts for integrators' unit tests: ``make_verdict`` (faker's provider: provider.py).

They come from the mock's own generator, so they look like what ``verdict-mock`` serves.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Protocol, cast

from verdict_contract.core.errors import InvalidVerdictError as InvalidVerdictError
from verdict_contract.core.spec import VerdictKind, VerdictRow, never_conclusive, split_row
from verdict_contract.core.types import Verdict
from verdict_contract.core.validator import validate_verdict
from verdict_contract.core.violations import format_violations

from .model.generate import DEFAULT_SEED, VerdictGenerator
from .model.sessions import SessionSpec


class MakeVerdict(Protocol):
    """The type of :func:`make_verdict` and of the plugin's fixture: a misspelt ``verdict`` is a
    type error in the test that annotates the fixture with it."""

    def __call__(
        self,
        verdict: VerdictKind | VerdictRow | None = None,
        conclusive: bool | None = None,
        *,
        seed: str = ...,
        session_id: str | None = None,
        valid: bool = True,
        schema: int | None = None,
        extra: Mapping[str, Any] | None = None,
        **overrides: Any,
    ) -> Verdict: ...


def make_verdict(
    verdict: VerdictKind | VerdictRow | None = None,
    conclusive: bool | None = None,
    *,
    seed: str = DEFAULT_SEED,
    session_id: str | None = None,
    valid: bool = True,
    schema: int | None = None,
    extra: Mapping[str, Any] | None = None,
    **overrides: Any,
) -> Verdict:
    """Return a contract-valid verdict body, the same for the same arguments and seed.

    ``overrides`` replace top-level fields. A result that breaks the contract raises
    :class:`InvalidVerdictError` unless ``valid=False`` asks for it on purpose, to test how
    code handles a broken response. ``verdict`` may be a row of §2.4 (``verdict_kind``). A
    future body, on purpose and valid as the spec lets it change (as ``mint`` builds one):
    ``schema=8`` announces another schema (§9.3), ``extra={"name": value}`` adds fields the
    spec does not list (an additive change).
    """
    try:  # a row of §2.4 (verdict_kind): both at once
        verdict, conclusive = split_row(verdict, conclusive)
    except ValueError as exc:
        raise InvalidVerdictError(f"make_verdict(): {exc}") from None
    if valid and (problem := never_conclusive(verdict, conclusive)) is not None:
        raise InvalidVerdictError(f"{problem}; pass valid=False to build one anyway")
    key = session_id or f"make_verdict:{verdict}:{conclusive}"
    spec = SessionSpec(verdict=verdict, conclusive=conclusive if valid else None)
    body = copy.deepcopy(VerdictGenerator(seed).verdict(key, spec))
    if not valid and conclusive is not None:
        body["conclusive"] = conclusive
    body.update(copy.deepcopy(overrides))
    if valid:
        violations = validate_verdict(body, strict=True)
        if violations:
            raise InvalidVerdictError(
                format_violations(violations, subject="make_verdict(...)")
                + "\n(pass valid=False to build a broken verdict on purpose)"
            )
    if schema is not None:
        body["schema"] = schema
    body.update(copy.deepcopy(dict(extra or {})))
    return cast(Verdict, body)  # checked above, unless valid=False asked for a broken one
