"""A Redis that speaks garbage: the mock stays small and answers 503 naming its state.

A TCP proxy stands between the mock and a real redis-server: it passes everything through
until the test tells it to garble, and then answers each command with the garbage of the test
(an endless bulk string, bytes that are not RESP, text that is not UTF-8, a reply of the wrong
type). What it managed to send before the mock hung up is counted: that is what the mock read.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import redis

from tests.redisserver import redis_server
from verdict_contract.core.redact import KeyFinder
from verdict_contract.mockserver import Settings
from verdict_contract.mockserver.store import redisstate
from verdict_contract.mockserver.store.backend import StateURL
from verdict_contract.testing.mocks import live_mock

KEY = "garbage-test-key-0001"
AUTH = {"Authorization": f"Bearer {KEY}"}
ENDLESS_CAP = 128 * 1024 * 1024
"""The most the proxy sends of an endless bulk string (so a test that fails still ends)."""
CHUNK = b"x" * 65536

GARBAGE = {
    "endless bulk string": b"$2000000000\r\n",  # followed by CHUNKs until the mock hangs up
    "not RESP": b"?what is this\r\n",
    "not UTF-8": b"$2\r\n\xff\xfe\r\n",
    "wrong type": b"*1\r\n:7\r\n",  # an array, where every command of the mock has another
    # then a byte every DRIP_PAUSE: each read is quick, the reply never ends (minutes)
    "dripped reply": b"$1000\r\n",
}
DRIP_PAUSE = 0.25


@dataclass
class GarbleProxy:
    """A proxy to redis-server on 127.0.0.1; with ``garbage`` set, it answers that instead."""

    upstream: int
    garbage: bytes | None = None
    sent: int = 0  # garbage bytes the mock took before it hung up (the most of all connections)
    garbled: threading.Event = field(default_factory=threading.Event)  # a garbling has ended
    _listener: socket.socket = field(init=False)
    _stopping: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self._listener.getsockname()[1]}/0"

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.upstream), timeout=10)
        threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()
        client.settimeout(10)
        with client, upstream:
            while chunk := _recv(client):
                garbage = self.garbage
                if garbage is None:
                    upstream.sendall(chunk)
                elif not self._garble(client, garbage):
                    return

    def _garble(self, client: socket.socket, garbage: bytes) -> bool:
        """Answer with garbage; False once the mock hung up."""
        sent = 0
        try:
            client.sendall(garbage)
            sent += len(garbage)
            if garbage == GARBAGE["endless bulk string"]:
                while sent < ENDLESS_CAP:
                    client.sendall(CHUNK)
                    sent += len(CHUNK)
            elif garbage == GARBAGE["dripped reply"]:
                for _ in range(1000):
                    time.sleep(DRIP_PAUSE)
                    client.sendall(b"x")
                    sent += 1
        except OSError:
            return False
        finally:
            self.sent = max(self.sent, sent)
            self.garbled.set()
        return True

    def close(self) -> None:
        self._stopping.set()
        self._listener.close()


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def _pump(source: socket.socket, target: socket.socket) -> None:
    with source:
        while chunk := _recv(source):
            try:
                target.sendall(chunk)
            except OSError:
                return


@pytest.fixture(scope="module")
def redis_port() -> Iterator[int]:
    with redis_server() as server:
        yield server.port


@pytest.fixture
def proxy(redis_port: int) -> Iterator[GarbleProxy]:
    started = GarbleProxy(redis_port)
    yield started
    started.close()


@pytest.fixture
def http(proxy: GarbleProxy, monkeypatch: pytest.MonkeyPatch) -> Iterator[httpx.Client]:
    # a small journal: the biggest reply the mock takes is about a MiB (REPLY_SLACK) past it
    monkeypatch.setattr(redisstate, "ENTRY_BYTES", 512)
    settings = Settings(
        port=0, state=StateURL.parse(proxy.url), secret="garbage", api_keys=(KEY,), journal_size=10
    )
    with live_mock(settings) as mock, httpx.Client(base_url=mock.base_url, timeout=60) as client:
        assert client.post("/_mock/reset").status_code == 204
        yield client


CONTROL_CALLS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "journal": ("GET", "/_mock/requests", {}),
    "health": ("GET", "/_mock/health", {}),
    "mint": ("POST", "/_mock/sessions", {"json": {"script": [503]}}),
    "clock": ("POST", "/_mock/clock", {"json": {"advance": 1}}),
    "reset": ("POST", "/_mock/reset", {}),
    "clear": ("DELETE", "/_mock/requests", {}),
}


def _is_state_unavailable(response: httpx.Response, proxy: GarbleProxy) -> None:
    assert response.status_code == 503, response.text
    error = response.json()["error"]
    assert error["code"] == "state_unavailable"
    assert proxy.url in error["message"]  # names the backend
    assert response.headers["Retry-After"] == "1"


@pytest.mark.parametrize("garbage", GARBAGE.values(), ids=GARBAGE.keys())
@pytest.mark.parametrize("call", CONTROL_CALLS.values(), ids=CONTROL_CALLS.keys())
def test_a_control_call_on_a_garbage_speaking_redis_answers_503(
    http: httpx.Client, proxy: GarbleProxy, call: tuple[str, str, dict[str, Any]], garbage: bytes
) -> None:
    method, path, kwargs = call
    proxy.garbage = garbage
    _is_state_unavailable(http.request(method, path, **kwargs), proxy)
    proxy.garbage = None  # Redis speaks again: so does the mock
    assert http.request(method, path, **kwargs).status_code < 300


@pytest.mark.parametrize("garbage", GARBAGE.values(), ids=GARBAGE.keys())
def test_e_on_a_garbage_speaking_redis_answers_503(
    http: httpx.Client, proxy: GarbleProxy, garbage: bytes
) -> None:
    proxy.garbage = garbage
    _is_state_unavailable(http.get("/e", params={"n": "demo-contradicted"}, headers=AUTH), proxy)
    proxy.garbage = None
    assert http.get("/e", params={"n": "demo-contradicted"}, headers=AUTH).status_code == 200


@pytest.mark.parametrize("path", ["/_mock/requests", "/e"])
def test_an_endless_reply_is_read_no_further_than_the_reply_bound(
    http: httpx.Client, proxy: GarbleProxy, path: str
) -> None:
    proxy.garbage = GARBAGE["endless bulk string"]
    answer = http.get(path, params={"n": "demo-contradicted"}, headers=AUTH)
    _is_state_unavailable(answer, proxy)
    assert proxy.garbled.wait(60)  # the mock hung up (or the proxy sent all it may)
    # the bound (about 1 MiB here) and what the kernel's socket buffers held: far from the cap
    assert 0 < proxy.sent < 32 * 1024 * 1024


def test_a_reply_of_millions_of_empty_arrays_is_refused_by_its_element_count() -> None:
    """``*0`` is four bytes on the wire and a Python list in memory: the reader refuses a reply
    past one element per BYTES_PER_ELEMENT of its byte bound, long before the byte bound, so
    what hiredis built stays a small multiple of that bound."""
    import tracemalloc

    import hiredis
    from redis._parsers.hiredis import NOT_ENOUGH_DATA
    from redis.exceptions import InvalidResponse

    from verdict_contract.mockserver.store.redisclients import BYTES_PER_ELEMENT, BoundedReader

    limit = 1024 * 1024
    reader = BoundedReader(hiredis.Reader(notEnoughData=NOT_ENOUGH_DATA), limit)
    chunk = b"*0\r\n" * 16384  # 64 KiB
    fed = 0

    def attack() -> None:
        nonlocal fed
        reader.feed(b"*4000000\r\n")
        while fed < 16 * 1024 * 1024:  # what the attack sent: 15 MiB
            reader.feed(chunk)
            fed += len(chunk)
            assert reader.gets() is NOT_ENOUGH_DATA

    tracemalloc.start()
    try:
        with pytest.raises(InvalidResponse, match="elements"):
            attack()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert fed < limit // BYTES_PER_ELEMENT * 4  # refused at the element count, not the bytes
    assert peak < 2 * limit  # hiredis built at most that many objects
    # A reply of that many elements, each as long as an entry, is taken whole:
    whole = BoundedReader(hiredis.Reader(notEnoughData=NOT_ENOUGH_DATA), limit)
    entry = b"$40\r\n" + b"e" * 40 + b"\r\n"
    whole.feed(b"*1000\r\n" + entry * 1000)
    assert len(whole.gets()) == 1000


PASSWORD = "redispw-QzX-0123456789"
_PART = PASSWORD[:-4].encode()
ERROR_REPLIES = {
    "quoting the password": b"-ERR invalid password " + _PART + b" hex=" + _PART.hex().encode(),
    "with terminal escapes": b"-ERR \x1b]0;HACKED\x07\x1b[2J not allowed",
}


@pytest.mark.parametrize("reply", ERROR_REPLIES.values(), ids=ERROR_REPLIES.keys())
def test_a_redis_error_reply_shows_no_password_nor_raw_escapes(
    caplog: pytest.LogCaptureFixture, reply: bytes
) -> None:
    """A Redis (or what stands for one) whose error replies quote the password less its last
    4 characters, hex-encoded too, or hold terminal escapes: no probe, answer or log line shows
    8 characters of it in a row, nor an escape raw (the operator's terminal would run it)."""
    with redis_server("--requirepass", PASSWORD, password=PASSWORD) as redis:
        proxy = GarbleProxy(redis.port)
        try:
            url = f"redis://:{PASSWORD}@127.0.0.1:{proxy.url.rsplit(':', 1)[1]}"
            settings = Settings(port=0, state=StateURL.parse(url), secret="q", api_keys=(KEY,))
            with (
                caplog.at_level(logging.INFO),
                live_mock(settings) as mock,
                httpx.Client(base_url=mock.base_url, timeout=30) as client,
            ):
                assert client.post("/_mock/reset").status_code == 204
                proxy.garbage = reply + b"\r\n"
                shown = [
                    client.get("/_mock/readyz", headers={"Host": "attacker.example"}),
                    client.get("/_mock/health"),
                    client.get("/e", params={"n": "demo-contradicted"}, headers=AUTH),
                ]
        finally:
            proxy.close()
    assert [answer.status_code for answer in shown] == [503, 503, 503]
    text = "\n".join([*(answer.text for answer in shown), caplog.text])
    assert not KeyFinder.of([PASSWORD.encode()]).finds(text), text
    assert "\x1b" not in caplog.text  # (a JSON body escapes it anyway)
    said = "ResponseError" if reply == ERROR_REPLIES["quoting the password"] else "HACKED"
    assert said in shown[0].text  # what failed is still said


def test_a_password_redis_no_longer_takes_is_a_503_without_retry_after() -> None:
    """Retrying cannot help until someone gives the mock the new password: said so, with no
    ``Retry-After``, by /e and readyz alike, and the password is never shown."""
    with redis_server("--requirepass", PASSWORD, password=PASSWORD) as server:
        url = f"redis://:{PASSWORD}@127.0.0.1:{server.port}"
        settings = Settings(port=0, state=StateURL.parse(url), secret="pw", api_keys=(KEY,))
        with live_mock(settings) as mock, httpx.Client(base_url=mock.base_url) as client:
            assert client.get("/e", params={"n": "demo-refused"}, headers=AUTH).status_code == 200
            admin = redis.Redis(port=server.port, password=PASSWORD)
            admin.config_set("requirepass", "another-password-0001")
            admin.client_kill_filter(_type="normal", skipme=False)  # each connects again
            admin.close()
            answers = [
                client.get("/e", params={"n": "demo-refused"}, headers=AUTH),
                client.get("/_mock/readyz"),
            ]
    for answer in answers:
        assert answer.status_code == 503
        assert answer.json()["error"]["code"] == "state_auth_refused"
        assert "retry-after" not in answer.headers
        assert _PART.decode() not in answer.text
