"""docs/servers.md's nginx configuration, run: a real nginx before real mocks sharing a Redis.

The ``nginx`` block of "Behind nginx." is read out of the page verbatim; only its fixed names
are replaced by the test's (:data:`MOCKS`, the mocks' addresses; :data:`HTTP_LISTEN` and
:data:`TCP_LISTEN`; :data:`FOLDERS`, of the logs and the pid file), each of which must be in
it. The mocks are started with the page's own ``verdict-mock`` line (its ``--host``, ``--port``
and ``--state`` replaced by the test's). Through nginx, the scripted faults get what the page
says they get; with three of its lines taken out, the failures those lines prevent come back.

Tests that need it skip, saying why, where nginx or its stream module is missing; with
``VERDICT_REQUIRE_NGINX=1`` (CI sets it, and installs both) they fail instead.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import clean_environ, free_port, read_line, stop_process, wait_until
from tests.redisserver import redis_server
from verdict_contract.mockserver.model.sessions import MAX_DELAY_MS
from verdict_contract.mockserver.server.asyncserver import IDLE_TIMEOUT
from verdict_contract.mockserver.settings import env_var
from verdict_contract.mockserver.web.guard import TOKEN_HEADER

ROOT = Path(__file__).resolve().parents[2]
SUBSECTION = "**Behind nginx.**"
PUBLIC = "verdict-mock.example"
"""The public name the page gives nginx's ``server_name`` and the mocks' ``--allowed-host``."""
MOCKS = ("10.0.0.11:8080", "10.0.0.12:8080", "10.0.0.13:8080")
"""The page's addresses of the mocks, replaced by the test's."""
HTTP_LISTEN, TCP_LISTEN = "listen 80;", "listen 8081;"
FOLDERS = ("/var/log/nginx/", "/run/")

NGINX = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")  # not in a user's PATH
NO_NGINX = "no nginx: apt-get install nginx libnginx-mod-stream (CI does)"

KEY = "nginx-test-key-0001"
TOKEN = "nginx-test-control-token"
SECRET = "nginx-test-secret"
TIMEOUT = 10.0


def subsection() -> str:
    """The text of "Behind nginx.", up to the next section."""
    page = (ROOT / "docs" / "servers.md").read_text()
    text = page[page.index(SUBSECTION) :]
    return text[: text.index("\n## ")]


def nginx_conf() -> str:
    (block,) = re.findall(r"```nginx\n(.*?)```", subsection(), re.S)
    return str(block)


def mock_argv() -> list[str]:
    """The page's ``verdict-mock`` command, as argv (without the command)."""
    (block,) = re.findall(r"```bash\n(.*?)```", subsection(), re.S)
    command, *argv = shlex.split(block.replace("\\\n", " "))
    assert command == ".venv/bin/verdict-mock", block
    return argv


def stream_module(conf: str) -> Path | None:
    found = re.search(r"^load_module (\S+);", conf, re.M)
    return Path(found.group(1)) if found else None


def require_nginx() -> None:
    """Skip (or, with VERDICT_REQUIRE_NGINX=1, fail) where nginx or its stream module is missing."""
    module = stream_module(nginx_conf())
    missing = NGINX is None or (module is not None and not module.exists())
    if missing:
        if os.environ.get("VERDICT_REQUIRE_NGINX"):
            pytest.fail(f"VERDICT_REQUIRE_NGINX is set, but {NO_NGINX}", pytrace=False)
        pytest.skip(NO_NGINX)


def templated(conf: str, mocks: list[str], http: int, tcp: int, folder: Path) -> str:
    """The page's configuration with its fixed names replaced (each must be there)."""
    fixed = {HTTP_LISTEN: f"listen 127.0.0.1:{http};", TCP_LISTEN: f"listen 127.0.0.1:{tcp};"}
    fixed.update(zip(MOCKS, mocks, strict=True))
    fixed.update((name, f"{folder}/") for name in FOLDERS)
    for name, value in fixed.items():
        assert name in conf, f"the page's nginx configuration no longer says {name!r}"
        conf = conf.replace(name, value)
    return conf


def _setting(conf: str, name: str) -> list[str]:
    return re.findall(rf"^\s*{name}\s+([^;{{]+);", conf, re.M)


