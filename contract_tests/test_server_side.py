"""The endpoint is for servers: browsers are not invited to read it (spec §1, §5.4)."""

from __future__ import annotations

import pytest

from .target import Target

ORIGIN = "https://shop.example"


@pytest.mark.clause("§1, §5.4")
def test_no_cross_origin_invitation(contract_target: Target, any_session: str) -> None:
    response = contract_target.client.request(
        params=[("n", any_session)], headers={"Origin": ORIGIN}
    )
    allowed = response.headers.get("access-control-allow-origin")
    assert allowed not in ("*", ORIGIN), (
        f"received Access-Control-Allow-Origin {allowed!r}; documented: the key is a "
        "server-side secret, so browsers must not be invited to call /e"
    )
