"""Which host names only ever mean this machine (the mock's guard, the suite's transport check)."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """Whether a host name or address (``[::1]`` included) only ever means this machine."""
    name = host.strip().lower().removeprefix("[").removesuffix("]").rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):  # RFC 6761: always loopback
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
