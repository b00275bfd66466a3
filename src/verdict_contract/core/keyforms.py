"""The forms a key takes once encoded in an answer, so whoever reads answers can look for them."""

from __future__ import annotations

import base64

MIN_ENCODED = 6
"""Shorter runs of base64 are ordinary text; they are not looked for."""


def base64_forms(secret: str) -> list[str]:
    """What base64 (standard or URL-safe) of any text holding ``secret`` contains, whatever
    comes before or after it: ``secret`` alone, ``Bearer secret``, ``user:secret``, a JSON.

    The encoding depends on where the secret starts modulo 3 bytes; at each of the three
    alignments, the characters made of the secret's bits alone are kept.
    """
    raw = secret.encode()
    forms: list[str] = []
    for offset in range(3):
        start = (4 * offset + 2) // 3  # characters holding bits of what comes before
        end = (offset + len(raw)) * 8 // 6  # the last whole character of the secret's bits
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            core = encode(b"\0" * offset + raw).decode("ascii")[start:end]
            if len(core) >= MIN_ENCODED and core not in forms:
                forms.append(core)
    return forms


def hex_forms(secret: str) -> list[str]:
    """The secret's bytes in hex (a debug dump, a digest's input), lower and upper case: run
    together, split by a space, a colon or a dash, each byte escaped (``\\x73``) or a C array's
    (``0x73, 0x6b``)."""
    pairs = [f"{byte:02x}" for byte in secret.encode()]
    forms = [sep.join(pairs) for sep in ("", " ", ":", "-")] + ["\\x" + "\\x".join(pairs)]
    forms += ["0x" + sep.join(pairs) for sep in (", 0x", " 0x")]
    return forms + [form.upper().replace("\\X", "\\x").replace("0X", "0x") for form in forms]
