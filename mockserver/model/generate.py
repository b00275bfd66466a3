"""Deterministic, realistic verdicts: the same (seed, session id) gives the same bytes.

Each verdict draws from a ``random.Random`` seeded by the seed and the session id alone, so
generation is thread-safe without a lock. Its signals come from the catalogue below: plausible
signals per evidence family, one per tier, with headline templates.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from verdict_contract.core.spec import (
    FAMILIES,
    MAY_BE_CONCLUSIVE,
    PREFIX_OF_FAMILY,
    SCHEMA_VERSION,
    TIERS,
    VERDICTS,
    Tier,
    VerdictKind,
    never_conclusive,
)
from verdict_contract.core.validator import validate_verdict

from .sessions import SessionSpec, SpecError

DEFAULT_SEED = "verdict-mock"

DEFAULT_CONCLUSIVE: dict[VerdictKind, bool] = {kind: kind == "contradicted" for kind in VERDICTS}
"""``conclusive`` of a verdict asked for by kind alone (``mint(verdict=k)``): the same every run.
A contradiction is conclusive (the case integrations act on); a refusal is reviewed, not blocked."""

# The spec names the prefixes ``geo.`` and ``stack.``; the other four are the mock's own (the
# real ones are not published), documented in docs/mock.md.
FAMILY_PREFIX: Final[dict[str, str]] = {
    **PREFIX_OF_FAMILY,
    "tls-construction": "tls",
    "compute": "compute",
    "render": "render",
    "declared": "declared",
}


@dataclass(frozen=True)
class SignalTemplate:
    name: str
    tier: Tier
    headline: str  # str.format template over the placeholders of headline_context

    def id_for(self, family: str) -> str:
        return f"{FAMILY_PREFIX[family]}.{self.name}"


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
"""Each family's signals by name: one per tier, in the order of ``TIERS``."""

CATALOGUE: Final[dict[str, tuple[SignalTemplate, ...]]] = {
    family: tuple(
        SignalTemplate(name, tier, headline)
        for tier, (name, headline) in zip(TIERS, signals.items(), strict=True)
    )
    for family, signals in _SIGNALS.items()
}


def templates(family: str, *tiers: Tier) -> list[SignalTemplate]:
    """Return the catalogue entries of ``family`` with one of ``tiers``."""
    return [t for t in CATALOGUE[family] if t.tier in tiers]


_OSES = ("Windows 11", "macOS 15", "Android 15", "iOS 18", "Ubuntu 24.04", "ChromeOS")
_BROWSERS = ("Chrome", "Firefox", "Safari", "Edge")
_TLS_LIBRARIES = ("Go crypto/tls", "OpenSSL 3", "curl-impersonate", "Python ssl")
_GPUS = ("Apple M3", "Adreno 750", "NVIDIA GeForce RTX 4070", "Intel Iris Xe", "Mali-G715")
_ARCHES = ("x86-64", "ARM64")
_COUNTRIES = ("Germany", "Brazil", "Japan", "Canada", "India", "Kenya", "Norway", "Mexico")
_CITIES = ("Frankfurt", "Osaka", "Toronto", "Mumbai", "Nairobi", "Oslo", "Warsaw", "Perth")
_TIMEZONES = ("Europe/Berlin", "America/Sao_Paulo", "Asia/Tokyo", "Asia/Kolkata", "Europe/Oslo")
_LOCALES = ("de-DE", "pt-BR", "ja-JP", "en-CA", "hi-IN", "sw-KE", "nb-NO", "es-MX", "pl-PL")
_LANGUAGES = ("German", "Portuguese", "Japanese", "English", "Hindi", "Swahili", "Spanish")


def _phrase(families: Sequence[str]) -> str:
    names = [f.replace("-", " ") for f in families]
    if len(names) <= 1:
        return "".join(names) + " measurements"
    return ", ".join(names[:-1]) + f" and {names[-1]} measurements"


