"""Probes for machines: ``/_mock/livez`` and ``/_mock/readyz``, from any Host, read-only.

A probe sends the pod's IP as its ``Host``, which the control API's guard refuses, and a mock
may run with ``--no-control``: so these routes stand outside the control blueprint and its
guard. They change nothing and say nothing secret.
"""

from __future__ import annotations

import os

from flask import Blueprint, Response, jsonify

from ..model.answer import NO_STORE
from .answers import state_of

probes = Blueprint("probes", __name__, url_prefix="/_mock")


@probes.after_request
def _unstored(response: Response) -> Response:
    response.headers["Cache-Control"] = NO_STORE
    return response


@probes.get("/livez")
def livez() -> Response:
    """Alive: this process answers (its pid tells the processes of ``--workers`` apart)."""
    return jsonify(status="ok", pid=os.getpid())


@probes.get("/readyz")
def readyz() -> Response | tuple[Response, int]:
    """Ready while the state store can be written (asked without writing to it)."""
    state = state_of()
    problem = state.writable()
    if problem is None:
        return jsonify(status="ready", state=state.store.label)
    error = {"code": problem.code, "message": str(problem)}
    return jsonify(status="not_ready", state=state.store.label, error=error), 503
