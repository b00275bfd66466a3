"""The httpx clients the in-process respx mock answers: httpx, and httpx2 where it is installed.

httpx2 sends through ``httpcore2``, which a respx mocker of its own patches (as pytest-httpx2
does) into the same router. An async client's call waits in an anyio worker thread.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, ClassVar, Final

import anyio
import httpx

from .inprocess import InProcessApp, Reply

if TYPE_CHECKING:
    import respx

CLIENT_EXTENSION: Final = "verdict_client"  # set by the httpx2 mocker: which client sent it
FAULTS: Final = {  # the error httpx and httpcore2 alike raise for each fault, and its message
    "timeout": ("ReadTimeout", "timed out (scripted delay)"),
    "reset": ("ReadError", "[Errno 104] Connection reset by peer"),
    "truncated": (
        "RemoteProtocolError",
        "peer closed connection without sending complete message body",
    ),
}

RESOLVING_ASYNC: ContextVar[bool] = ContextVar("verdict_resolving_async", default=False)
"""Set while the mock's respx router resolves an async client's request (its ``aresolve``):
the side effect then returns a coroutine, which only ``aresolve`` awaits."""


def httpx_reply(request: httpx.Request, reply: Reply) -> httpx.Response:
    """The response to give, or the error to raise, for the client that sent ``request``
    (httpx2's transport turns httpcore2's errors into its own)."""
    fault = FAULTS.get(reply.fault or "")
    if fault is not None:
        error, message = fault
        if request.extensions.get(CLIENT_EXTENSION) == "httpx2":
            import httpcore2

            raise getattr(httpcore2, error)(message)
        raise getattr(httpx, error)(message, request=request)
    return httpx.Response(reply.status, headers=reply.headers, content=reply.body)


def respx_handler(target: InProcessApp, prefix: str = "") -> Callable[[httpx.Request], Any]:
    """respx's side effect for the mock's routes; ``prefix``: the base URL's path, taken off."""

    def call(request: httpx.Request, cancel: threading.Event | None = None) -> Reply:
        return target.call(
            request.method,
            str(request.url),
            prefix,  # the route matched only paths under it
            list(request.headers.items()),
            request.content,
            request.extensions.get("timeout", {}).get("read"),
            cancel,
        )

    async def later(request: httpx.Request) -> httpx.Response:
        """An async client's call: in a worker thread (asyncio and trio alike), so a delay holds
        no event loop; cancelled while a scripted delay holds it, it is journaled so."""
        cancel, done, lock = threading.Event(), threading.Event(), threading.Lock()
        began = False  # the call reached the mock (else a cancel has nothing to wait for)

        def work() -> Reply | None:
            nonlocal began
            with lock:
                if cancel.is_set():  # cancelled before the thread ran it: never sent
                    return None
                began = True
            try:
                return call(request, cancel)
            finally:
                done.set()

        try:
            reply = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            with lock:
                cancel.set()  # the delay stops, and the request is journaled as cancelled
                under_way = began
            if under_way:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(done.wait)
            raise
        assert reply is not None  # only a cancel leaves it unsent, and that raised above
        return httpx_reply(request, reply)

    def handle(request: httpx.Request) -> Any:
        if RESOLVING_ASYNC.get():
            return later(request)
        return httpx_reply(request, call(request))

    return handle


MOCKER_NAME: Final = "verdict-httpcore2"  # not pytest-httpx2's "httpcore2": both may be loaded


def _httpcore2_mocker() -> Any:
    """respx's mocker of httpcore2 (httpx2's transport), defined on first use; respx's registry
    keeps it, so a module imported again (pytester's in-process runs) finds the same one."""
    from respx.mocks import HTTPCoreMocker, Mocker

    known = Mocker.registry.get(MOCKER_NAME)
    if known is not None:
        return known

    class HTTPCore2Mocker(HTTPCoreMocker):
        name = MOCKER_NAME
        targets: ClassVar[list[str]] = [
            "httpcore2._sync.connection.HTTPConnection",
            "httpcore2._sync.connection_pool.ConnectionPool",
            "httpcore2._sync.http_proxy.HTTPProxy",
            "httpcore2._async.connection.AsyncHTTPConnection",
            "httpcore2._async.connection_pool.AsyncConnectionPool",
            "httpcore2._async.http_proxy.AsyncHTTPProxy",
        ]

        @classmethod
        def to_httpx_request(cls, **kwargs: Any) -> httpx.Request:
            request: httpx.Request = super().to_httpx_request(**kwargs)  # type: ignore[no-untyped-call]
            request.extensions = {**request.extensions, CLIENT_EXTENSION: "httpx2"}
            return request

    return HTTPCore2Mocker


@contextmanager
def also_httpx2(router: respx.MockRouter) -> Iterator[None]:
    """Route httpx2's requests through ``router`` too for the block, if httpx2 is installed."""
    if importlib.util.find_spec("httpcore2") is None:
        yield
        return
    mocker = _httpcore2_mocker()
    mocker.register(router)
    mocker.start()
    try:
        yield
    finally:
        mocker.unregister(router)
        mocker.stop()
