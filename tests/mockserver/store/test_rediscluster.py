"""The shared state on a real 3-node Redis Cluster.

A mock's keys share one hash tag, so one slot, but which node holds that slot depends on the
secret: with a plain client, 5 secrets of 6 met a ``MOVED``. The test starts three
``redis-server --cluster-enabled yes`` on 127.0.0.1, joins them with ``redis-cli --cluster
create`` and kills them after; the store's contract runs on it as on one Redis.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from redis.exceptions import InvalidResponse

from tests.mockserver.store.test_redisstate import start_mocks
from tests.mockserver.store.test_store_contract import StoreContract
from tests.mockserver.test_tenants import OPERATOR_TOKEN, TENANTS, key, token
from tests.redisserver import RedisClusterNodes, redis_cluster
from verdict_contract.core.redact import Secret
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.store.backend import StateUnavailable, StateURL
from verdict_contract.mockserver.store.redisstate import RedisStore
from verdict_contract.testing.mocks import live_mock

KEY = "cluster-test-key-0001"
SECRETS = [f"cluster-secret-{index}" for index in range(6)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterNodes]:
    with redis_cluster(tmp_path_factory.mktemp("cluster")) as nodes:
        yield nodes


def settings(url: str, secret: str, **extra: object) -> Settings:
    given: dict[str, object] = {"port": 0, "state": StateURL.parse(url), "secret": secret}
    return Settings(**{"api_keys": (KEY,), **given, **extra})  # type: ignore[arg-type]


def nodes_holding(cluster: RedisClusterNodes, pattern: str) -> set[int]:
    """The nodes (by index) that hold a key matching ``pattern``."""
    holders = set()
    for index, client in enumerate(cluster.clients()):
        if any(client.scan_iter(match=pattern, count=1000)):
            holders.add(index)
        client.close()
    return holders


def test_mocks_with_six_secrets_all_start_and_answer(cluster: RedisClusterNodes) -> None:
    for secret in SECRETS:
        with live_mock(settings(cluster.url, secret, state_name="six")) as mock:
            assert mock.state.shared is not None
            mock.reset()
            n = mock.mint(script=[503])
            assert httpx.get(mock.url(n), headers=mock.headers).status_code == 503
            assert httpx.get(mock.url(n), headers=mock.headers).status_code == 200
            assert [entry.status for entry in mock.journal] == [503, 200]
    assert len(nodes_holding(cluster, "verdict-mock:{six.*")) > 1, (
        "every secret landed on one node: no MOVED was met"
    )


def test_every_key_has_a_ttl_on_the_cluster(cluster: RedisClusterNodes) -> None:
    with live_mock(settings(cluster.url, "ttl-secret", state_name="ttl", state_ttl=600)) as mock:
        mock.reset()
        assert httpx.get(mock.url("demo-contradicted"), headers=mock.headers).status_code == 200
        mock.advance(1)
    ttls = []
    for client in cluster.clients():
        ttls += [client.pttl(key) for key in client.scan_iter(match="verdict-mock:{ttl.*")]
        client.close()
    assert ttls
    assert all(0 < ttl <= 600_000 for ttl in ttls), ttls


def test_a_cluster_url_names_the_cluster(cluster: RedisClusterNodes) -> None:
    url = cluster.url.replace("redis://", "redis+cluster://")
    with live_mock(settings(url, SECRETS[1])) as mock:
        assert mock.state.shared is not None
        assert httpx.get(mock.url("demo-contradicted"), headers=mock.headers).status_code == 200


def _open_sockets_to(ports: list[int]) -> list[socket.socket]:
    """This process's sockets still open to one of ``ports`` (whatever holds them)."""
    found = []
    for each in gc.get_objects():
        if isinstance(each, socket.socket) and each.fileno() != -1:
            try:
                peer = each.getpeername()
            except OSError:  # not connected
                continue
            if peer[1] in ports:
                found.append(each)
    return found


def test_a_mock_that_ends_leaves_no_connection_to_the_cluster(cluster: RedisClusterNodes) -> None:
    """redis-py's cluster client closes its nodes' clients, not their pools: an in-process mock
    (the plugin's) left a connection per node open until the collector found it, and warned."""
    gc.collect()
    gc.disable()  # the collector would close them: what is open is counted before it runs
    try:
        with live_mock(settings(cluster.url, SECRETS[2], state_name="ended")) as mock:
            mock.reset()
            n = mock.mint(script=[503])  # through the blocking client, to the slot's node
            answer = httpx.get(mock.url(n), headers=mock.headers)  # the event loop's client
            assert answer.status_code == 503
            assert _open_sockets_to(cluster.ports)  # connected: the count sees them
        assert _open_sockets_to(cluster.ports) == []
    finally:
        gc.enable()


def test_a_cluster_has_only_database_0(cluster: RedisClusterNodes) -> None:
    with pytest.raises(ValueError, match="database 0 only"):
        create_app(settings(cluster.url.replace("/0", "/3"), "db"))


