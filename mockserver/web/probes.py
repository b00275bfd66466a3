"""Probes for machines: ``/_mock/livez`` and ``/_mock/readyz``, from any Host, read-only.

A probe (Kubernetes', a load balancer's) sends the pod's IP as its ``Host``, which the control
API's guard answers with 421, and a mock may run with ``--no-control``: so these routes stand
outside the control blueprint and its guard. They change nothing and say nothing secret (no
key, no journal), and take ``GET`` and ``HEAD`` only (any other method: 405).

- ``livez``: the process serves (its event loop and worker threads turn): 200.
- ``readyz``: ``/e`` can be answered now: 200; 503 with the documented error shape while the
  state store cannot be written (full under ``noeviction``, a read-only replica, down or slow),
  its code the one ``/e``'s own 503 carries then.
"""

from __future__ import annotations

import os

from flask import Blueprint, Response, jsonify

from ..model.answer import NO_STORE
from .answers import state_of

probes = Blueprint("probes", __name__, url_prefix="/_mock")


def _unstored(response: Response, status: int = 200) -> Response:
    response.status_code = status
    response.headers["Cache-Control"] = NO_STORE
    return response


@probes.get("/livez")
def livez() -> Response:
    """Alive: this process answers (its pid tells the processes of ``--workers`` apart)."""
    return _unstored(jsonify(status="ok", pid=os.getpid()))


@probes.get("/readyz")
def readyz() -> Response:
    """Ready while the state store can be written (asked without writing to it)."""
    state = state_of()
    store = state.store
    problem = state.writable()
    if problem is None:
        return _unstored(jsonify(status="ready", state=store.label))
    error = {"code": problem.code, "message": str(problem)}
    return _unstored(jsonify(status="not_ready", state=store.label, error=error), 503)
