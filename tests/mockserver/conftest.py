"""Shared fixtures of the mock's tests: a test module sets ``app``, and gets ``client`` for it."""

from __future__ import annotations

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.helpers import KEY
from verdict_contract.mockserver import Settings, create_app


@pytest.fixture
def app() -> Flask:
    """The mock with a non-default key; a module overrides this to change the settings."""
    return create_app(Settings(api_keys=(KEY,)))


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    """Flask's test client for ``app`` (server behaviour is also tested over real HTTP)."""
    return app.test_client()
