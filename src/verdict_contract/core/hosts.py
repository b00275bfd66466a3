"""Which host names only ever mean this machine (the mock's guard, the suite's transport check)."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """Whether a host name or address (``[::1]`` included) only ever means this machine, as a
    browser reads a ``Host`` header (RFC 6761: ``*.localhost`` is loopback); whether a secret
    may travel to it over plain http is :func:`is_loopback_address`'s to say."""
    name = host.strip().lower().removeprefix("[").removesuffix("]").rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):  # RFC 6761: always loopback
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def is_loopback_address(host: str) -> bool:
    """Whether sending a secret to ``host`` over plain http stays on this machine, decided by
    the address, not the name: a loopback address (``127.0.0.0/8``, ``[::1]``), or ``localhost``
    itself (answered from the hosts file). Any other name, ``*.localhost`` included, may be
    looked up in the DNS, whose answer an attacker can give."""
    name = host.strip().lower().removeprefix("[").removesuffix("]").rstrip(".")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
