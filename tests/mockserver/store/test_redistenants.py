"""Tenants across processes sharing a real redis-server: isolation holds whichever process
answers, and each tenant's keys stay apart (in a slot of their own on a cluster).

One process per test module side (two ``verdict-mock`` processes, one ``--state``, one
``--tenants`` file); requests alternate between them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from tests.mockserver.store.test_redisstate import Mocks, start_mocks
from tests.mockserver.test_tenants import OPERATOR_TOKEN, SCENARIO, TENANTS, key, token
from tests.redisserver import redis_server


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with redis_server() as server:
        yield server.url


@pytest.fixture(scope="module")
def mocks(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mocks]:
    folder = tmp_path_factory.mktemp("tenants")
    (folder / "tenants.json").write_text(json.dumps(TENANTS))
    (folder / "scenario.yaml").write_text(SCENARIO)
    extra = ["--tenants", str(folder / "tenants.json"), "--scenario", str(folder / "scenario.yaml")]
    started = start_mocks(2, redis_url, folder, "--control-token", OPERATOR_TOKEN, *extra)
    yield started
    started.close()


@pytest.fixture
def fresh(mocks: Mocks) -> Mocks:
    for tenant in ("pay", "risk"):
        reset = mocks.post(0, "/_mock/reset", headers={"X-Mock-Token": token(tenant)})
        assert reset.status_code == 204
    return mocks


def _as(tenant: str) -> dict[str, str]:
    return {"X-Mock-Token": token(tenant)}


def test_a_session_minted_on_one_process_is_its_tenants_on_every_other(fresh: Mocks) -> None:
    minted = fresh.post(0, "/_mock/sessions", headers=_as("pay"), json={})
    n = minted.json()["n"]
    assert fresh.explain(1, n, key=key("pay")).status_code == 200
    assert fresh.explain(1, n, key=key("risk")).status_code == 404


def test_each_tenants_steps_are_used_once_and_its_own(fresh: Mocks) -> None:
    assert fresh.explain(0, "scripted", key=key("pay")).status_code == 404
    assert fresh.explain(1, "scripted", key=key("risk")).status_code == 404  # risk's own first
    assert fresh.explain(1, "scripted", key=key("pay")).status_code == 429  # pay's second
    assert fresh.explain(0, "scripted", key=key("pay")).status_code == 200  # then its verdict


def test_a_tenants_reset_and_clock_leave_the_others_alone(fresh: Mocks) -> None:
    fresh.explain(0, "demo-refused", key=key("pay"))
    fresh.explain(1, "demo-disputed", key=key("risk"))
    ours = fresh.post(0, "/_mock/sessions", headers=_as("risk"), json={}).json()["n"]
    moved = fresh.post(1, "/_mock/clock", headers=_as("pay"), json={"advance": 901})
    assert moved.json() == {"skew": 901.0}
    assert fresh.post(1, "/_mock/reset", headers=_as("pay")).status_code == 204
    assert fresh.get(0, "/_mock/requests", headers=_as("pay")).json() == []
    risk = fresh.get(0, "/_mock/requests", headers=_as("risk")).json()
    assert [e["n"] for e in risk] == ["demo-disputed"]
    assert fresh.explain(0, ours, key=key("risk")).status_code == 200  # risk's clock unmoved
    operator = {"X-Mock-Token": OPERATOR_TOKEN, "X-Mock-Tenant": "risk"}
    assert fresh.get(1, "/_mock/requests", headers=operator).json()[0]["n"] == "demo-disputed"


def test_a_tenants_rate_limit_is_exact_across_processes(fresh: Mocks) -> None:
    with ThreadPoolExecutor(6) as pool:
        statuses = list(
            pool.map(
                lambda i: fresh.explain(i, "demo-refused", key=key("risk")).status_code, range(6)
            )
        )
    assert sorted(statuses) == [200, 200, 429, 429, 429, 429]  # risk's 2/60, over both
    assert fresh.explain(1, "demo-refused", key=key("pay")).status_code == 200


def test_each_tenants_keys_are_under_a_hash_tag_of_its_own(fresh: Mocks, redis_url: str) -> None:
    fresh.explain(0, "demo-refused", key=key("pay"))
    fresh.explain(0, "demo-refused", key=key("risk"))
    fresh.explain(0, "demo-refused", key="redis-test-key-0001")  # the operator's
    client = redis.Redis.from_url(redis_url)
    tags = {k.decode().split("}")[0] for k in client.scan_iter("verdict-mock:*")}
    client.close()
    assert len(tags) == 3, tags  # three tenants, three slots on a cluster
    assert any(".pay." in tag or tag.startswith("verdict-mock:{pay.") for tag in tags), tags


def test_the_tenants_of_a_process_share_its_connections(fresh: Mocks, redis_url: str) -> None:
    """Tenants are many; a process opens what one mock opens, not a set of connections each."""
    for index in range(4):
        for tenant in ("pay", "risk"):
            fresh.explain(index, "demo-refused", key=key(tenant))
            assert fresh.get(index, "/_mock/requests", headers=_as(tenant)).status_code == 200
        fresh.explain(index, "demo-refused", key="redis-test-key-0001")  # the operator's
    client = redis.Redis.from_url(redis_url)
    opened = len(client.client_list()) - 1  # this client's own
    client.close()
    assert opened <= 2 * 3, opened  # per process: its loop's line and the control API's
