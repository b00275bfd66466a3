"""Which hosts mean this machine: as a Host header reads, and where plain http may carry a key."""

from __future__ import annotations

import pytest

from verdict_contract.core.hosts import is_loopback, is_loopback_address


@pytest.mark.parametrize(
    ("host", "stays_here"),
    [
        ("127.0.0.1", True),
        ("127.9.8.7", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST.", True),
        ("staging.localhost", False),  # a name the DNS may answer for
        ("localhost.example", False),
        ("10.0.0.1", False),
        ("::ffff:10.0.0.1", False),
    ],
)
def test_plain_http_may_carry_a_key_only_to_a_loopback_address(host: str, stays_here: bool) -> None:
    assert is_loopback_address(host) is stays_here


def test_a_host_header_of_a_localhost_name_is_local() -> None:
    """RFC 6761: browsers keep ``*.localhost`` on this machine, so the mock's guard takes it."""
    assert is_loopback("staging.localhost")
    assert not is_loopback("localhost.example")
