"""How many instructions does the async server spend per ``GET /e``? Counted, not timed.

Run: ``python benchmarks/bench_instructions.py`` (about a minute; needs valgrind, e.g.
``apt-get install valgrind``); ``--row`` counts another path of ``/e`` than the demo session's
(``standing``: a script's standing 200; ``any-id``: ``--accept-any-session``; ``minted``: a
minted id; ``limited``: every request a 429), several at once with ``--row a --row b``.
The same loop as ``bench_connection.py`` (2,000 ``GET /e`` fed to one connection through a
transport that only counts bytes) runs under callgrind, which counts
the instructions executed: the same figure on a quiet machine and a loaded one, on a fast CPU
and a slow one (for one build of Python), so a change's cost can be read to a fraction of a per
cent where a timing moves by ten. Each count is the difference of two runs, one with three times
the requests of the other, so start-up, imports and what the first requests do once cancel out.

The floor, counted the same way: a bare ``asyncio.Protocol`` that parses each request with
httptools and writes the mock's answer bytes, built once. What the mock spends above it is its
own: reading the request into a cycle, deciding, journaling, counting, framing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import httptools

if not __package__:  # run as a file (python benchmarks/bench_instructions.py): the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # holds benchmarks/

from benchmarks.bench_connection import CountingTransport
from verdict_contract.core.rates import RateLimit
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.model.sessions import SessionSpec
from verdict_contract.mockserver.server.asyncserver import AsyncServer, HttpConnection

REQUESTS = 2000
WARM = 200
HERE = Path(__file__).resolve().parent
_REFS = re.compile(r"refs:\s+([\d,]+)")


def refs_of(callgrind_output: str) -> int:
    """The instructions callgrind counted (its ``I refs`` line); ValueError if there is none."""
    found = _REFS.search(callgrind_output)
    if found is None:
        raise ValueError("callgrind printed no 'I refs' line")
    return int(found.group(1).replace(",", ""))


def _count(what: str, row: str, requests: int) -> int:
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        "-m",
        "benchmarks.bench_instructions",
        "--child",
        what,
        row,
        str(requests),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # the same dict and set layouts every run
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, cwd=HERE.parent, env=env
    )
    if done.returncode != 0:
        raise SystemExit(f"{what} under callgrind failed:\n{done.stderr[-2000:]}")
    return refs_of(done.stderr)


def per_request(what: str, row: str = "demo") -> float:
    """Instructions per request: a run with 3 x :data:`REQUESTS` less one with :data:`REQUESTS`.

    Not less one with none: what the first requests do once (a collection of the garbage
    collector's first generations, caches filled) moved that figure by 1-2% between runs.
    """
    return (_count(what, row, 3 * REQUESTS) - _count(what, row, REQUESTS)) / (2 * REQUESTS)


Feed = Callable[[int], None]
"""Feeds one connection this many requests."""


_REQUEST = (
    b"GET /e?n=demo-contradicted HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
    b"Authorization: Bearer verdict-mock-local-key\r\n\r\n"
)
ROWS = ("demo", "standing", "any-id", "minted", "limited")
_SCENARIO = {"sessions": {"standing": {"always": {"status": 200, "headers": {"X-Bench": "1"}}}}}


def _child(what: str, row: str, requests: int) -> None:
    """Run in the counted process: ``what`` is ``mock`` or ``floor``, ``row`` one of ROWS."""
    budget = "1/3600" if row == "limited" else "1000000000/3600"
    with tempfile.TemporaryDirectory() as folder:
        scenario = Path(folder) / "scenario.json"
        scenario.write_text(json.dumps(_SCENARIO))
        settings = Settings(
            rate_limit=RateLimit.parse(budget), scenario=scenario, accept_any_session=True
        )
        server = AsyncServer(create_app(settings), "127.0.0.1", 0, 1)
    try:
        assert server.state is not None
        session = {
            "demo": "demo-contradicted",
            "standing": "standing",
            "any-id": "contradicted-any-id",
            "minted": server.state.mint(SessionSpec()).id,
            "limited": "demo-contradicted",
        }[row]
        request = _REQUEST.replace(b"demo-contradicted", session.encode())
        answer = _mock_answer(server, request)
        feed = _floor_feed(answer, request) if what == "floor" else _mock_feed(server, request)
        feed(WARM)
        if requests:
            feed(requests)
    finally:
        server.close()


class KeepingTransport(CountingTransport):
    """Counts what is written, and keeps it."""

    def __init__(self) -> None:
        super().__init__()
        self.data = b""

    def write(self, data: bytes) -> None:
        super().write(data)
        self.data += data


def _mock_feed(server: AsyncServer, request: bytes = _REQUEST) -> Feed:
    def feed(requests: int) -> None:
        connection = HttpConnection(server)
        connection.connection_made(CountingTransport())  # type: ignore[arg-type]
        for _ in range(requests):
            connection.data_received(request)
        connection.connection_lost(None)

    return feed


def _mock_answer(server: AsyncServer, request: bytes = _REQUEST) -> bytes:
    """The bytes the mock writes for ``request`` (the floor writes the same)."""
    transport = KeepingTransport()
    connection = HttpConnection(server)
    connection.connection_made(transport)  # type: ignore[arg-type]
    connection.data_received(request)
    connection.connection_lost(None)
    return transport.data


class Floor(asyncio.Protocol):
    """Parse with httptools, write a fixed answer: what any server on this stack does."""

    def __init__(self, answer: bytes) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.transport = CountingTransport()
        self.answer = answer

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_complete(self) -> None:
        self.transport.write(self.answer)


def _floor_feed(answer: bytes, request: bytes = _REQUEST) -> Feed:
    def feed(requests: int) -> None:
        floor = Floor(answer)
        for _ in range(requests):
            floor.data_received(request)

    return feed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=3, metavar=("WHAT", "ROW", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--row", action="append", choices=ROWS, help="a path of /e (repeatable)")
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], args.child[1], int(args.child[2]))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind on PATH (apt-get install valgrind)")
    floor = per_request("floor")
    print(
        f"Instructions per GET /e (callgrind, {REQUESTS} requests, Python {sys.version.split()[0]})"
    )
    print("| what | instructions | / floor |\n|---|---:|---:|")
    print(f"| floor: httptools parse, fixed answer | {floor:,.0f} | 1.00 |")
    for row in args.row or ["demo"]:
        mock = per_request("mock", row)
        print(f"| verdict-mock: GET /e, {row} | {mock:,.0f} | {mock / floor:.2f} |")


if __name__ == "__main__":
    main()
