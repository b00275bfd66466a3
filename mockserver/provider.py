"""``VerdictProvider``: the mock's verdicts as a faker provider, for integrators who use faker.

faker is not a dependency of a plain install (its pytest plugin would load in every run of every
project that installs this one): this module asks for the ``[faker]`` extra in one line.
"""

from __future__ import annotations

from typing import Any

from verdict_contract.core.extras import require_extra
from verdict_contract.core.spec import FAMILIES, TIERS, Tier, VerdictKind
from verdict_contract.core.types import Verdict

from .factory import make_verdict
from .model.generate import headline_context, templates

require_extra("faker", "VerdictProvider")

from faker.providers import BaseProvider  # noqa: E402  (after the check that names the extra)


class VerdictProvider(BaseProvider):
    """Faker provider: ``fake.verdict(...)`` and ``fake.signal(...)``, seeded by faker."""

    def verdict(
        self, verdict: VerdictKind | None = None, conclusive: bool | None = None, **overrides: Any
    ) -> Verdict:
        session_id = f"faker-{self.generator.random.getrandbits(64):016x}"
        return make_verdict(verdict, conclusive, session_id=session_id, **overrides)

    def signal(self, family: str | None = None, tier: Tier | None = None) -> dict[str, str]:
        family = family or self.random_element(FAMILIES)
        chosen: Tier = tier if tier is not None else self.random_element(TIERS)
        template = self.random_element(templates(family, chosen))
        context = headline_context(self.generator.random)
        return {
            "id": template.id_for(family),
            "tier": template.tier,
            "headline": template.headline.format(**context),
        }
