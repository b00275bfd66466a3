"""The hot path's own connection to Redis (store/redisclients.py: Line) speaks as redis-py would.

A real ``redis-server`` that asks for a password, reached over TCP and over its unix socket,
with the state in database 3: ``GET /e`` is answered, and the mock's keys are where the URL
says (the line authenticates and selects as redis-py's own clients do).
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path

import hiredis
import httpx
import pytest
import redis

from tests.redisserver import redis_server
from verdict_contract.mockserver import Settings
from verdict_contract.mockserver.store.backend import StateURL
from verdict_contract.mockserver.store.redisclients import Line
from verdict_contract.testing.mocks import live_mock

PASSWORD = "line-test-pass-0001"
KEY = "line-test-key-000001"


def _accepted(raw: redis.Redis) -> int:
    return int(raw.info("stats")["total_connections_received"])


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


def test_a_reply_to_no_command_breaks_the_line_and_the_next_round_trip_connects_again() -> None:
    """A reply past those asked for puts the line out of step: dropped, not read as the next
    round trip's."""
    connections: list[int] = []
    ended: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        parser = hiredis.Reader()
        try:
            while data := await reader.read(65536):
                parser.feed(data)
                while (command := parser.gets()) is not False:
                    writer.write(b"$%d\r\n%s\r\n" % (len(command[-1]), command[-1]))
                    await writer.drain()
                    if command[-1] == b"first":  # once that round trip is over: a reply to nothing
                        await asyncio.sleep(0.05)
                        writer.write(b"+EXTRA\r\n")
                        await writer.drain()
        finally:
            writer.close()
            ended.append(1)

    async def run() -> list[object]:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        line = Line.of(f"redis://127.0.0.1:{port}", 1 << 20)
        assert line is not None
        first = await line.send(("ECHO", "first"))
        await asyncio.sleep(0.1)  # the extra reply comes
        second = await line.send(("ECHO", "second"))
        line.close()
        for _ in range(100):  # both connections closed on both sides
            if len(ended) == 2:
                break
            await asyncio.sleep(0.01)
        server.close()
        await server.wait_closed()
        return [first, second]

    assert asyncio.run(run()) == ["first", "second"]
    assert len(connections) == 2


def test_round_trips_sent_together_before_it_connects_share_one_connection(
    guarded: tuple[int, Path],
) -> None:
    """Round trips that come while the line is not connected yet (a start, a Redis back after
    an outage) wait for one connection: none closes another's or opens its own."""
    port, _ = guarded
    raw = redis.Redis(port=port, password=PASSWORD)
    before = _accepted(raw)  # connections Redis accepted: one closing meanwhile does not count
    line = Line.of(f"redis://:{PASSWORD}@127.0.0.1:{port}/0", 1 << 20)
    assert line is not None

    async def together() -> tuple[list[object], int]:
        replies = await asyncio.gather(*(line.send(("PING",)) for _ in range(10)))
        opened = _accepted(raw) - before
        line.close()
        return replies, opened

    replies, opened = asyncio.run(together())
    raw.close()
    assert replies == ["PONG"] * 10
    assert opened == 1


def test_a_connection_given_up_on_leaves_no_unretrieved_failure() -> None:
    """A Redis that takes the connection but never answers its AUTH (a frozen one): the round
    trip that waited on it times out, the line is dropped, and the connecting task's failure is
    not left for asyncio to log as "Task exception was never retrieved", with a traceback."""
    unhandled: list[dict[str, object]] = []

    async def run() -> None:
        asyncio.get_running_loop().set_exception_handler(
            lambda _, context: unhandled.append(context)
        )
        held: list[asyncio.StreamWriter] = []
        frozen = await asyncio.start_server(lambda _, w: held.append(w), "127.0.0.1", 0)  # mute
        port = frozen.sockets[0].getsockname()[1]
        line = Line.of(f"redis://:{PASSWORD}@127.0.0.1:{port}/0", 1 << 20)
        assert line is not None
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(line.send(("PING",)), 0.1)
        for _ in range(5):  # the connecting task ends with the line it was given up on
            await asyncio.sleep(0.01)
        line.close()  # (a connection made after the wait was given up on is the line's)
        await asyncio.sleep(0.01)
        for writer in held:
            writer.close()
        frozen.close()
        await frozen.wait_closed()

    asyncio.run(run())
    gc.collect()  # an unretrieved failure is said when its task is collected
    assert unhandled == []
