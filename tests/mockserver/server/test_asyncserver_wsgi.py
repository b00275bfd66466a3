"""mockserver.server.asyncserver's calls into the app: a parsed request as a PEP 3333 environ, and
a WSGI answer collected."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from verdict_contract.mockserver.server.asyncserver import RequestCycle, call_app, environ_for
from verdict_contract.mockserver.server.wire import Reply

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

SERVER = ("127.0.0.1", 8080)
PEER = ("127.0.0.1", 50000)


def request(url: bytes, *headers: tuple[bytes, bytes], body: bytes = b"") -> RequestCycle:
    """A POST read whole, as the server holds it."""
    cycle = RequestCycle(url=url, headers=list(headers), body=bytearray(body), version="1.1")
    cycle.complete("POST", keep_alive=True)
    return cycle


def test_path_and_query_as_pep_3333_says() -> None:
    environ = environ_for(request(b"/_mock/s%C3%A9ssions?a=%20b&c"), SERVER, PEER)
    assert environ["PATH_INFO"] == "/_mock/séssions".encode().decode("latin-1")
    assert environ["QUERY_STRING"] == "a=%20b&c"
    assert (environ["SERVER_NAME"], environ["SERVER_PORT"]) == ("127.0.0.1", "8080")
    assert (environ["REMOTE_ADDR"], environ["SERVER_PROTOCOL"]) == ("127.0.0.1", "HTTP/1.1")
    assert environ["wsgi.input"].read() == b""


def test_absolute_form_targets_keep_only_path_and_query() -> None:
    environ = environ_for(request(b"http://127.0.0.1:8080/e?n=x"), SERVER, PEER)
    assert (environ["PATH_INFO"], environ["QUERY_STRING"]) == ("/e", "n=x")


def test_headers_become_cgi_names_repeats_joined_underscores_dropped() -> None:
    environ = environ_for(
        request(
            b"/",
            (b"Content-Type", b"application/json"),
            (b"X-Forwarded-For", b"10.0.0.1"),
            (b"X_Forwarded_For", b"6.6.6.6"),
            (b"Accept", b"a"),
            (b"accept", b"b"),
            (b"X-Name", b"caf\xe9"),
        ),
        SERVER,
        PEER,
    )
    assert environ["CONTENT_TYPE"] == "application/json"
    assert "HTTP_CONTENT_TYPE" not in environ
    assert environ["HTTP_X_FORWARDED_FOR"] == "10.0.0.1"  # not overwritten by the spoof
    assert environ["HTTP_ACCEPT"] == "a,b"
    assert environ["HTTP_X_NAME"] == "café"  # latin-1, as PEP 3333 says


def test_a_chunked_body_arrives_with_its_length_and_without_the_chunking() -> None:
    chunked = request(b"/", (b"Transfer-Encoding", b"chunked"), body=b'{"a": 1}')
    environ = environ_for(chunked, SERVER, PEER)
    assert environ["CONTENT_LENGTH"] == "8"
    assert "HTTP_TRANSFER_ENCODING" not in environ
    assert environ["wsgi.input"].read() == b'{"a": 1}'


def _app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
    write = start_response("201 Created", [("X-A", "1")])
    write(b"written ")
    return [b"and ", b"returned"]


class _Closing:
    def __init__(self) -> None:
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        yield b"body"

    def close(self) -> None:
        self.closed = True


def test_call_app_collects_status_headers_and_every_chunk() -> None:
    reply = call_app(_app, environ_for(request(b"/"), SERVER, PEER))
    assert reply == Reply("201 Created", [("X-A", "1")], b"written and returned")
    assert reply.declared_length() is None


def test_call_app_closes_what_the_app_returned() -> None:
    body = _Closing()
    reply = call_app(lambda e, s: (s("200 OK", []), body)[1], {})
    assert (reply.body, body.closed) == (b"body", True)


def test_a_second_start_with_exc_info_replaces_the_headers_as_nothing_was_sent() -> None:
    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        start_response("200 OK", [("X-First", "1")])
        try:
            raise KeyError("late")
        except KeyError:
            start_response("400 Oops", [("X-Error", "1")], sys.exc_info())  # PEP 3333
        return [b"error page"]

    assert call_app(app, {}) == Reply("400 Oops", [("X-Error", "1")], b"error page")


def test_a_second_start_without_exc_info_is_an_error() -> None:
    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        start_response("200 OK", [])
        start_response("201 Created", [])
        return []

    with pytest.raises(AssertionError, match="twice"):
        call_app(app, {})


def test_an_app_that_never_starts_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="start_response"):
        call_app(lambda e, s: [], {})


@pytest.mark.parametrize(
    ("headers", "length"),
    [([("Content-Length", "12")], 12), ([("content-length", " 7 ")], 7), ([("X", "1")], None)],
)
def test_declared_length(headers: list[tuple[str, str]], length: Any) -> None:
    assert Reply("200 OK", headers, b"").declared_length() == length
