"""The hot path's own connection to Redis (store/redisline.py) speaks as redis-py would.

A real ``redis-server`` that asks for a password, reached over TCP and over its unix socket,
with the state in database 3: ``GET /e`` is answered, and the mock's keys are where the URL
says (the line authenticates and selects as redis-py's own clients do).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from tests.redisserver import redis_server
from verdict_contract.mockserver import Settings
from verdict_contract.mockserver.store.backend import StateURL
from verdict_contract.mockserver.testing.mocks import live_mock

PASSWORD = "line-test-pass-0001"
KEY = "line-test-key-000001"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """A redis-server with a password, on a free port and a unix socket."""
    sock = tmp_path_factory.mktemp("redis") / "redis.sock"
    options = ("--requirepass", PASSWORD, "--unixsocket", str(sock), "--unixsocketperm", "700")
    with redis_server(*options, password=PASSWORD) as server:
        yield server.port, sock


@pytest.mark.parametrize("over", ["tcp", "unix socket"])
def test_a_password_a_database_and_a_unix_socket_are_honoured(
    over: str, guarded: tuple[int, Path]
) -> None:
    port, sock = guarded
    url = (
        f"redis://:{PASSWORD}@127.0.0.1:{port}/3"
        if over == "tcp"
        else f"unix://:{PASSWORD}@{sock}?db=3"
    )
    raw = redis.Redis(port=port, password=PASSWORD, db=3, decode_responses=True)
    raw.flushall()
    settings = Settings(port=0, state=StateURL.parse(url), api_keys=(KEY,), secret=f"line-{over}")
    with live_mock(settings) as mock:
        for _ in range(3):
            answer = httpx.get(mock.url("demo-contradicted"), headers=mock.headers)
            assert answer.status_code == 200, answer.text
        assert len(mock.journal) == 3
    journals = [key for key in raw.scan_iter(count=1000) if key.endswith(":journal")]
    assert len(journals) == 1
    assert raw.llen(journals[0]) == 3  # the hot path's entries, in database 3
    other = redis.Redis(port=port, password=PASSWORD, db=0)
    assert other.dbsize() == 0
    other.close()
    raw.close()
