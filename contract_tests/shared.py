"""What one run fetches once, shared by its pytest-xdist workers: a JSON file under a lock.

Every worker needs the same sessions and their answers; fetched per worker, each session would
be asked for once per worker and the workers would burn one rate limit together. The first
worker to ask computes the value under a file lock (filelock) and writes it into the run's
shared temporary folder; the others read it. Without xdist, the value is just computed.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from filelock import FileLock

from .body import Answer

DROPPED = frozenset({"content-encoding", "content-length", "transfer-encoding"})
"""Headers of the wire, not of the decoded body that is kept."""

T = TypeVar("T")


def run_folder(config: pytest.Config, basetemp: Path) -> Path | None:
    """Where this run's workers share values (``basetemp`` is a worker's); None without xdist.

    A worker is known by its ``workerinput``, not by xdist's environment variables: those are
    inherited by any pytest started from inside a worker, which is no worker of that run.
    """
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return None
    run = str(workerinput["testrunuid"])
    folder = basetemp.parent / f"verdict-contract-{run}"
    folder.mkdir(exist_ok=True)
    return folder


def once(
    folder: Path | None,
    name: str,
    compute: Callable[[], T],
    dump: Callable[[T], Any],
    load: Callable[[Any], T],
) -> T:
    """``compute()`` once per run: the first worker stores it, the others load it."""
    if folder is None:
        return compute()
    path = folder / f"{name}.json"
    with FileLock(str(path) + ".lock"):
        if path.exists():
            return load(json.loads(path.read_text(encoding="utf-8")))
        value = compute()
        path.write_text(json.dumps(dump(value)), encoding="utf-8")
        return value


def answer_to_json(answer: Answer) -> dict[str, Any]:
    """An answer as JSON: its response's status, headers and decoded body, and its notes."""
    response = None
    if answer.response is not None:
        response = {
            "status": answer.response.status_code,
            "headers": [
                [name, value]
                for name, value in answer.response.headers.multi_items()
                if name.lower() not in DROPPED
            ],
            "content": base64.b64encode(answer.response.content).decode("ascii"),
        }
    return {
        "session": answer.session,
        "response": response,
        "problem": answer.problem,
        "throttled": answer.throttled,
        "curl": answer.curl,
    }


def answer_from_json(data: dict[str, Any]) -> Answer:
    stored = data["response"]
    response = None
    if stored is not None:
        response = httpx.Response(
            stored["status"],
            headers=[(str(n), str(v)) for n, v in stored["headers"]],
            content=base64.b64decode(stored["content"]),
        )
    return Answer(data["session"], response, data["problem"], bool(data["throttled"]), data["curl"])