def headline_context(rng: random.Random) -> dict[str, str]:
    """Values for the placeholders of the catalogue's headline templates."""
    claimed_os, real_os = rng.sample(_OSES, 2)
    claimed_arch, real_arch = rng.sample(_ARCHES, 2)
    cores = rng.choice((2, 4, 8, 16))
    return {
        "country": rng.choice(_COUNTRIES),
        "city": rng.choice(_CITIES),
        "timezone": rng.choice(_TIMEZONES),
        "locale": rng.choice(_LOCALES),
        "language": rng.choice(_LANGUAGES),
        "rtt": str(rng.randint(2, 9)),
        "ttl": str(rng.choice((64, 128, 255))),
        "mss": str(rng.choice((1360, 1380, 1400, 1420))),
        "claimed_os": claimed_os,
        "real_os": real_os,
        "browser": rng.choice(_BROWSERS),
        "browser_version": str(rng.randint(120, 140)),
        "tls_library": rng.choice(_TLS_LIBRARIES),
        "gpu": rng.choice(_GPUS),
        "claimed_arch": claimed_arch,
        "real_arch": real_arch,
        "cores": str(cores),
        "claimed_cores": str(cores * 2),
    }


RENDERED_KEPT: Final = 4096  # then forgotten all at once


@dataclass
class VerdictGenerator:
    """Builds verdict bodies and their JSON bytes for a seed."""

    seed: str = DEFAULT_SEED

    def __post_init__(self) -> None:
        # Rendered once a session (bench_instructions --row demo: 110k a GET /e, 394k without),
        # found by its id: hashing its spec cost 2% (a named session's is the same object)
        self._rendered: dict[str, tuple[SessionSpec, bytes]] = {}

    def _rng(self, session_id: str) -> random.Random:
        digest = hashlib.blake2b(f"{self.seed}\0{session_id}".encode(), digest_size=8).digest()
        return random.Random(int.from_bytes(digest, "big"))

    def render(self, session_id: str, spec: SessionSpec) -> bytes:
        """The verdict body of ``session_id`` as JSON (the last :data:`RENDERED_KEPT` are kept)."""
        kept, body = self._rendered.get(session_id, (None, b""))
        if kept is not spec and kept != spec:
            body = json.dumps(
                self.verdict(session_id, spec), ensure_ascii=False, separators=(",", ":")
            ).encode()
            if len(self._rendered) >= RENDERED_KEPT:
                self._rendered.clear()
            self._rendered[session_id] = spec, body
        return body

    def verdict(self, session_id: str, spec: SessionSpec | None = None) -> dict[str, Any]:
        """Return the verdict body for ``session_id``; raises SpecError for an impossible spec."""
        spec = spec or SessionSpec()
        rng = self._rng(spec.key or session_id)
        if spec.verdict is not None:
            verdict: VerdictKind = spec.verdict
        elif spec.conclusive:  # only these two can be conclusive
            verdict = rng.choice(MAY_BE_CONCLUSIVE)
        else:
            verdict = rng.choice(VERDICTS)
        conclusive = spec.conclusive
        if conclusive is None and spec.verdict is not None:  # asked for a kind: its default
            conclusive = DEFAULT_CONCLUSIVE[verdict]
        if conclusive is None:
            conclusive = rng.random() < {"contradicted": 0.6, "refused": 0.3}.get(verdict, 0.0)
        if (problem := never_conclusive(verdict, conclusive)) is not None:
            raise SpecError(problem)
        measured, reporting = _counts(rng, verdict, conclusive)
        chosen = _signals(rng, verdict, conclusive, rng.sample(FAMILIES, measured)[:reporting])
        context = headline_context(rng)
        named = list(dict.fromkeys(family for family, _ in chosen))
        contradicting = named if verdict == "contradicted" else []
        build = f"svs-2026.{rng.randint(1, 12)}.{rng.randint(0, 40)}-{rng.getrandbits(28):07x}"
        body: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "provenance": {"build": build},
            "verdict": verdict,
            "conclusive": conclusive,
            "summary": _summary(verdict, conclusive, named, measured, reporting, context),
            "contradicting_families": contradicting,
            "families": {"measured": measured, "reporting": reporting},
            "signals": [
                {"id": t.id_for(family), "tier": t.tier, "headline": t.headline.format(**context)}
                for family, t in chosen
            ],
        }
        if spec.fields:
            body.update(spec.overrides)
            if not spec.allow_invalid:
                broken = validate_verdict(body, strict=True)
                if broken:
                    raise SpecError(
                        "the field overrides break the contract: "
                        + "; ".join(f"{v.path or '/'}: {v.message}" for v in broken)
                        + ' (send "allow_invalid": true to serve a broken verdict on purpose)'
                    )
        if spec.schema is not None:  # a future body (§9.3), on purpose: no rule to break
            body["schema"] = spec.schema
        if spec.extra:  # undocumented fields: an additive change
            body.update(json.loads(spec.extra))
        return body


