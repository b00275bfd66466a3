"""A real ``redis-server`` for the tests of a shared state: own port, no persistence.

Tests that need it skip, saying why, where Debian's ``redis-server`` is not installed; with
``VERDICT_REQUIRE_REDIS=1`` (CI sets it, and installs it) they fail instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

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
    options: tuple[str, ...] = ()  # more of redis-server's flags (--requirepass, --unixsocket...)
    password: str | None = None  # what --requirepass asks, to ask whether it is up

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert REDIS_SERVER is not None
        argv = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1"]
        argv += ["--save", "", "--appendonly", "no", "--loglevel", "warning", *self.options]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        client = redis.Redis(
            port=self.port, password=self.password, socket_timeout=1, socket_connect_timeout=1
        )

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
def redis_server(*options: str, password: str | None = None) -> Iterator[RedisServer]:
    require_redis()
    server = RedisServer(options=options, password=password)
    server.start()
    try:
        yield server
    finally:
        if server.process is not None:
            server.resume()
        server.stop()


CLUSTER_BUS_OFFSET = 10000
"""Redis Cluster nodes talk to each other on their port plus this."""


def _cluster_port() -> int:
    """A free port whose cluster bus port (``+10000``) is free too (a bounded search)."""
    for _ in range(100):
        port = free_port()
        if port + CLUSTER_BUS_OFFSET > 65535:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port + CLUSTER_BUS_OFFSET))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair for a Redis Cluster node")


@dataclass
class RedisClusterNodes:
    """Three redis-server primaries on 127.0.0.1 made one Redis Cluster (no replicas)."""

    folder: Path
    ports: list[int] = field(default_factory=list)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        """A plain URL of one node: the mock finds the cluster from the server."""
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def start(self, count: int = 3) -> None:
        assert REDIS_SERVER is not None
        for _ in range(count):
            self._start_node()
        nodes = [f"127.0.0.1:{port}" for port in self.ports]
        create = ["--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"]
        subprocess.run(
            [_redis_cli(), *create],
            check=True,
            capture_output=True,
            timeout=60,
        )
        assert wait_until(self._ok), "the cluster did not reach cluster_state:ok"

    def _start_node(self) -> None:
        """One node, on another port if its own (or its bus port) was taken meanwhile: the
        ports are free when picked, not reserved, and a node whose port is taken exits."""
        assert REDIS_SERVER is not None
        for _ in range(5):
            port = _cluster_port()
            argv = [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1"]
            argv += ["--cluster-enabled", "yes"]
            argv += ["--cluster-config-file", str(self.folder / f"nodes-{port}.conf")]
            argv += ["--save", "", "--appendonly", "no", "--loglevel", "warning"]
            argv += ["--dir", str(self.folder)]
            process = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
            wait_until(lambda: process.poll() is not None or _answers(port))  # noqa: B023
            if process.poll() is None and _answers(port):
                self.ports.append(port)
                self.processes.append(process)
                return
            process.kill()
            process.wait()
        raise AssertionError("no cluster node started in 5 tries (its ports were taken)")

    def _ok(self) -> bool:
        for port in self.ports:
            client = redis.Redis(port=port, socket_timeout=1, socket_connect_timeout=1)
            try:
                info = client.cluster("info")
                if info.get("cluster_state") != "ok":
                    return False
            except redis.RedisError:
                return False
            finally:
                client.close()
        return True

    def clients(self) -> list[redis.Redis]:
        """A plain client per node (scan each: a cluster's SCAN is per node)."""
        return [redis.Redis(port=port, decode_responses=True) for port in self.ports]

    def stop(self) -> None:
        for process in self.processes:
            process.kill()
        for process in self.processes:
            process.wait(timeout=10)
        self.processes.clear()


def _redis_cli() -> str:
    found = shutil.which("redis-cli")
    assert found is not None, "redis-cli comes with redis-server"
    return found


def _answers(port: int) -> bool:
    client = redis.Redis(port=port, socket_timeout=1, socket_connect_timeout=1)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


@contextmanager
def redis_cluster(folder: Path) -> Iterator[RedisClusterNodes]:
    """A 3-node Redis Cluster on 127.0.0.1 (its node files in ``folder``); killed after."""
    require_redis()
    nodes = RedisClusterNodes(folder)
    try:
        nodes.start()
        yield nodes
    finally:
        nodes.stop()
