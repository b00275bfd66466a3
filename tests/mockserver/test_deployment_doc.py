"""docs/servers.md's Kubernetes example matches what the mock serves.

The YAML of the deployment section is read as Kubernetes would read it; its flags and variables
are parsed by ``verdict-mock``'s own parser and settings, its ports, probe paths and scrape
annotations checked against them and the app's routes, and a real process started with its
flags (a real ``redis-server`` as its state) answers its probes and its scrape path.
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import announced, clean_environ, stop_process
from tests.redisserver import redis_server
from verdict_contract.core.errors import SettingsError
from verdict_contract.mockserver.cli import build_parser, settings_from
from verdict_contract.mockserver.settings import Settings, env_var, options
from verdict_contract.mockserver.store.redisclients import TIMEOUT
from verdict_contract.mockserver.web.app import create_app
from verdict_contract.mockserver.web.guard import TOKEN_HEADER, exposure_warning

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Deploying it for a platform team"
MOCK = "verdict-mock"
ENDPOINTS = {"liveness": "probes.livez", "readiness": "probes.readyz", "scrape": "metrics.scrape"}

Doc = dict[str, Any]


def documents() -> list[Doc]:
    """Every YAML document of the section, in order."""
    page = (ROOT / "docs" / "servers.md").read_text()
    section = page[page.index(SECTION) :]
    following = section.find("\n## ", len(SECTION))
    section = section if following < 0 else section[:following]
    blocks = re.findall(r"```yaml\n(.*?)```", section, re.S)
    assert blocks, "no YAML in the deployment section"
    return [doc for block in blocks for doc in yaml.safe_load_all(block) if doc]


def _find(docs: list[Doc], kind: str, name: str) -> Doc:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def routes() -> dict[str, str]:
    """The app's path of each endpoint the example names."""
    paths = {rule.endpoint: rule.rule for rule in create_app(Settings()).url_map.iter_rules()}
    return {what: paths[endpoint] for what, endpoint in ENDPOINTS.items()}


def container(docs: list[Doc]) -> Doc:
    (only,) = _find(docs, "Deployment", MOCK)["spec"]["template"]["spec"]["containers"]
    assert isinstance(only, dict)
    return only


def environ(docs: list[Doc]) -> dict[str, str]:
    """The container's variables, those of the Secret read from it."""
    secret = _find(docs, "Secret", MOCK)["stringData"]
    values = {}
    for variable in container(docs).get("env", []):
        if "value" in variable:
            values[variable["name"]] = variable["value"]
        else:
            ref = variable["valueFrom"]["secretKeyRef"]
            assert ref["name"] == MOCK, ref
            values[variable["name"]] = secret[ref["key"]]
    return values


def _port(named: int | str, ports: list[Doc]) -> int | None:
    """A probe's or a Service's port: a number, or the name of a container port."""
    if isinstance(named, int):
        return named
    found = [p["containerPort"] for p in ports if p.get("name") == named]
    return found[0] if found else None


