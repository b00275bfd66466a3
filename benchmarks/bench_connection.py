"""How much Python does the async server spend per ``GET /e``? One connection, no network.

Run: ``python benchmarks/bench_connection.py``. A connection of the mock's own server is fed
2,000 ``GET /e``, one per read (as wrk and most clients send them: each waits for its answer)
and 50 per read (a client that pipelines), through a transport that only counts what is
written, so neither the kernel nor wrk is measured:
what is left is parsing, the request cycle, deciding, journaling and framing. It prints the best
of ``--runs`` runs per path, in microseconds per request: on a shared machine the best run is
the one least disturbed.
"""

from __future__ import annotations

import argparse
import time

from verdict_contract.core.rates import RateLimit
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.server.asyncserver import AsyncServer, HttpConnection
from verdict_contract.mockserver.settings import DEFAULT_API_KEY

REQUESTS = 2000


class CountingTransport:
    """A transport that takes every write and counts its bytes (the client reads at once)."""

    def __init__(self) -> None:
        self.written = 0

    def write(self, data: bytes) -> None:
        self.written += len(data)

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 1) if name == "peername" else default

    def pause_reading(self) -> None:
        """Nothing to pause: the benchmark feeds the connection itself."""

    def resume_reading(self) -> None:
        """As pause_reading."""

    def close(self) -> None:
        """Nothing to close."""


def per_request(server: AsyncServer, session: str, runs: int, per_read: int) -> float:
    """The best of ``runs``: seconds per request for ``GET /e?n=<session>``, ``per_read`` at a
    time."""
    request = (
        f"GET /e?n={session} HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
        f"Authorization: Bearer {DEFAULT_API_KEY}\r\n\r\n"
    ).encode()
    data = request * per_read
    best = float("inf")
    for _ in range(runs):
        connection = HttpConnection(server)
        connection.connection_made(CountingTransport())  # type: ignore[arg-type]
        started = time.perf_counter()
        for _ in range(REQUESTS // per_read):
            connection.data_received(data)
        best = min(best, (time.perf_counter() - started) / REQUESTS)
        connection.connection_lost(None)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=25)
    args = parser.parse_args()
    app = create_app(Settings(rate_limit=RateLimit.parse("1000000000/3600")))
    minted = app.test_client().post("/_mock/sessions", json={}).get_json()["n"]
    server = AsyncServer(app, "127.0.0.1", 0, 1)
    try:
        for name, session in (("demo session", "demo-contradicted"), ("minted session", minted)):
            for per_read in (1, 50):
                seconds = per_request(server, session, args.runs, per_read)
                print(f"GET /e, {name}, {per_read:2} per read: {seconds * 1e6:.1f} µs")
    finally:
        server.close()


if __name__ == "__main__":
    main()
