"""A real ``redis-server`` for the tests of a shared state: own port, no persistence.

Tests that need it skip, saying why, where Debian's ``redis-server`` is not installed; with
``VERDICT_REQUIRE_REDIS=1`` (CI sets it, and installs it) they fail instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
import redis

from tests.helpers import free_port, wait_until

REDIS_SERVER = shutil.which("redis-server")
NO_REDIS = "no redis-server: apt-get install redis-server (CI does)"


def require_redis() -> None:
    """Skip (or, with VERDICT_REQUIRE_REDIS=1, fail) where redis-server is missing."""
    if REDIS_SERVER is None:
        if os.environ.get("VERDICT_REQUIRE_REDIS"):
            pytest.fail(f"VERDICT_REQUIRE_REDIS is set, but {NO_REDIS}", pytrace=False)
        pytest.skip(NO_REDIS)


@dataclass
class RedisServer:
    """One redis-server on 127.0.0.1 and a free port; stop and start it again on that port."""

    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert REDIS_SERVER is not None
        argv = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1"]
        argv += ["--save", "", "--appendonly", "no", "--loglevel", "warning"]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_timeout=1, socket_connect_timeout=1)

        def answers() -> bool:
            try:
                return bool(client.ping())
            except redis.RedisError:
                return False

        try:
            assert wait_until(answers), "redis-server did not start"
        finally:
            client.close()

    def stop(self) -> None:
        """Kill it (SIGKILL: no goodbye to the clients), and wait until it is gone."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None

    def pause(self) -> None:
        """Freeze it: connections stay open, nothing is answered (a slow Redis)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)


@contextmanager
def redis_server() -> Iterator[RedisServer]:
    require_redis()
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        if server.process is not None:
            server.resume()
        server.stop()