def _seconds(value: str) -> float:
    return float(value.removesuffix("s"))


def test_the_configuration_holds_together() -> None:
    conf = nginx_conf()
    (keepalive,) = _setting(conf, "keepalive_timeout")
    assert _seconds(keepalive) < IDLE_TIMEOUT, "nginx reuses connections the mock has closed"
    (read,) = _setting(conf, "proxy_read_timeout")
    assert _seconds(read) > MAX_DELAY_MS / 1000, "a scripted delay outlasts nginx's patience"
    assert _setting(conf, "proxy_next_upstream") == ["off"]
    assert _setting(conf, "proxy_http_version") == ["1.1"]
    assert _setting(conf, "proxy_set_header Connection") == ['""']
    assert _setting(conf, "proxy_set_header Host") == ["$http_host"]
    assert "server_name " + PUBLIC in conf
    http_servers = _setting(conf.split("stream {")[0], "server")
    assert http_servers == [f"{mock} max_fails=0" for mock in MOCKS]
    argv = mock_argv()
    assert argv[argv.index("--allowed-host") + 1] == PUBLIC
    assert argv[argv.index("--port") + 1] == MOCKS[0].split(":")[1]


@dataclass
class Deployment:
    http: int  # nginx's L7 port
    tcp: int  # nginx's L4 (stream) port
    mocks: list[str]  # the mocks' base URLs
    log: Path  # nginx's error log

    def client(self) -> httpx.Client:
        """A client of nginx's L7 port, as the public name."""
        headers = {"Host": PUBLIC, "Authorization": f"Bearer {KEY}", TOKEN_HEADER: TOKEN}
        return httpx.Client(
            base_url=f"http://127.0.0.1:{self.http}", headers=headers, timeout=TIMEOUT
        )


def _with_state(argv: list[str], state: str) -> list[str]:
    """The page's flags on 127.0.0.1, a free port and the test's Redis."""
    own = {"--host": "127.0.0.1", "--port": "0", "--state": state}
    return [own.get(argv[i - 1], arg) if i else arg for i, arg in enumerate(argv)]


@contextmanager
def _mocks(count: int, state: str, folder: Path) -> Iterator[list[str]]:
    env = clean_environ(
        {env_var("secret"): SECRET, env_var("api_keys"): KEY, env_var("control_token"): TOKEN}
    )
    command = [
        sys.executable,
        "-m",
        "verdict_contract.mockserver",
        *_with_state(mock_argv(), state),
    ]
    processes: list[subprocess.Popen[str]] = []
    try:
        for index in range(count):
            with (folder / f"mock{index}.err").open("w") as err:
                processes.append(
                    subprocess.Popen(
                        command, stdout=subprocess.PIPE, stderr=err, text=True, env=env
                    )
                )
        bases = []
        for index, process in enumerate(processes):
            first = read_line(process) or ""
            match = re.search(r"(http://127\.0\.0\.1:\d+)$", first.strip())
            assert match, (folder / f"mock{index}.err").read_text()
            bases.append(match.group(1))
        yield bases
    finally:
        for process in processes:
            stop_process(process)


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@contextmanager
def _nginx(conf: str, folder: Path, *ports: int) -> Iterator[Path]:
    """nginx in the foreground with ``conf`` (written in ``folder``) until it accepts on
    ``ports``; its error log; stopped after."""
    assert NGINX is not None
    path = folder / "nginx.conf"
    path.write_text(conf)
    log = folder / "verdict-mock.error.log"  # the page's name, in the test's folder
    command = [NGINX, "-c", str(path), "-e", str(log), "-g", "daemon off;"]
    with (folder / "nginx.err").open("w") as err:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, text=True)
    try:

        def up() -> bool:
            return process.poll() is None and all(_accepts(port) for port in ports)

        assert wait_until(up, timeout=30), (folder / "nginx.err").read_text()
        yield log
    finally:
        stop_process(process)  # SIGTERM: nginx's fast shutdown


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    require_nginx()
    folder = tmp_path_factory.mktemp("nginx")
    http, tcp = free_port(), free_port()
    with redis_server() as redis, _mocks(len(MOCKS), redis.url, folder) as bases:
        hosts = [base.removeprefix("http://") for base in bases]
        conf = templated(nginx_conf(), hosts, http, tcp, folder)
        with _nginx(conf, folder, http, tcp) as log:
            yield Deployment(http, tcp, bases, log)


