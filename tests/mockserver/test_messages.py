"""Messages that lead somewhere: what the mock says to a newcomer's mistakes, over real HTTP."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import KEY, bearer, error_of, running, wait_until
from verdict_contract.core.redact import Secret
from verdict_contract.mockserver import DEFAULT_API_KEY, Settings, create_app
from verdict_contract.mockserver.model.scenario import FileWatcher, load_scenario
from verdict_contract.mockserver.web.answers import state_of
from verdict_contract.testing.background import BackgroundServer


@pytest.fixture(scope="module")
def mock() -> Iterator[BackgroundServer]:
    with running(create_app(Settings())) as server:
        yield server


def _error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    message: str = error_of(status, response.headers["content-type"], response.content)["message"]
    return message


# --- minting without Content-Type -------------------------------------------------------------


def test_a_mint_without_content_type_says_the_header_is_missing(mock: BackgroundServer) -> None:
    body = json.dumps({"verdict": "refused"}).encode()
    with httpx.Client(base_url=mock.base_url, timeout=10) as http:
        missing = http.post("/_mock/sessions", content=body)  # curl -d without -H
        assert "Content-Type" not in missing.request.headers
        message = _error(missing, 400)
        assert "Content-Type: application/json" in message
        assert "the header is missing" in message
        assert "must be a JSON object" not in message
        other = http.post("/_mock/sessions", content=body, headers={"Content-Type": "text/plain"})
        assert "received 'text/plain'" in _error(other, 400)
        good = http.post(
            "/_mock/sessions", content=body, headers={"Content-Type": "application/json"}
        )
        assert good.status_code == 201
        assert http.post("/_mock/sessions").status_code == 201  # no body: no header needed


# --- a bad script step ------------------------------------------------------------------------


@pytest.mark.parametrize("step", [200, "boom", {"delay": 5}, [503]])
def test_a_bad_step_lists_every_accepted_form(mock: BackgroundServer, step: object) -> None:
    with httpx.Client(base_url=mock.base_url, timeout=10) as http:
        message = _error(http.post("/_mock/sessions", json={"script": [step]}), 422)
    assert message.startswith("request.script[0] must be one of the statuses [401, 404, 429")
    for form in ("'reset'", "'truncated'", "'malformed'", '{"delay_ms": N}'):
        assert form in message
    assert '{"status": N, "headers": {...}, "delay_ms": N}' in message
    assert "any status from 200 to 599" in message


def test_each_listed_form_is_accepted(mock: BackgroundServer) -> None:
    script = [503, "reset", {"delay_ms": 1}, {"status": 418, "headers": {"X-Why": "tea"}}]
    with httpx.Client(base_url=mock.base_url, timeout=10) as http:
        assert http.post("/_mock/sessions", json={"script": script}).status_code == 201


# --- health: the default key and a rejected scenario edit -------------------------------------


def test_health_names_the_public_default_key_only(mock: BackgroundServer) -> None:
    assert httpx.get(f"{mock.base_url}/_mock/health").json()["default_key"] == DEFAULT_API_KEY
    with running(create_app(Settings(api_keys=(KEY,)))) as own_key:
        health = httpx.get(f"{own_key.base_url}/_mock/health").json()
    assert health["default_key"] is None
    assert KEY not in json.dumps(health)


def _touch(path: Path, text: str, tick: int) -> None:
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(1_700_000_000 * 10**9 + tick * 10**9,) * 2)  # the watcher sees a change


def test_a_rejected_scenario_edit_shows_in_health_with_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    _touch(path, "sessions:\n  alpha: {verdict: refused}\n", 0)
    app = create_app(Settings(scenario=path))
    state = state_of(app)
    watcher = FileWatcher(
        path, load_scenario, state.apply, interval=0.02, report=state.report_scenario
    )
    with running(app) as server:
        watcher.start()
        try:
            health = f"{server.base_url}/_mock/health"
            assert httpx.get(health).json()["scenario_problem"] is None
            _touch(path, "sessions:\n  alpha: {verdict: refused}\n  beta: {verdict: nope}\n", 1)
            assert wait_until(lambda: httpx.get(health).json()["scenario_problem"] is not None)
            problem = httpx.get(health).json()["scenario_problem"]
            assert problem.startswith(f"{path}:3:19: sessions.beta.verdict must be one of")
            fetched = httpx.get(
                f"{server.base_url}/e", params={"n": "alpha"}, headers=bearer(DEFAULT_API_KEY)
            )
            assert fetched.status_code == 200  # the previous scenario is still served

            _touch(path, "sessions:\n  alpha: {verdict: [refused\n", 2)  # YAML that breaks
            assert wait_until(
                lambda: "not valid YAML" in (httpx.get(health).json()["scenario_problem"] or "")
            )
            problem = httpx.get(health).json()["scenario_problem"]
            assert problem.startswith(f"{path}:2:20: ")  # the [ left open, not the line after

            _touch(path, "sessions:\n  gamma: {verdict: refused}\n", 3)  # fixed: the problem goes
            assert wait_until(lambda: httpx.get(health).json()["scenario_problem"] is None)
        finally:
            watcher.stop()


# --- what a reload does to running scripts ----------------------------------------------------


def test_a_reload_keeps_the_scripts_of_unchanged_sessions(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(
        "sessions:\n  same: {script: [503, 503]}\n  edited: {script: [503, 503]}\n",
        encoding="utf-8",
    )
    app = create_app(Settings(scenario=path))
    watcher = FileWatcher(path, load_scenario, state_of(app).apply)
    with (
        running(app) as server,
        httpx.Client(base_url=server.base_url, headers=bearer(DEFAULT_API_KEY), timeout=10) as http,
    ):

        def status(n: str) -> int:
            return http.get("/e", params={"n": n}).status_code

        assert (status("same"), status("edited")) == (503, 503)  # one step of each used
        path.write_text(
            "sessions:\n  same: {script: [503, 503]}\n  edited: {script: [429]}\n"
            "  new: {script: [500]}\n",
            encoding="utf-8",
        )
        assert watcher.reload()  # as SIGHUP does
        assert [status("same"), status("same")] == [503, 200]  # what was left, then the verdict
        assert [status("edited"), status("edited")] == [429, 200]  # changed: its new script
        assert [status("new"), status("new")] == [500, 200]
        assert http.post("/_mock/reset").status_code == 204  # reset restarts every script
        assert [status("same"), status("same"), status("same")] == [503, 503, 200]


# --- GET / says where things are --------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        (
            Settings(api_keys=(KEY,)),
            "nothing is served at /; the API is GET /e?n=<session id> with "
            "Authorization: Bearer <key>; the dashboard is /_mock/, the control API under "
            "/_mock/ (GET /_mock/health)",
        ),
        (
            Settings(api_keys=(KEY,), control_token=Secret("t0ken-for-the-test")),
            "nothing is served at /; the API is GET /e?n=<session id> with "
            "Authorization: Bearer <key>; the dashboard is /_mock/?token=<the control token>, "
            "the control API under /_mock/ (GET /_mock/health)",
        ),
        (
            Settings(api_keys=(KEY,), control=False),
            "nothing is served at /; the API is GET /e?n=<session id> with "
            "Authorization: Bearer <key>; the dashboard and the control API under /_mock/ are "
            "off (--no-control)",
        ),
    ],
    ids=["control", "control-token", "no-control"],
)
def test_the_root_names_the_api_and_the_dashboard(settings: Settings, says: str) -> None:
    with running(create_app(settings)) as server, httpx.Client(base_url=server.base_url) as http:
        answer = http.get("/")
    assert answer.status_code == 404
    assert _error(answer, 404) == says
