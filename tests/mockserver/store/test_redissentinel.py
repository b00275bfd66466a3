"""The shared state through Redis Sentinel: the primary the sentinels name.

A real ``redis-server`` as the primary and a real ``redis-server --sentinel`` that monitors it;
the mock, given only the sentinel's address and the service's name, keeps its state on the
primary, in the database the URL names.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import httpx
import pytest
import redis

from tests.helpers import free_port, wait_until
from tests.redisserver import REDIS_SERVER, RedisServer, redis_server
from verdict_contract.core.errors import StateUnavailable
from verdict_contract.mockserver import Settings
from verdict_contract.mockserver.store.backend import StateURL
from verdict_contract.testing.mocks import live_mock

SERVICE = "verdict-primary"
KEY = "sentinel-test-key-001"


@pytest.fixture(scope="module")
def sentinel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RedisServer, int]]:
    """A primary and one sentinel that monitors it (its port)."""
    with redis_server() as primary:
        assert REDIS_SERVER is not None
        port = free_port()
        config = tmp_path_factory.mktemp("sentinel") / "sentinel.conf"
        config.write_text(
            f"port {port}\nbind 127.0.0.1\nsentinel monitor {SERVICE} 127.0.0.1 {primary.port} 1\n"
        )
        argv = [REDIS_SERVER, str(config), "--sentinel", "--loglevel", "warning"]
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        asked = redis.Redis(port=port, socket_timeout=1, decode_responses=True)

        def names_the_primary() -> bool:
            try:
                found = asked.execute_command(  # type: ignore[no-untyped-call]
                    "SENTINEL", "get-master-addr-by-name", SERVICE
                )
            except redis.RedisError:
                return False
            return bool(found) and int(found[1]) == primary.port

        try:
            assert wait_until(names_the_primary), "redis-sentinel did not start"
            yield primary, port
        finally:
            asked.close()
            process.kill()
            process.wait(timeout=10)


def test_the_state_lives_on_the_primary_the_sentinels_name(
    sentinel: tuple[RedisServer, int],
) -> None:
    primary, port = sentinel
    url = StateURL.parse(f"redis+sentinel://127.0.0.1:{port}/{SERVICE}/2")
    on_primary = redis.Redis(port=primary.port, db=2, decode_responses=True)
    on_primary.flushall()
    settings = Settings(port=0, state=url, api_keys=(KEY,), secret="sentinel-test-secret")
    with live_mock(settings) as mock:
        for _ in range(3):
            answer = httpx.get(mock.url("demo-contradicted"), headers=mock.headers)
            assert answer.status_code == 200, answer.text
        assert len(mock.journal) == 3  # the control API's client reads what /e's wrote
        assert httpx.get(f"{mock.base_url}/_mock/readyz").status_code == 200
    journals = [key for key in on_primary.scan_iter(count=1000) if key.endswith(":journal")]
    assert len(journals) == 1
    assert on_primary.llen(journals[0]) == 3
    on_primary.close()


def test_a_sentinel_url_is_checked_and_its_password_masked() -> None:
    url = StateURL.parse("redis+sentinel://:hunter2@s1:26379,[::1]:26380/primary/3")
    target = url.sentinel
    assert target is not None
    assert target.nodes == [("s1", 26379), ("::1", 26380)]
    assert (target.service, target.db, target.password) == ("primary", 3, "hunter2")
    assert "hunter2" not in url.label
    assert url.cluster is False
    for bad in (
        "redis+sentinel://s1:26379",  # no service
        "redis+sentinel://s1/primary",  # no port
        "redis+sentinel://s1:x/primary",
        "redis+sentinel://s1:26379/primary/db",
    ):
        with pytest.raises(ValueError, match=r"sentinel|SERVICE"):
            StateURL.parse(bad)


def test_a_mock_whose_sentinels_do_not_answer_says_so_at_start() -> None:
    url = StateURL.parse(f"redis+sentinel://127.0.0.1:{free_port()}/{SERVICE}/0")
    settings = Settings(port=0, state=url, api_keys=(KEY,))
    with (
        pytest.raises(
            StateUnavailable, match=rf"shared state \(redis\+sentinel://.*/{SERVICE}/0\)"
        ),
        live_mock(settings),
    ):
        pass
