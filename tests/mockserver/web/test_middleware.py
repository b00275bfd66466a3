"""The WSGI layers' limits and the app's error answers over real HTTP: JSON wherever the app
decides (the mock's own server, on a thread of the test)."""

from __future__ import annotations

import json
import re
import socket
import threading
import tracemalloc
from collections.abc import Iterator

import httpx
import pytest

from tests.helpers import KEY, bearer, error_of, raw_request, running
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.web.middleware import MAX_HEADER_BYTES
from verdict_contract.testing.background import BackgroundServer

MAX_BODY = 64 * 1024


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with running(create_app(Settings(api_keys=(KEY,), max_body=MAX_BODY))) as background:
        yield background


def error_code(response: httpx.Response) -> str:
    error = error_of(response.status_code, response.headers.get("content-type"), response.content)
    code: str = error["code"]
    return code


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/nope", 404, "not_found"),
        ("GET", "/_mock/nope", 404, "not_found"),
        ("PUT", "/e", 405, "method_not_allowed"),
        ("DELETE", "/e", 405, "method_not_allowed"),
        ("GET", "/_mock/reset", 405, "method_not_allowed"),
        ("PATCH", "/_mock/sessions", 405, "method_not_allowed"),
    ],
)
def test_unknown_paths_and_methods_are_json(
    http: httpx.Client, method: str, path: str, status: int, code: str
) -> None:
    response = http.request(method, path)
    assert response.status_code == status
    assert error_code(response) == code


@pytest.mark.parametrize("path", ["/_mock/sessions", "/e", "/nope"])
def test_a_body_over_the_limit_is_a_json_413(http: httpx.Client, path: str) -> None:
    response = http.post(path, content=b"{" * (MAX_BODY + 1))
    assert response.status_code == 413
    assert error_code(response) == "request_entity_too_large"
    assert str(MAX_BODY) in response.json()["error"]["message"]


