"""Hypothesis strategies for contract-valid verdicts (install the ``hypothesis`` extra)."""

from __future__ import annotations

from verdict_contract.core.errors import InvalidVerdictError
from verdict_contract.core.extras import require_extra
from verdict_contract.core.spec import NEVER_CONCLUSIVE, VERDICTS, VerdictKind, never_conclusive
from verdict_contract.core.types import Verdict

from .factory import make_verdict
from .model.generate import DEFAULT_SEED

require_extra("hypothesis", "verdict_contract.mockserver.strategies")

from hypothesis import strategies as st  # noqa: E402  (after the check that names the extra)


@st.composite
def _verdict(
    draw: st.DrawFn, verdict: VerdictKind | None, conclusive: bool | None, seed: str
) -> Verdict:
    kind: VerdictKind = verdict if verdict is not None else draw(st.sampled_from(VERDICTS))
    if conclusive is None:
        conclusive = False if kind in NEVER_CONCLUSIVE else draw(st.booleans())
    number = draw(st.integers(min_value=0, max_value=2**32))
    return make_verdict(kind, conclusive, seed=seed, session_id=f"hypothesis-{number}")


def verdicts(
    verdict: VerdictKind | None = None, conclusive: bool | None = None, seed: str = DEFAULT_SEED
) -> st.SearchStrategy[Verdict]:
    """Verdict bodies that keep the contract, optionally of one kind or conclusiveness."""
    if (problem := never_conclusive(verdict, conclusive)) is not None:
        raise InvalidVerdictError(problem)
    return _verdict(verdict, conclusive, seed)
