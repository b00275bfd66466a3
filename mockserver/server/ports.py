"""Whether a port is free for a group of ``--workers``, and who holds it when it is not.

The workers bind one port with SO_REUSEPORT, which Linux grants to any socket of the same user
that sets it too: a second group, started with another secret on a port the first holds, would
bind it as well, and the kernel would split clients between two different mocks. So before the
parent reserves the port, it binds it once without SO_REUSEPORT, as a single process does: that
fails while anything else holds the port, and the parent refuses to start, naming the holder
where it can tell (a verdict-mock answers ``/_mock/livez`` there with its pid). Between that
check and the reservation a few microseconds pass, in which another group could still come.
"""

from __future__ import annotations

import errno
import http.client
import json
from typing import Final

from .wire import bound_socket

ASK_TIMEOUT: Final = 1.0
"""Seconds given to the holder of a port to say what it is."""
_WILDCARDS: Final = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}  # noqa: S104


def in_use(host: str, port: int) -> bool:
    """Whether another socket holds ``host``:``port`` (bound or listening, SO_REUSEPORT or not)."""
    try:
        bound_socket(host, port).close()
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return True
        raise
    return False


def holder(host: str, port: int) -> str | None:
    """What answers on ``host``:``port``: a verdict-mock's pid, or None where it cannot tell."""
    target = _WILDCARDS.get(host, host)
    connection = http.client.HTTPConnection(target, port, timeout=ASK_TIMEOUT)
    try:
        connection.request("GET", "/_mock/livez")
        answer = connection.getresponse()
        if answer.getheader("Server") != "verdict-mock" or answer.status != 200:
            return None
        pid = json.loads(answer.read(4096)).get("pid")
    except (OSError, ValueError, AttributeError, http.client.HTTPException):
        return None  # not HTTP, not JSON, too slow: someone else
    finally:
        connection.close()
    return f"a verdict-mock answers there (pid {pid})" if isinstance(pid, int) else None


def taken(host: str, port: int) -> str | None:
    """The one line that refuses a port another process holds, or None when it is free."""
    if port == 0 or not in_use(host, port):
        return None
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    who = holder(host, port)
    if who is None:
        return f"{where} is in use by another process; pick another --port"
    return f"{where} is in use: {who}; stop it, or pick another --port"
