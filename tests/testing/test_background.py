"""The mock's own server on a daemon thread (testing.background): it stops cleanly, whenever."""

from __future__ import annotations

import threading

import httpx
import pytest

from verdict_contract.mockserver import Settings, create_app
from verdict_contract.testing.background import BackgroundServer


def _new_threads(before: set[threading.Thread]) -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t not in before and t.is_alive())


def test_stop_leaves_no_thread_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    errors: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    before = set(threading.enumerate())
    server = BackgroundServer(create_app(Settings())).start()
    with httpx.Client(base_url=server.base_url) as http:
        assert http.get("/_mock/health").status_code == 200
    assert _new_threads(before)  # the server runs on threads of its own
    server.stop()
    assert _new_threads(before) == []
    assert errors == []


def test_stop_ends_the_server_loop_even_with_a_client_connected() -> None:
    before = set(threading.enumerate())
    server = BackgroundServer(create_app(Settings())).start()
    with httpx.Client(base_url=server.base_url) as http:
        assert http.get("/_mock/health").status_code == 200  # the connection stays open
        server.stop()
        loops = [name for name in _new_threads(before) if name == "verdict-mock"]
    assert loops == []


def test_stop_right_after_start_is_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    errors: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    for _ in range(20):  # the stop may land before the server loop has begun
        BackgroundServer(create_app(Settings())).start().stop()
    assert errors == []
