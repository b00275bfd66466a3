"""The routes for machines: the probes ``/_mock/livez`` and ``/_mock/readyz``, and
``/_mock/metrics`` in Prometheus' text format.

A probe or a scraper sends the pod's IP as its ``Host``, which the control API's guard refuses,
and a mock may run with ``--no-control``: so these stand outside the control blueprint and its
guard, with ``--no-control`` too. They change nothing and show no key, session id or journal
entry. The collector reads the plain counters of :class:`.traffic.Traffic` and the store's when
scraped: no metric object on the hot path.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from itertools import accumulate
from typing import Final

from flask import Blueprint, Flask, Response, jsonify, request
from prometheus_client import PLATFORM_COLLECTOR, PROCESS_COLLECTOR, Counter, Info
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from ..model.answer import NO_STATUS, NO_STORE, Answer
from ..model.scripts import MAX_SCRIPT_BYTES
from ..model.traffic import LATENCY_BOUNDS
from ..state import MockState
from ..store.backend import StateUnavailable
from .answers import state_of, to_response

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
"""The text format every Prometheus reads (the names here need none of 1.0.0's escaping)."""

_METHODS: Final = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
"""Methods counted by name; any other is ``other``: the labels stay bounded."""

probes = Blueprint("probes", __name__, url_prefix="/_mock")


def alive() -> Answer:
    """Alive: this process answers (its pid tells the processes of ``--workers`` apart); the
    async server answers it on its loop, where no thread waiting on a store holds it."""
    body = json.dumps({"pid": os.getpid(), "status": "ok"}).encode()
    return Answer(200, body, [("Cache-Control", NO_STORE)])


@probes.get("/livez")
def livez() -> Response:
    return to_response(alive())


@probes.get("/readyz")
def readyz() -> Response | tuple[Response, int]:
    """Ready while the state store can be written (asked without writing to it); with
    ``--tenants``, while any tenant's can (those whose cannot are named, each call of theirs a
    503): one tenant's lost slot does not take the process out for every other."""
    state = state_of()
    down = state.unwritable()
    if len(down) < max(1, len(state.tenants)):
        named = {"unavailable": sorted(down)} if state.tenants else {}
        return jsonify(status="ready", state=state.store.label, **named)
    problem = next(iter(down.values()))
    error = {"code": problem.code, "message": str(problem)}
    return jsonify(status="not_ready", state=state.store.label, error=error), 503


class MockCollector(Collector):
    """The mock's counters and bounds as Prometheus metrics, read when scraped; with
    ``--tenants``, each series labelled by its tenant."""

    def __init__(self, state: MockState) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        tenants = list(self.state.tenants.values()) or [self.state]
        by = ["tenant"] if self.state.tenants else []
        requests = CounterMetricFamily(
            "verdict_mock_requests",
            "Requests to /e answered by the async server, by status and outcome",
            labels=[*by, "status", "outcome"],
        )
        seconds = HistogramMetricFamily(
            "verdict_mock_request_seconds",
            "Seconds from a request to /e read whole to its answer written (delays included)",
            labels=by,
        )
        for state in tenants:
            named = [state.tenant_name] if by else []
            traffic = state.traffic
            answers, buckets = dict(traffic.answers), list(traffic.buckets)
            labelled = {
                (NO_STATUS if status is None else str(status), outcome): n
                for (status, outcome), n in answers.items()
            }
            for labels, count in sorted(labelled.items()):
                requests.add_metric([*named, *labels], count)
            cumulative = list(accumulate(buckets))
            bounds = [*map(repr, LATENCY_BOUNDS), "+Inf"]
            seconds.add_metric(
                named, list(zip(bounds, cumulative, strict=True)), traffic.latency_sum
            )
        yield requests
        yield seconds
        if self.state.shared is not None:
            trips, errors = self.state.shared.calls()
            yield CounterMetricFamily(
                "verdict_mock_state_round_trips", "Round trips to the state store", value=trips
            )
            yield CounterMetricFamily(
                "verdict_mock_state_errors",
                "Round trips to the state store that failed (down, slow, full, read-only)",
                value=errors,
            )
        yield from self._bounds(tenants, by)

    def _bounds(self, tenants: list[MockState], by: list[str]) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "verdict_mock_journal_limit",
            "Entries the journal keeps",
            value=self.state.settings.journal_size,
        )
        yield GaugeMetricFamily(
            "verdict_mock_script_bytes_limit",
            "Bytes of scripts the store holds at most",
            value=MAX_SCRIPT_BYTES,
        )
        entries = GaugeMetricFamily(
            "verdict_mock_journal_entries", "Entries in the journal", labels=by
        )
        held = GaugeMetricFamily("verdict_mock_script_bytes", "Bytes of scripts held", labels=by)
        try:  # with --state, each is a round trip: left out while the store fails
            shared = self.state.shared
            if shared is not None and not shared.reports():
                return  # another process sharing the state exports them: once, not N times
            counts = [(s.store.journal_length(), s.store.script_bytes()) for s in tenants]
        except StateUnavailable:
            return
        for state, (journaled, scripted) in zip(tenants, counts, strict=True):
            named = [state.tenant_name] if by else []
            entries.add_metric(named, journaled)
            held.add_metric(named, scripted)
        yield entries
        yield held


def install_metrics(app: Flask, state: MockState) -> None:
    """Give the app ``/_mock/metrics`` and the registry it reads, and count its control calls."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MockCollector(state))
    registry.register(PROCESS_COLLECTOR)  # process_cpu_seconds_total, resident memory, fds...
    registry.register(PLATFORM_COLLECTOR)  # python_info
    try:
        ours = version("verdict-contract")
    except PackageNotFoundError:  # a checkout on sys.path, not installed
        ours = "unknown"
    build_help = "The mock's version and Python's, as labels (always 1)"
    build = Info("verdict_mock_build", build_help, registry=registry)
    python, implementation = platform.python_version(), platform.python_implementation()
    build.info({"version": ours, "python": python, "implementation": implementation})
    control_calls = Counter(
        "verdict_mock_control_requests",
        "Calls under /_mock/ by route, method and status (not livez on the async server's loop)",
        ["route", "method", "status"],
        registry=registry,
    )

    @app.after_request
    def count_control_call(response: Response) -> Response:
        if request.path.startswith("/_mock"):  # a route's rule, not the path: bounded labels
            route = request.url_rule.rule if request.url_rule is not None else "unmatched"
            method = request.method if request.method in _METHODS else "other"
            control_calls.labels(route, method, str(response.status_code)).inc()
        return response

    @app.get("/_mock/metrics", endpoint="metrics.scrape")
    def scrape() -> Response:
        """The metrics as Prometheus reads them; nothing is changed by reading."""
        return Response(generate_latest(registry), content_type=CONTENT_TYPE)