def _counts(rng: random.Random, verdict: str, conclusive: bool) -> tuple[int, int]:
    measured = rng.randint(4, len(FAMILIES))
    if verdict == "refused":  # far fewer report than were measured; a basis needs one
        return measured, rng.randint(1 if conclusive else 0, measured - 3)
    if verdict == "insufficient":
        return measured, rng.randint(0, 2)
    return measured, rng.randint(max(3, measured - 2), measured)


def _signals(
    rng: random.Random, verdict: str, conclusive: bool, families: Sequence[str]
) -> list[tuple[str, SignalTemplate]]:
    pick = rng.choice
    if conclusive:  # §2.2: one absolute signal, or composites from two families
        if len(families) < 2 or rng.random() < 0.5:
            family = pick(families)
            chosen = [(family, pick(templates(family, "absolute")))]
        else:
            first, second = rng.sample(families, 2)
            chosen = [(f, pick(templates(f, "composite"))) for f in (first, second)]
        if verdict == "contradicted" and rng.random() < 0.5:
            family = chosen[0][0]
            chosen.append((family, pick(templates(family, "conditional", "weak"))))
        return chosen
    if verdict == "contradicted":  # composites from one family at most: review, not action
        family = pick(families)
        chosen = [(family, pick(templates(family, "composite", "conditional")))]
        other = pick(families)
        if other != family and rng.random() < 0.5:
            chosen.append((other, pick(templates(other, "conditional", "weak"))))
        return chosen
    if verdict == "disputed":
        count = rng.randint(1, min(2, len(families)))
        return [(f, pick(templates(f, "conditional", "weak"))) for f in rng.sample(families, count)]
    if verdict in ("uncontradicted", "refused") and families and rng.random() < 0.4:
        family = pick(families)
        return [(family, pick(templates(family, "weak")))]
    return []


def _summary(
    verdict: str,
    conclusive: bool,
    families: list[str],
    measured: int,
    reporting: int,
    context: dict[str, str],
) -> str:
    claim = f"{context['claimed_os']} client in {context['country']}"
    refused = f"The client refused {measured - reporting} of {measured} measurements"
    if verdict == "contradicted":
        tail = (
            "The evidence is strong enough for automatic action."
            if conclusive
            else "The evidence supports a review rather than automatic blocking."
        )
        return f"The claims of this {claim} are contradicted by {_phrase(families)}. {tail}"
    if verdict == "refused" and conclusive:
        return f"{refused}, and {_phrase(families)} alone are strong enough for automatic action."
    if verdict == "refused":
        return f"{refused}, so its claims could not be checked."
    if verdict == "disputed":
        return (
            f"Evidence from {_phrase(families)} leans toward contradicting this {claim}, "
            f"but it is not conclusive."
        )
    if verdict == "uncontradicted":
        return f"No contradiction of this {claim} was found across {reporting} families."
    return (
        f"Only {reporting} of {measured} families reported, too few to reach a verdict "
        f"on this {claim}."
    )
