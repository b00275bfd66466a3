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
    headline: str  # str.format template over the placeholders of generate._context

    def id_for(self, family: str) -> str:
        return f"{FAMILY_PREFIX[family]}.{self.name}"


CATALOGUE: Final[dict[str, tuple[SignalTemplate, ...]]] = {
    "network-geometry": (
        SignalTemplate(
            "rtt-floor",
            "absolute",
            "Round-trip time of {rtt} ms is below the physical floor for {country}.",
        ),
        SignalTemplate(
            "anchor-triangulation",
            "composite",
            "Latency to measurement anchors places the client near {city}.",
        ),
        SignalTemplate(
            "clock-offset",
            "conditional",
            "The clock offset fits {timezone}, not the claimed locale {locale}.",
        ),
        SignalTemplate(
            "hosting-asn",
            "weak",
            "The address belongs to a hosting network, not a residential one.",
        ),
    ),
    "transport-stack": (
        SignalTemplate(
            "tcp-options",
            "absolute",
            "TCP option order is exactly that of {real_os}, not {claimed_os}.",
        ),
        SignalTemplate(
            "initial-ttl",
            "composite",
            "An initial TTL of {ttl} is typical of {real_os}, not {claimed_os}.",
        ),
        SignalTemplate(
            "mss-tunnel",
            "conditional",
            "An MSS of {mss} bytes points to a tunnel or VPN on the path.",
        ),
        SignalTemplate("window-scale", "weak", "The TCP window scale is unusual for {claimed_os}."),
    ),
    "tls-construction": (
        SignalTemplate(
            "hello-library",
            "absolute",
            "The TLS ClientHello was built by {tls_library}, not by {browser}.",
        ),
        SignalTemplate(
            "extension-order",
            "composite",
            "TLS extension order does not match {browser} {browser_version}.",
        ),
        SignalTemplate(
            "alpn-mismatch", "conditional", "ALPN offers differ from the defaults of {browser}."
        ),
        SignalTemplate("grease-absent", "weak", "The ClientHello carries no GREASE values."),
    ),
    "compute": (
        SignalTemplate(
            "wasm-isa",
            "absolute",
            "WebAssembly timing reveals {real_arch} code, not {claimed_arch}.",
        ),
        SignalTemplate(
            "core-timing",
            "composite",
            "Timer contention points to {cores} cores, not the {claimed_cores} declared.",
        ),
        SignalTemplate(
            "timer-coarsening",
            "conditional",
            "Timer resolution is coarser than {browser} allows by default.",
        ),
        SignalTemplate("throttled", "weak", "Compute ran throttled for part of the session."),
    ),
    "render": (
        SignalTemplate(
            "gpu-impossible", "absolute", "The WebGL renderer '{gpu}' cannot exist on {claimed_os}."
        ),
        SignalTemplate(
            "font-set", "composite", "The installed fonts are the defaults of {real_os}."
        ),
        SignalTemplate(
            "canvas-noise",
            "conditional",
            "Canvas output carries noise typical of anti-fingerprinting tools.",
        ),
        SignalTemplate("emoji-style", "weak", "Emoji glyphs differ from {claimed_os} defaults."),
    ),
    "declared": (
        SignalTemplate(
            "platform-mismatch",
            "absolute",
            "The user agent claims {claimed_os} while the platform reports {real_os}.",
        ),
        SignalTemplate(
            "language-locale",
            "composite",
            "Accepted languages ({language}) do not fit the claimed locale {locale}.",
        ),
        SignalTemplate(
            "timezone-locale",
            "conditional",
            "The declared time zone {timezone} is rare for {country}.",
        ),
        SignalTemplate("ua-reduced", "weak", "The user agent string is reduced or frozen."),
    ),
}
assert set(CATALOGUE) == set(FAMILIES), "every family needs signals"


def templates(family: str, *tiers: Tier) -> list[SignalTemplate]:
    """Return the catalogue entries of ``family`` with one of ``tiers``."""
    return [t for t in CATALOGUE[family] if t.tier in tiers]
