"""The facts of the Explain API specification, written down once.

Everything else (the JSON Schema test, the rules, the mock's generator, the suite) imports these
names instead of repeating the literals. Section references (``§2.3``) point into the spec.
"""

from __future__ import annotations

from typing import Final, Literal, NamedTuple, get_args

SCHEMA_VERSION: Final = 7
"""§9.1: the current value of the ``schema`` field."""

VerdictKind = Literal["contradicted", "refused", "disputed", "uncontradicted", "insufficient"]
Tier = Literal["absolute", "composite", "conditional", "weak"]

VERDICTS: Final[tuple[VerdictKind, ...]] = (
    "contradicted",
    "refused",
    "disputed",
    "uncontradicted",
    "insufficient",
)
"""§2.2: the values of ``verdict``."""

NEVER_CONCLUSIVE: Final[frozenset[str]] = frozenset({"disputed", "uncontradicted", "insufficient"})
"""§2.4: verdicts whose ``conclusive`` is always false (``refused`` varies)."""


def never_conclusive(verdict: str | None, conclusive: bool | None) -> str | None:
    """What is wrong with asking for a conclusive ``verdict`` that never is (§2.4), or None."""
    if conclusive and verdict in NEVER_CONCLUSIVE:
        return f"a {verdict!r} verdict is never conclusive (spec §2.4)"
    return None


MAY_BE_CONCLUSIVE: Final[tuple[VerdictKind, ...]] = tuple(
    v for v in VERDICTS if v not in NEVER_CONCLUSIVE
)
"""§2.4: ``contradicted`` and ``refused``."""


class VerdictRow(NamedTuple):
    """A row of §2.4: a verdict and its ``conclusive`` (``refused`` varies: two rows)."""

    verdict: VerdictKind
    conclusive: bool

    @property
    def id(self) -> str:
        """``contradicted.conclusive``, ``refused.inconclusive``, ``disputed``: readable, stable."""
        if self.verdict in NEVER_CONCLUSIVE:
            return self.verdict
        return f"{self.verdict}.{'conclusive' if self.conclusive else 'inconclusive'}"


def split_row(
    verdict: VerdictKind | VerdictRow | None, conclusive: bool | None
) -> tuple[VerdictKind | None, bool | None]:
    """A verdict and its ``conclusive`` from what a caller gave: a row of §2.4 (``verdict_kind``)
    stands for both, and a ``conclusive`` given beside it must agree (ValueError if not)."""
    if not isinstance(verdict, VerdictRow):
        return verdict, conclusive
    if conclusive is not None and conclusive != verdict.conclusive:
        raise ValueError(
            f"the row {verdict.id!r} is conclusive={verdict.conclusive}; "
            f"conclusive={conclusive} beside it contradicts it: give one or the other"
        )
    return verdict.verdict, verdict.conclusive


VERDICT_OUTCOMES: Final[tuple[VerdictRow, ...]] = tuple(
    VerdictRow(verdict, conclusive)
    for verdict in VERDICTS
    for conclusive in (True, False)
    if not (conclusive and verdict in NEVER_CONCLUSIVE)
)
"""§2.4: every (verdict, conclusive) pair a response may carry: seven rows."""

TIERS: Final[tuple[Tier, ...]] = ("absolute", "composite", "conditional", "weak")
"""§2.3: the signal tiers."""

Family = Literal[
    "network-geometry", "transport-stack", "tls-construction", "compute", "render", "declared"
]
FAMILIES: Final[tuple[Family, ...]] = get_args(Family)
"""§2.3: evidence family identifiers, the allowed values of ``contradicting_families``."""

KNOWN_PREFIXES: Final[dict[str, str]] = {
    "geo": "network-geometry",
    "stack": "transport-stack",
}
"""§2.3: the signal id prefixes the spec names, mapped to their family (others: not shown)."""

PREFIX_OF_FAMILY: Final[dict[str, str]] = {
    family: prefix for prefix, family in KNOWN_PREFIXES.items()
}
"""The inverse of KNOWN_PREFIXES."""

SIGNAL_ID_PATTERN: Final = r"^[^.\s]+(\.[^.\s]+)+$"
"""§2.3: a dot-namespaced id: a prefix, then one or more dot-separated names, no white space."""

SESSION_LIFETIME_SECONDS: Final = 15 * 60
"""§3 and §8: a session expires 15 minutes after collection."""

ENDPOINT_PATH: Final = "/e"
SESSION_PARAM: Final = "n"
"""§4: ``GET {base_url}/e?n=<session id>``."""
API_METHODS: Final = ("GET", "HEAD")
"""What ``/e`` answers: GET, and HEAD as HTTP defines it (RFC 9110 §9.3.2); others get 405."""


def is_api_call(method: str, path: str) -> bool:
    """Whether a request is the Explain API's own call (``GET``/``HEAD /e``): the one test of it."""
    return path == ENDPOINT_PATH and method in API_METHODS


STATUSES: Final[tuple[int, ...]] = (200, 401, 404, 429)
"""§7: the statuses the service answers with."""


def family_of(signal_id: str) -> str:
    """Return the evidence family a signal id belongs to (§2.3).

    A known prefix maps to its documented family; an unknown prefix stands for a family of its
    own, so two signals with different unknown prefixes count as different families.
    """
    prefix = signal_id.partition(".")[0]
    return KNOWN_PREFIXES.get(prefix, prefix)
