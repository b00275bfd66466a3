"""The mock's signal catalogue: plausible signals per evidence family, with headline templates.

The spec names the prefixes ``geo.`` and ``stack.``; the other four prefixes are the mock's own
(the real ones are not published) and are documented in docs/mock.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from verdict_contract.core.spec import FAMILIES, PREFIX_OF_FAMILY, Tier

FAMILY_PREFIX: Final[dict[str, str]] = {
    **PREFIX_OF_FAMILY,
    "tls-construction": "tls",
    "compute": "compute",
    "render": "render",
    "declared": "declared",
}
assert set(FAMILY_PREFIX) == set(FAMILIES), "every family needs a prefix"


@dataclass(frozen=True)
class SignalTemplate:
    name: str
    tier: Tier
    headline: str  # str.format template over the placeholders of generate.headline_context

    def id_for(self, family: str) -> str:
        return f"{FAMILY_PREFIX[family]}.{self.name}"


_TIERS: Final[tuple[Tier, ...]] = ("absolute", "composite", "conditional", "weak")

_SIGNALS: Final[dict[str, dict[str, str]]] = {
    "network-geometry": {
        "rtt-floor": "Round-trip time of {rtt} ms is below the physical floor for {country}.",
        "anchor-triangulation": "Latency to measurement anchors places the client near {city}.",
        "clock-offset": "The clock offset fits {timezone}, not the claimed locale {locale}.",
        "hosting-asn": "The address belongs to a hosting network, not a residential one.",
    },
    "transport-stack": {
        "tcp-options": "TCP option order is exactly that of {real_os}, not {claimed_os}.",
        "initial-ttl": "An initial TTL of {ttl} is typical of {real_os}, not {claimed_os}.",
        "mss-tunnel": "An MSS of {mss} bytes points to a tunnel or VPN on the path.",
        "window-scale": "The TCP window scale is unusual for {claimed_os}.",
    },
    "tls-construction": {
        "hello-library": "The TLS ClientHello was built by {tls_library}, not by {browser}.",
        "extension-order": "TLS extension order does not match {browser} {browser_version}.",
        "alpn-mismatch": "ALPN offers differ from the defaults of {browser}.",
        "grease-absent": "The ClientHello carries no GREASE values.",
    },
    "compute": {
        "wasm-isa": "WebAssembly timing reveals {real_arch} code, not {claimed_arch}.",
        "core-timing": (
            "Timer contention points to {cores} cores, not the {claimed_cores} declared."
        ),
        "timer-coarsening": "Timer resolution is coarser than {browser} allows by default.",
        "throttled": "Compute ran throttled for part of the session.",
    },
    "render": {
        "gpu-impossible": "The WebGL renderer '{gpu}' cannot exist on {claimed_os}.",
        "font-set": "The installed fonts are the defaults of {real_os}.",
        "canvas-noise": "Canvas output carries noise typical of anti-fingerprinting tools.",
        "emoji-style": "Emoji glyphs differ from {claimed_os} defaults.",
    },
    "declared": {
        "platform-mismatch": (
            "The user agent claims {claimed_os} while the platform reports {real_os}."
        ),
        "language-locale": (
            "Accepted languages ({language}) do not fit the claimed locale {locale}."
        ),
        "timezone-locale": "The declared time zone {timezone} is rare for {country}.",
        "ua-reduced": "The user agent string is reduced or frozen.",
    },
}
"""Each family's signals by name: one per tier, in the order of ``_TIERS``."""

CATALOGUE: Final[dict[str, tuple[SignalTemplate, ...]]] = {
    family: tuple(
        SignalTemplate(name, tier, headline)
        for tier, (name, headline) in zip(_TIERS, signals.items(), strict=True)
    )
    for family, signals in _SIGNALS.items()
}
assert set(CATALOGUE) == set(FAMILIES), "every family needs signals"


def templates(family: str, *tiers: Tier) -> list[SignalTemplate]:
    """Return the catalogue entries of ``family`` with one of ``tiers``."""
    return [t for t in CATALOGUE[family] if t.tier in tiers]