def test_a_body_at_the_limit_is_read(http: httpx.Client) -> None:
    body = json.dumps({"verdict": "refused", "fields": {"x": "y" * (MAX_BODY - 100)}})
    response = http.post(
        "/_mock/sessions", content=body.encode(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code != 413  # read and judged: too long for an id, so a 422
    assert error_code(response) == "invalid_session"


def test_a_chunked_body_over_the_limit_is_a_json_413(http: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(4):
            yield b" " * (MAX_BODY // 2)

    response = http.post(
        "/_mock/sessions", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert error_code(response) == "request_entity_too_large"


def test_a_huge_mint_body_does_not_raise_peak_memory(server: BackgroundServer) -> None:
    """A 16 MB body over a 64 KB limit: refused without being decoded (today's cost: 5x it)."""
    body = b'"' + b"a" * (16 * 1024 * 1024) + b'"'
    tracemalloc.start()
    try:
        with httpx.Client(base_url=server.base_url, timeout=30) as http:
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            response = http.post(
                "/_mock/sessions", content=body, headers={"Content-Type": "application/json"}
            )
            grown = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert response.status_code == 413
    # the client's own copy of the body is traced too; the server must add little to it
    assert grown < len(body) + 8 * 1024 * 1024, f"peak grew by {grown / 1e6:.0f} MB"


def test_headers_over_the_limit_are_a_json_431(http: httpx.Client) -> None:
    response = http.get(
        "/e", params={"n": "demo-refused"}, headers={"X-Big": "x" * MAX_HEADER_BYTES}
    )
    assert response.status_code == 431
    assert error_code(response) == "request_header_fields_too_large"
    fine = http.get("/e", params={"n": "demo-refused"}, headers={**bearer(), "X-Big": "x" * 1000})
    assert fine.status_code == 200


def _read_answer(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


@pytest.mark.parametrize(
    ("body", "status"), [(b'{"verdict": "refused"}', 201), (b"x" * (MAX_BODY + 1), 413)]
)
def test_expect_100_continue_never_hangs(
    server: BackgroundServer, body: bytes, status: int
) -> None:
    with socket.create_connection(("127.0.0.1", server.effective_port), timeout=5) as sock:
        sock.sendall(
            b"POST /_mock/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
        )
        first = _read_answer(sock)  # within the timeout: 100 Continue, or the final answer
        assert first.startswith(b"HTTP/1.1 ")
        if first.startswith(b"HTTP/1.1 100"):
            sock.sendall(body)
            first = first.split(b"\r\n\r\n", 1)[1] or _read_answer(sock)
        assert first.startswith(f"HTTP/1.1 {status}".encode()), first[:200]


def test_a_bad_content_length_is_not_a_5xx(server: BackgroundServer) -> None:
    answer = raw_request(
        server.effective_port,
        b"POST /_mock/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -5\r\n\r\n",
    )
    assert answer.startswith(b"HTTP/1.1 4"), answer[:100]


# --- bad input that used to get through -------------------------------------------------------


def test_a_flood_of_huge_query_strings_keeps_the_journal_small(server: BackgroundServer) -> None:
    query = "&".join(f"p{i}=v" for i in range(20_000)).encode()  # 20,000 parameters, ~170 KB
    requests = 50
    for _ in range(requests):
        answer = raw_request(
            server.effective_port, b"GET /e?" + query + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        )
        assert answer.startswith(b"HTTP/1.1 401"), answer[:100]
    with httpx.Client(base_url=server.base_url, timeout=10) as http:
        journal = http.get("/_mock/requests")
    assert journal.status_code == 200
    entries = journal.json()[-requests:]
    # Without a key, only the first 4 KB of the query are read (explain.MAX_UNAUTHORIZED_QUERY)
    assert all(
        re.fullmatch(
            r"\d+ more parameter\(s\), \d+ bytes not read \(no valid key\)", e["query"]["…(cut)"][0]
        )
        for e in entries
    )
    per_entry = len(journal.content) / len(journal.json())
    assert per_entry < 2_000, f"received {per_entry:.0f} bytes per entry; documented: < 2 KB"


@pytest.mark.parametrize("text", ["\\ud800", "a\\udfffb", "\\udc80"])
def test_a_mint_with_a_lone_surrogate_is_a_422(http: httpx.Client, text: str) -> None:
    body = '{"verdict": "refused", "fields": {"summary": "' + text + '"}}'
    response = http.post(
        "/_mock/sessions", content=body.encode(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422, response.text
    assert "fields" in response.json()["error"]["message"]
    fine = body.replace(text, "\\u00e9t\\u00e9")  # escaped, but valid text
    minted = http.post(
        "/_mock/sessions", content=fine.encode(), headers={"Content-Type": "application/json"}
    )
    assert minted.status_code == 201
    served = http.get("/e", params={"n": minted.json()["n"]}, headers=bearer())
    assert served.status_code == 200
    assert served.json()["summary"] == "été"


# --- one header bound for every path ----------------------------------------------------------


def _many_headers(count: int) -> bytes:
    # names of 6 bytes and values of 1: 7 bytes each as sent, 12 more as WSGI names them (HTTP_)
    return b"".join(b"H%05d: v\r\n" % i for i in range(count))


@pytest.mark.parametrize("kind", ["async", "wsgi"])
def test_many_small_headers_are_judged_alike_on_every_path(kind: str) -> None:
    """7,000 headers of 7 bytes (49,000, under 64 KiB): /e and /_mock/health both read them."""
    app = create_app(Settings(api_keys=(KEY,)))
    headers = _many_headers(7_000)
    with running(app, server=kind) as background:
        port = background.effective_port
        answers = {
            path: raw_request(
                port,
                b"GET " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                b"Authorization: Bearer " + KEY.encode() + b"\r\n" + headers + b"\r\n",
            )
            for path in (b"/e?n=demo-refused", b"/_mock/health")
        }
        over = raw_request(
            port,
            b"GET /_mock/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            + _many_headers(MAX_HEADER_BYTES // 7 + 1)
            + b"\r\n",
        )
    assert {path: answer[:12] for path, answer in answers.items()} == {
        b"/e?n=demo-refused": b"HTTP/1.1 200",
        b"/_mock/health": b"HTTP/1.1 200",
    }
    assert over.startswith(b"HTTP/1.1 431"), over[:100]


def test_a_scripted_reset_ends_the_connection_under_flask_run() -> None:
    """Under werkzeug's development server (``flask run``) a scripted ``reset`` ends the
    connection with no byte of an answer, at once: the client is not left waiting."""
    from werkzeug.serving import make_server

    app = create_app(Settings(api_keys=(KEY,)))
    werkzeug_server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=werkzeug_server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{werkzeug_server.server_port}"
    try:
        minted = httpx.post(f"{base}/_mock/sessions", json={"script": ["reset"]}).json()
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.get(f"{base}/e", params={"n": minted["n"]}, headers=bearer(KEY), timeout=30)
        after = httpx.get(f"{base}/e", params={"n": minted["n"]}, headers=bearer(KEY))
        assert after.status_code == 200  # the step was used once
    finally:
        werkzeug_server.shutdown()
        thread.join(timeout=10)