def problems(docs: list[Doc]) -> list[str]:
    """Where the example disagrees with the mock; empty when it holds together."""
    found: list[str] = []
    pod = _find(docs, "Deployment", MOCK)["spec"]["template"]
    one = container(docs)
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    if one["command"] != [MOCK] or MOCK not in scripts:
        found.append(f"command {one['command']} is not the {MOCK} script")
    settable = {env_var(name) for name, _, _ in options()}
    for variable in sorted(set(environ(docs)) - settable):
        found.append(f"{variable} is no setting's variable")
    try:
        args = build_parser().parse_args(one["args"])
        settings = settings_from(args, environ(docs))
    except SystemExit:  # argparse refused a flag (it printed which)
        return [*found, f"verdict-mock refuses the args {one['args']}"]
    except SettingsError as exc:
        return [*found, f"verdict-mock refuses the settings: {exc}"]
    paths = routes()
    ports = one["ports"]
    if _port("http", ports) != settings.port:
        found.append(f"the container port {ports} is not --port {settings.port}")
    for what, key in (("liveness", "livenessProbe"), ("readiness", "readinessProbe")):
        probe = one[key]["httpGet"]
        if probe["path"] != paths[what]:
            found.append(f"the {what} probe asks {probe['path']}, the mock serves {paths[what]}")
        if _port(probe["port"], ports) != settings.port:
            found.append(f"the {what} probe asks port {probe['port']}, not {settings.port}")
        if one[key]["timeoutSeconds"] <= TIMEOUT:
            found.append(f"the {what} probe gives up before the mock's {TIMEOUT} s on Redis")
    notes = pod["metadata"]["annotations"]
    if notes.get("prometheus.io/scrape") != "true":
        found.append("Prometheus is not asked to scrape")
    if notes.get("prometheus.io/path") != paths["scrape"]:
        found.append(f"Prometheus scrapes {notes.get('prometheus.io/path')}, not {paths['scrape']}")
    if notes.get("prometheus.io/port") != str(settings.port):
        found.append(f"Prometheus scrapes port {notes.get('prometheus.io/port')}")
    (service_port,) = _find(docs, "Service", MOCK)["spec"]["ports"]
    if _port(service_port["targetPort"], ports) != settings.port:
        found.append(f"the Service sends to {service_port['targetPort']}, not {settings.port}")
    if pod["spec"]["terminationGracePeriodSeconds"] <= settings.grace_seconds:
        found.append("the pod's grace period ends before the mock's --grace-seconds")
    if settings.workers != 1:
        found.append("a pod of several workers: a scrape reaches one of them at random")
    if exposure_warning(settings) is not None:
        found.append("the control API is open to the cluster without a token")
    redis_port = _find(docs, "Service", f"{MOCK}-redis")["spec"]["ports"][0]["port"]
    if not str(settings.state).startswith(f"redis://{MOCK}-redis:{redis_port}/"):
        found.append(f"--state {settings.state.label} is not the Redis Service")
    return found


def test_the_kubernetes_example_holds_together() -> None:
    assert problems(documents()) == []


def _edit(kind: str, name: str, *keys: str | int, value: object) -> Callable[[list[Doc]], None]:
    """Set ``value`` at ``keys`` in the document ``kind``/``name`` (``value=None``: remove)."""

    def edit(docs: list[Doc]) -> None:
        node: Any = _find(docs, kind, name)
        *parents, last = keys
        for key in parents:
            node = node[key]
        if value is None:
            del node[last]
        else:
            node[last] = value

    return edit


_POD = ("spec", "template")
_ONE = (*_POD, "spec", "containers", 0)
_NOTES = (*_POD, "metadata", "annotations")
D, S = "Deployment", "Service"
BREAKS: dict[str, tuple[Callable[[list[Doc]], None], str]] = {
    "liveness path": (
        _edit(D, MOCK, *_ONE, "livenessProbe", "httpGet", "path", value="/healthz"),
        "liveness probe asks /healthz",
    ),
    "readiness path": (
        _edit(D, MOCK, *_ONE, "readinessProbe", "httpGet", "path", value="/ready"),
        "readiness probe asks /ready",
    ),
    "probe port": (
        _edit(D, MOCK, *_ONE, "readinessProbe", "httpGet", "port", value=9090),
        "asks port 9090",
    ),
    "probe timeout": (
        _edit(D, MOCK, *_ONE, "livenessProbe", "timeoutSeconds", value=1),
        "gives up",
    ),
    "container port": (
        _edit(D, MOCK, *_ONE, "ports", 0, "containerPort", value=9090),
        "container port",
    ),
    "scrape path": (
        _edit(D, MOCK, *_NOTES, "prometheus.io/path", value="/metrics"),
        "Prometheus scrapes /metrics",
    ),
    "scrape port": (
        _edit(D, MOCK, *_NOTES, "prometheus.io/port", value="9100"),
        "Prometheus scrapes port 9100",
    ),
    "service target": (_edit(S, MOCK, "spec", "ports", 0, "targetPort", value=80), "Service"),
    "grace": (_edit(D, MOCK, *_POD, "spec", "terminationGracePeriodSeconds", value=5), "grace"),
    "a mistyped flag": (_edit(D, MOCK, *_ONE, "args", 6, value="--log-fromat=json"), "refuses"),
    "a bad value": (_edit(D, MOCK, *_ONE, "args", 6, value="--log-format=xml"), "refuses the"),
    "a mistyped variable": (
        _edit(D, MOCK, *_ONE, "env", 0, "name", value="VERDICT_MOCK_STAT"),
        "VERDICT_MOCK_STAT is no setting's variable",
    ),
    "workers": (_edit(D, MOCK, *_ONE, "args", 2, value="--workers=2"), "several workers"),
    "no token": (_edit(D, MOCK, *_ONE, "env", 3, value=None), "without a token"),
    "command": (_edit(D, MOCK, *_ONE, "command", value=["verdict-contract"]), "command"),
    "redis service": (
        _edit(S, f"{MOCK}-redis", "spec", "ports", 0, "port", value=6380),
        "is not the Redis Service",
    ),
}


