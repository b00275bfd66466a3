"""The tenants file (``--tenants``): teams sharing one mock, each in a state of its own.

::

    tenants:
      payments:
        control_token: "a long random token"
        api_keys: ["pay-ci-key", "pay-dev-key"]
        rate_limit: 600/60          # optional: the mock's own otherwise

The file is untrusted as a scenario is (read bounded: :mod:`.scenariofile`), and every problem
is one line naming the file and the tenant.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final, NamedTuple

from verdict_contract.core.errors import ScenarioError
from verdict_contract.core.rates import RateLimit
from verdict_contract.core.redact import FRAGMENT, KeyFinder, Secret, mask, masked_name

from . import scenariofile
from .scenariofile import ProblemAt

OPERATOR: Final = "default"
"""The tenant of the mock's own ``--api-key`` keys and ``--control-token``: the operator's."""
NAME: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
"""A tenant's name: it is a metric label, a log field and part of its Redis keys."""
MIN_TOKEN_CHARS: Final = 16
MAX_TENANTS: Final = 1000
_FIELDS: Final = frozenset({"control_token", "api_keys", "rate_limit"})


class Tenant(NamedTuple):
    """One team's part of a shared mock."""

    name: str
    control_token: Secret
    api_keys: tuple[str, ...]
    rate_limit: RateLimit | None
    """None: the mock's own (its scenario's, else ``--rate-limit``)."""

    def __repr__(self) -> str:  # pytest -l and tracebacks print it: keys masked, as the token
        keys = ", ".join(mask(key) for key in self.api_keys)
        return f"Tenant({self.name!r}, keys [{keys}], rate_limit {self.rate_limit})"


def _tenant(name: object, raw: object) -> Tenant:
    """One tenant's entry; a problem names it masked (it may be a key put where a name goes)."""
    shown, at = f"tenants.{masked_name(str(name))}", ("tenants", str(name))
    if not isinstance(name, str) or not NAME.fullmatch(name) or name == OPERATOR:
        rule = f"1 to 40 of a-z, 0-9, _ and -, not first _ or -, not {OPERATOR!r} (the operator's)"
        raise ProblemAt(f"tenant name {masked_name(str(name))!r}: documented: {rule}", at)
    if not isinstance(raw, Mapping) or set(raw) - _FIELDS:
        unknown = sorted(map(str, set(raw) - _FIELDS)) if isinstance(raw, Mapping) else []
        received = f"the fields {', '.join(map(masked_name, unknown))}" if unknown else "no mapping"
        documented = f"documented: a mapping of {', '.join(sorted(_FIELDS))}"
        raise ProblemAt(f"{shown}: received {received}; {documented}", at)
    token = raw.get("control_token")
    if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS:
        raise ProblemAt(
            f"{shown}.control_token: documented: a string of at least {MIN_TOKEN_CHARS} "
            "characters (python3 -c 'import secrets; print(secrets.token_urlsafe(24))')",
            at,
        )
    keys = raw.get("api_keys")
    if (
        not isinstance(keys, list)
        or not keys
        or not all(isinstance(k, str) and k and k.isprintable() and " " not in k for k in keys)
    ):
        documented = "documented: a non-empty list of keys (printable, no spaces)"
        raise ProblemAt(f"{shown}.api_keys: {documented}", at)
    limit = raw.get("rate_limit")
    try:
        rate_limit = None if limit is None else RateLimit.parse(str(limit))
    except ValueError as exc:
        raise ProblemAt(f"{shown}.rate_limit: {exc}", at) from None
    return Tenant(name, Secret(token), tuple(keys), rate_limit)


def parse_tenants(
    raw: object, keys: tuple[str, ...] = (), token: Secret | None = None, public: str = ""
) -> dict[str, Tenant]:
    """Validate decoded tenants data beside the operator's ``keys`` and control ``token``. Each
    key and each token is one tenant's, in one role: a key that is a token too would give its
    holders control. No name holds a part of a key or token but ``public`` (metrics show it)."""
    tenants = raw.get("tenants") if isinstance(raw, Mapping) and set(raw) == {"tenants"} else None
    if not isinstance(tenants, Mapping) or not tenants:
        raise ScenarioError("documented: a mapping with one field, tenants: {NAME: {...}, ...}")
    if len(tenants) > MAX_TENANTS:
        raise ScenarioError(f"{len(tenants)} tenants; documented: at most {MAX_TENANTS}")
    parsed = [_tenant(name, spec) for name, spec in tenants.items()]
    owners = {key: ("the operator's", "api_keys") for key in keys}
    if token is not None:
        owners[token.reveal()] = ("the operator's", "control_token")
    for tenant in parsed:
        held = [(key, "api_keys") for key in tenant.api_keys]
        for secret, role in [*held, (tenant.control_token.reveal(), "control_token")]:
            other = owners.setdefault(secret, (f"{tenant.name}'s", role))
            if other != (f"{tenant.name}'s", role):
                raise ScenarioError(
                    f"tenants.{tenant.name}.{role}: {mask(secret)} is also in {' '.join(other)}; "
                    "a key or a token belongs to one tenant, in one role"
                )
    finder = KeyFinder.of(s.encode() for s in owners if len(s) >= FRAGMENT and s != public)
    for tenant in parsed:
        if finder.finds(tenant.name):
            raise ScenarioError(
                f"tenant name {mask(tenant.name)!r}: holds 8 characters of a key or a token in "
                "a row (a name is shown in metrics and logs)"
            )
    return {tenant.name: tenant for tenant in parsed}


def load_tenants(
    path: Path, keys: tuple[str, ...] = (), token: Secret | None = None, public: str = ""
) -> dict[str, Tenant]:
    """Read and validate a tenants file (YAML, or JSON by its suffix); problems name it."""
    return scenariofile.load(path, lambda raw: parse_tenants(raw, keys, token, public))