def test_two_processes_of_one_mock_share_state(cluster: RedisClusterNodes, tmp_path: Path) -> None:
    mocks = start_mocks(2, cluster.url, tmp_path)
    try:
        assert mocks.post(0, "/_mock/reset").status_code == 204
        statuses = mocks.at_once(30, "demo-contradicted")  # a 10/60 limit, across both
        assert sorted(statuses) == [200] * 10 + [429] * 20
        minted = mocks.post(0, "/_mock/sessions", json={"script": [503, 429]})
        n = minted.json()["n"]
        assert [mocks.explain(i, n, key="redis-test-key-0002").status_code for i in range(3)] == [
            503,
            429,
            200,
        ]
        assert len(mocks.journal(1)) == 33
    finally:
        mocks.close()


def test_tenants_hold_across_processes_on_a_cluster(
    cluster: RedisClusterNodes, tmp_path: Path
) -> None:
    """Eight tenants: their keys spread over the nodes, each tenant's in one slot."""
    names = [f"team{index}" for index in range(8)]
    tenants = {
        name: {"control_token": f"{name}-token-0123456789", "api_keys": [f"{name}-key-0001"]}
        for name in names
    }
    (tmp_path / "tenants.json").write_text(json.dumps({"tenants": tenants}))
    extra = ("--control-token", "operator-token-0123456789", "--tenants")
    mocks = start_mocks(2, cluster.url, tmp_path, *extra, str(tmp_path / "tenants.json"))
    try:
        for name in names:
            own = {"X-Mock-Token": f"{name}-token-0123456789"}
            assert mocks.post(0, "/_mock/reset", headers=own).status_code == 204
            n = mocks.post(0, "/_mock/sessions", headers=own, json={"script": [503]}).json()["n"]
            assert mocks.explain(1, n, key=f"{name}-key-0001").status_code == 503
            assert mocks.explain(0, n, key=f"{name}-key-0001").status_code == 200
            other = names[(names.index(name) + 1) % len(names)]
            assert mocks.explain(1, n, key=f"{other}-key-0001").status_code == 404
            journal = mocks.get(1, "/_mock/requests", headers=own).json()
            assert [entry["status"] for entry in journal] == [503, 200]
        assert mocks.get(1, "/_mock/readyz").status_code == 200
    finally:
        mocks.close()
    assert len(nodes_holding(cluster, "verdict-mock:{team*")) > 1, (
        "every tenant landed on one node: no MOVED was met"
    )


class TestRedisClusterStore(StoreContract):
    @pytest.fixture
    def state_url(self, cluster: RedisClusterNodes) -> str:
        return cluster.url


def test_each_reply_is_bounded_on_a_cluster_too(cluster: RedisClusterNodes) -> None:
    # the bound as made (a smaller one would refuse the cluster client's own COMMAND reply)
    backend = RedisStore(StateURL.parse(cluster.url), "bounded", 10)
    assert backend.cluster
    backend.reset({})
    big = "x" * (backend.reply_bytes + 1024 * 1024)  # past it by more than a read (64 KiB)
    node = cluster.ports[_owner(cluster, backend.keys.clock)]  # the node of the mock's keys
    with redis.Redis(port=node) as seeded:  # (a cluster client's close leaves its nodes' open)
        seeded.rpush(backend.keys.journal, big)
        seeded.set(backend.keys.clock, big)
    with pytest.raises(StateUnavailable, match="a reply longer than"):
        backend.entries()

    async def read_clock() -> None:
        client = backend._clients.make_async()
        try:
            await client.get(backend.keys.clock)
        finally:
            await client.aclose()

    with pytest.raises(InvalidResponse, match="a reply longer than"):
        asyncio.run(read_clock())
    backend.close()


def _owner(cluster: RedisClusterNodes, key: str) -> int:
    """The index of the node that holds ``key``'s slot."""
    client = redis.Redis(port=cluster.ports[0], decode_responses=True)
    try:
        slot = client.cluster("keyslot", key)
        for start, end, (_host, port, *_), *_ in client.cluster("slots"):
            if start <= slot <= end:
                return cluster.ports.index(int(port))
    finally:
        client.close()
    raise AssertionError(f"no node holds slot {slot}")


