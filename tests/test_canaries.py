"""Canaries: each private name of a library the code leans on, still there in the pinned range.

Each has no public equivalent (said beside its use), so ``pyproject.toml`` bounds the library
from above; a release that moves the name turns its canary red before any user meets it.
"""

from __future__ import annotations

import inspect

import httpcore
import httpx
import pytest
import responses
import respx
from _pytest import junitxml


def test_httpx_transports_keep_their_httpcore_pool() -> None:
    """contract_tests/transport.py gives the pool a network backend httpx takes no option for."""
    transport = httpx.HTTPTransport()
    assert isinstance(transport._pool, httpcore.ConnectionPool)
    assert "network_backend" in inspect.signature(httpcore.ConnectionPool).parameters


def test_respx_resolves_async_requests_in_aresolve() -> None:
    """src/verdict_contract/testing/mocks.py tells an async client's call by respx's frame name."""
    assert callable(respx.MockRouter.aresolve)
    assert "aresolve" in inspect.getsource(respx.MockRouter.async_handler)


def test_responses_keeps_the_real_adapter_send() -> None:
    """testing/mocks.py tells whether another responses mock is already started."""
    assert callable(responses._real_send)


def test_pytest_keeps_the_junit_writer_in_its_stash() -> None:
    """contract_tests/hooks.py adds the run's properties and the gate's case to JUnit."""
    assert isinstance(junitxml.xml_key, pytest.StashKey)
    assert hasattr(junitxml.LogXML, "add_global_property")


def test_pytest_modules_get_their_object_from_getobj() -> None:
    """contract_tests/hooks.py imports the suite's test modules by name in ``_getobj``, where
    pytest's Module imports by path (no public hook names the module pytest imports)."""
    assert "importtestmodule" in inspect.getsource(pytest.Module._getobj)
    assert "_getobj" in inspect.getsource(pytest.Module.obj.fget)  # type: ignore[attr-defined]


def test_redis_keeps_its_hiredis_parser_names() -> None:
    """mockserver/store/redisclients.py bounds each reply in redis-py's hiredis parsers, and its
    Line reads replies as they do (the same sentinel, the same error mapping)."""
    pytest.importorskip("redis", reason="the [redis] extra is not installed")
    from redis._parsers import _AsyncHiredisParser, _HiredisParser
    from redis._parsers.base import BaseParser
    from redis._parsers.hiredis import NOT_ENOUGH_DATA

    assert NOT_ENOUGH_DATA is not None
    assert callable(BaseParser.parse_error)
    assert isinstance(_HiredisParser, type)
    assert isinstance(_AsyncHiredisParser, type)