@pytest.fixture
def nginx(deployment: Deployment) -> Iterator[httpx.Client]:
    with deployment.client() as client:
        assert client.post("/_mock/reset").status_code == 204
        yield client


def _mint(client: httpx.Client, script: list[Any]) -> str:
    minted = client.post("/_mock/sessions", json={"script": script})
    assert minted.status_code == 201, minted.text
    n: str = minted.json()["n"]
    return n


@dataclass
class Exchange:
    """What one request on a fresh connection got, byte for byte."""

    reset: bool  # the connection was reset (ECONNRESET)
    head: bytes
    body: bytes

    @property
    def status(self) -> int | None:
        match = re.match(rb"HTTP/1\.1 (\d{3}) ", self.head)
        return int(match.group(1)) if match else None

    @property
    def declared(self) -> int | None:
        match = re.search(rb"\r\ncontent-length: *(\d+)", self.head, re.I)
        return int(match.group(1)) if match else None


def exchange(port: int, n: str) -> Exchange:
    """``GET /e?n=`` on a new connection to ``port``: what came back before EOF or a reset."""
    request = (
        f"GET /e?n={n} HTTP/1.1\r\nHost: {PUBLIC}\r\nAuthorization: Bearer {KEY}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    data, reset = b"", False
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        sock.sendall(request)
        try:
            while chunk := sock.recv(65536):
                data += chunk
        except ConnectionResetError:
            reset = True
    head, _, body = data.partition(b"\r\n\r\n")
    return Exchange(reset, head, body)


def _steps(client: httpx.Client, n: str) -> list[tuple[int | None, str | None]]:
    """The journal's entries for ``n``: (status, fault), in order."""
    journal = client.get("/_mock/requests")
    assert journal.status_code == 200, journal.text
    return [(e["status"], e["fault"]) for e in journal.json() if e["n"] == n]


def test_control_calls_through_nginx_pass_the_host_check(
    deployment: Deployment, nginx: httpx.Client
) -> None:
    assert nginx.get("/_mock/health").status_code == 200
    # the dashboard's own call on nginx's port (not 80): its Origin names the port, as its Host
    public = f"{PUBLIC}:{deployment.http}"
    own = nginx.post("/_mock/reset", headers={"Host": public, "Origin": f"http://{public}"})
    assert own.status_code == 204, own.text
    # what nginx sends without `proxy_set_header Host`: the upstream's name
    with httpx.Client(base_url=deployment.mocks[0], timeout=TIMEOUT) as direct:
        bare = direct.get("/_mock/health", headers={"Host": "verdict_mock", TOKEN_HEADER: TOKEN})
    assert bare.status_code == 421


def test_a_reset_is_nginx_502_and_the_next_call_gets_the_next_step(
    deployment: Deployment, nginx: httpx.Client
) -> None:
    n = _mint(nginx, ["reset", 503])
    first = exchange(deployment.http, n)
    assert (first.status, first.reset) == (502, False), first
    assert b"nginx" in first.body  # nginx's own HTML page
    assert nginx.get("/e", params={"n": n}).status_code == 503  # not used by a retry
    assert nginx.get("/e", params={"n": n}).status_code == 200
    assert _steps(nginx, n) == [(None, "reset"), (503, None), (200, None)]


def test_three_resets_in_a_row_leave_the_pool_serving(nginx: httpx.Client) -> None:
    n = _mint(nginx, ["reset"] * len(MOCKS))
    assert [nginx.get("/e", params={"n": n}).status_code for _ in MOCKS] == [502] * len(MOCKS)
    after = [nginx.get("/e", params={"n": "demo-contradicted"}).status_code for _ in range(6)]
    assert after == [200] * 6


def test_truncated_and_malformed_pass_l7_as_they_are(
    deployment: Deployment, nginx: httpx.Client
) -> None:
    n = _mint(nginx, ["truncated", "malformed"])
    truncated = exchange(deployment.http, n)
    assert (truncated.status, truncated.reset) == (200, False), truncated
    assert truncated.declared is not None
    assert 0 < len(truncated.body) < truncated.declared  # a short body, then closed
    malformed = exchange(deployment.http, n)
    assert (malformed.status, len(malformed.body)) == (200, malformed.declared), malformed
    with pytest.raises(ValueError):
        json.loads(malformed.body)  # complete, and cut JSON
    assert _steps(nginx, n) == [(200, "truncated"), (200, "malformed")]


def test_faults_through_l4(deployment: Deployment, nginx: httpx.Client) -> None:
    n = _mint(nginx, ["reset", "truncated", "malformed"])
    reset = exchange(deployment.tcp, n)
    # nginx's stream module closes the client's side when the mock resets its own: the
    # client gets no byte and an end of stream (FIN), not ECONNRESET
    assert (reset.head, reset.body, reset.reset) == (b"", b"", False), reset
    truncated = exchange(deployment.tcp, n)
    assert truncated.status == 200, truncated
    assert truncated.declared is not None
    assert b"Server: verdict-mock" in truncated.head  # the mock's own answer, byte for byte
    assert 0 < len(truncated.body) < truncated.declared
    malformed = exchange(deployment.tcp, n)
    assert (malformed.status, len(malformed.body)) == (200, malformed.declared), malformed
    assert _steps(nginx, n) == [(None, "reset"), (200, "truncated"), (200, "malformed")]
    with httpx.Client(base_url=f"http://127.0.0.1:{deployment.tcp}", timeout=TIMEOUT) as l4:
        n = _mint(nginx, ["reset"])
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            l4.get("/e", params={"n": n}, headers={"Authorization": f"Bearer {KEY}"})


ESTABLISHED, TIME_WAIT = "01", "06"


def _connections(ports: set[int], state: str) -> set[tuple[str, str]]:
    """Sockets in ``state`` (local and remote address) whose remote end is one of ``ports``
    (Linux): nginx's side of its connections to the mocks while open; whichever side closed
    first, once closed."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, remote, current = line.split()[1:4]
        ends = {int(remote.split(":")[1], 16)}
        if state == TIME_WAIT:
            ends.add(int(local.split(":")[1], 16))
        if current == state and ends & ports:
            found.add((local, remote))
    return found


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="counts connections in /proc")
def test_keepalive_connections_are_reused(deployment: Deployment, nginx: httpx.Client) -> None:
    ports = {int(base.rsplit(":", 1)[1]) for base in deployment.mocks}
    open_before = _connections(ports, ESTABLISHED)  # kept from the tests before, if any
    closed_before = _connections(ports, TIME_WAIT)
    errors_before = deployment.log.read_text()
    statuses = [nginx.get("/e", params={"n": "demo-contradicted"}).status_code for _ in range(60)]
    assert statuses == [200] * 60
    # at most one new kept connection per mock (a worker's requests come one at a time), none closed
    assert len(_connections(ports, ESTABLISHED) - open_before) <= len(MOCKS)
    assert len(_connections(ports, TIME_WAIT) - closed_before) <= 1
    assert deployment.log.read_text() == errors_before  # nothing logged by nginx


def test_without_the_pages_lines_nginx_retries_and_empties_the_pool(
    deployment: Deployment, nginx: httpx.Client, tmp_path: Path
) -> None:
    """The failures the page's lines prevent, with those three lines taken out."""
    hosts = [base.removeprefix("http://") for base in deployment.mocks]
    http = free_port()
    conf = templated(nginx_conf(), hosts, http, free_port(), tmp_path)
    for line in (" max_fails=0", "proxy_next_upstream off;", "proxy_set_header Host $http_host;"):
        conf = conf.replace(line, "")
    with _nginx(conf, tmp_path, http) as log, Deployment(http, 0, [], log).client() as plain:
        assert plain.get("/_mock/health").status_code == 421  # Host: verdict_mock
        n = _mint(nginx, ["reset", 503])
        # the reset retried on another mock, which used the next step
        assert plain.get("/e", params={"n": n}).status_code == 503
        assert _steps(nginx, n) == [(None, "reset"), (503, None)]
        n = _mint(nginx, ["reset"] * len(MOCKS))
        assert plain.get("/e", params={"n": n}).status_code == 502
        later = plain.get("/e", params={"n": "demo-contradicted"})
        assert later.status_code == 502
        assert "text/html" in later.headers["content-type"]  # nginx's page, for every team
        assert "no live upstreams" in log.read_text()