def test_readiness_asks_the_node_that_holds_the_mocks_keys(
    cluster: RedisClusterNodes, caplog: pytest.LogCaptureFixture
) -> None:
    """With the owning node full, readyz says not ready in every poll, as /e does; a full node
    that holds none of its keys changes neither (a keyless probe went to any node), and the
    outage is logged once down, once back (probes and /e no longer flip it)."""
    caplog.set_level(logging.INFO, logger="mockserver.state")
    with live_mock(settings(cluster.url, "ready-secret", state_name="ready")) as mock:
        mock.reset()
        shared = mock.state.shared
        assert isinstance(shared, RedisStore)
        owner = _owner(cluster, shared.keys.clock)
        clients = cluster.clients()
        try:
            for index, full in ((owner, True), ((owner + 1) % 3, False)):
                admin = clients[index]
                admin.config_set("maxmemory", "1")  # any write refused: OOM under noeviction
                admin.config_set("maxmemory-policy", "noeviction")
                try:
                    for _ in range(20):
                        ready = httpx.get(f"{mock.base_url}/_mock/readyz").status_code
                        answered = httpx.get(mock.url("demo-refused"), headers=mock.headers)
                        assert ready == (503 if full else 200)
                        assert answered.status_code == (503 if full else 200)
                finally:
                    admin.config_set("maxmemory", "0")
            assert httpx.get(f"{mock.base_url}/_mock/readyz").status_code == 200
        finally:
            for client in clients:
                client.close()
    changes = [r.getMessage() for r in caplog.records if r.getMessage().startswith("state store")]
    assert [line.split(":")[0] for line in changes] == ["state store down", "state store back"]


def test_with_tenants_one_tenants_lost_slot_leaves_the_process_ready_for_the_others(
    cluster: RedisClusterNodes, tmp_path: Path
) -> None:
    """A tenant whose node refuses writes gets its 503s (its /e, its health) and is named by
    readyz, which stays ready for the tenants still served: taking every pod out of service
    would turn one tenant's outage into everyone's. Once no tenant's node takes writes, the
    process is not ready."""
    tenants = tmp_path / "tenants.json"
    tenants.write_text(json.dumps(TENANTS))
    extra = {"tenants": tenants, "control_token": Secret(OPERATOR_TOKEN), "state_name": "teams"}
    for secret in SECRETS:  # until the tenants' slots are on two nodes at least
        with live_mock(settings(cluster.url, secret, **extra)) as mock:
            stores = {name: state.shared for name, state in mock.state.tenants.items()}
            owners = {name: _owner(cluster, s.keys.clock) for name, s in stores.items()}  # type: ignore[union-attr]
            if len(set(owners.values())) < 2:
                continue
            lost = sorted(name for name, node in owners.items() if node == owners["pay"])
            kept = next(name for name in ("risk", "default") if name not in lost)
            clients = cluster.clients()
            try:
                full = [owners["pay"]]
                for index in full:
                    clients[index].config_set("maxmemory", "1")
                    clients[index].config_set("maxmemory-policy", "noeviction")
                ready = httpx.get(f"{mock.base_url}/_mock/readyz")
                assert (ready.status_code, ready.json()["unavailable"]) == (200, lost), ready.text
                as_pay = {"Authorization": f"Bearer {key('pay')}", "X-Mock-Token": token("pay")}
                assert httpx.get(mock.url("demo-refused"), headers=as_pay).status_code == 503
                health = httpx.get(f"{mock.base_url}/_mock/health", headers=as_pay)
                assert health.status_code == 503
                as_kept = (
                    {"Authorization": f"Bearer {KEY}", "X-Mock-Token": OPERATOR_TOKEN}
                    if kept == "default"
                    else {"Authorization": f"Bearer {key(kept)}", "X-Mock-Token": token(kept)}
                )
                assert httpx.get(mock.url("demo-refused"), headers=as_kept).status_code == 200
                health = httpx.get(f"{mock.base_url}/_mock/health", headers=as_kept)
                assert health.status_code == 200
                for index in set(owners.values()) - set(full):
                    clients[index].config_set("maxmemory", "1")
                    clients[index].config_set("maxmemory-policy", "noeviction")
                not_ready = httpx.get(f"{mock.base_url}/_mock/readyz")
                assert not_ready.status_code == 503, not_ready.text
                assert not_ready.json()["error"]["code"] == "state_full"
            finally:
                for client in clients:
                    client.config_set("maxmemory", "0")
                    client.close()
            return
    pytest.fail("every secret put the tenants on one node")


def test_the_node_the_url_names_may_go_once_the_mock_has_found_the_others(
    tmp_path: Path,
) -> None:
    """Its event loop's client starts from every node the mock found at start, not only the
    URL's: a process that sent no /e before that node went (a --workers worker) answers it
    from the node that holds its slot, as readyz says it can."""
    with redis_cluster(tmp_path) as nodes:
        for client in nodes.clients():  # the slots of the nodes left are served
            client.config_set("cluster-require-full-coverage", "no")
            client.close()
        for secret in SECRETS:  # a secret whose slot is not on the URL's node
            with live_mock(settings(nodes.url, secret, state_name="failover")) as mock:
                shared = mock.state.shared
                assert isinstance(shared, RedisStore)
                if _owner(nodes, shared.keys.clock) == 0:
                    continue
                assert httpx.get(f"{mock.base_url}/_mock/readyz").status_code == 200
                nodes.processes[0].kill()  # before this process's first /e
                nodes.processes[0].wait(timeout=10)
                assert httpx.get(f"{mock.base_url}/_mock/readyz").status_code == 200
                answered = httpx.get(mock.url("demo-refused"), headers=mock.headers)
                assert answered.status_code == 200, answered.text
                return
    pytest.fail("every secret's slot was on the URL's node")