@pytest.mark.parametrize("broken", sorted(BREAKS))
def test_each_kind_of_mismatch_is_found(broken: str, capsys: pytest.CaptureFixture[str]) -> None:
    edit, said = BREAKS[broken]
    docs = copy.deepcopy(documents())
    edit(docs)
    found = problems(docs)
    capsys.readouterr()  # argparse's own line for a refused flag
    assert any(said in problem for problem in found), found


@contextmanager
def _as_deployed(state: str, tmp_path: Path) -> Iterator[str]:
    """``verdict-mock`` with the example's args and variables (the state: ``state``), on
    127.0.0.1 and a free port; its base URL."""
    docs = documents()
    env = clean_environ({**environ(docs), env_var("state"): state})
    command = [sys.executable, "-m", "verdict_contract.mockserver", *container(docs)["args"]]
    command += ["--host=127.0.0.1", "--port=0"]  # the test's own: not the cluster's network
    with (tmp_path / "mock.err").open("w") as err:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    try:
        json_logs = "--log-format=json" in container(docs)["args"]
        said = announced(process, tmp_path / "mock.err", json_logs)
        assert said is not None, (tmp_path / "mock.err").read_text()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", said["url"]), said
        yield said["url"]
    finally:
        stop_process(process)


def test_a_mock_started_as_the_example_serves_its_probes_and_scrape(tmp_path: Path) -> None:
    docs = documents()
    paths = routes()
    secret = _find(docs, "Secret", MOCK)["stringData"]
    pod_ip = "10.1.2.3:8080"  # what the kubelet's probe and Prometheus send as Host
    with (
        redis_server() as server,
        _as_deployed(server.url, tmp_path) as base,
        httpx.Client(base_url=base, timeout=10) as client,
    ):
        for what in ("liveness", "readiness"):
            answer = client.get(paths[what], headers={"Host": pod_ip})
            assert answer.status_code == 200, answer.text
        key = secret["api-keys"].split(",")[0]
        demo = client.get("/e?n=demo-contradicted", headers={"Authorization": f"Bearer {key}"})
        assert demo.status_code == 200, demo.text
        scraped = client.get(paths["scrape"], headers={"Host": pod_ip})
        assert scraped.status_code == 200
        names = {family.name for family in text_string_to_metric_families(scraped.text)}
        assert "verdict_mock_requests" in names
        token = {TOKEN_HEADER: secret["control-token"]}
        for host, status in (("verdict-mock:8080", 200), ("elsewhere.example", 421)):
            health = client.get("/_mock/health", headers={**token, "Host": host})
            assert health.status_code == status, health.text
        assert client.get("/_mock/health", headers={"Host": "verdict-mock"}).status_code == 401
