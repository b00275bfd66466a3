"""Shared fixtures of the mock's tests.

A test module sets ``app`` and gets ``client`` (Flask's test client) for it; a module that
defines a ``server`` fixture (a running BackgroundServer) gets ``http``, an httpx client of it.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.helpers import KEY
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.testing.background import BackgroundServer


@pytest.fixture
def app() -> Flask:
    """The mock with a non-default key; a module overrides this to change the settings."""
    return create_app(Settings(api_keys=(KEY,)))


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    """Flask's test client for ``app`` (server behaviour is also tested over real HTTP)."""
    return app.test_client()


@pytest.fixture
def http(server: BackgroundServer) -> Iterator[httpx.Client]:
    """An httpx client of the module's ``server``, with a 10 s timeout."""
    with httpx.Client(base_url=server.base_url, timeout=10) as client:
        yield client
