"""mockserver.scenario: scenario files, their error messages, and reloading on change."""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import KEY, bearer, wait_until
from verdict_contract.core.rates import RateLimit
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.model.scenario import (
    DEMO_SESSIONS,
    Scenario,
    ScenarioError,
    ScenarioWatcher,
    demo_sessions,
    load_scenario,
    parse_scenario,
)
from verdict_contract.mockserver.model.sessions import SessionSpec, Step
from verdict_contract.mockserver.web.glue import state_of

LOADED_AT = 1_800_000_000.0

YAML_SCENARIO = f"""\
api_keys: [{KEY}]
rate_limit: 100/60
sessions:
  blocked-user: {{verdict: contradicted, conclusive: true}}
  flaky: {{verdict: refused, script: [503, reset]}}
  stale: {{age_seconds: 901}}
  plain:
"""


def _write(path: Path, text: str, stamp: int | None = None) -> Path:
    path.write_text(text, encoding="utf-8")
    if stamp is not None:  # a distinct mtime, whatever the file system's granularity
        os.utime(path, ns=(stamp, stamp))
    return path


# --- parsing ----------------------------------------------------------------------------------


def test_yaml_scenario_loads(tmp_path: Path) -> None:
    scenario = load_scenario(_write(tmp_path / "team.yaml", YAML_SCENARIO))
    assert scenario.api_keys == (KEY,)
    assert scenario.rate_limit == RateLimit(100, 60.0)
    assert set(scenario.sessions) == {"blocked-user", "flaky", "stale", "plain"}
    blocked = scenario.sessions["blocked-user"]
    assert blocked.id == "blocked-user"
    assert (blocked.spec.verdict, blocked.spec.conclusive) == ("contradicted", True)
    assert blocked.collected_at is None  # no age: never expires
    assert scenario.sessions["flaky"].spec.script == (Step(status=503), Step(fault="reset"))
    assert scenario.sessions["plain"].spec == SessionSpec()
    stale = scenario.sessions["stale"]
    assert stale.collected_at is not None
    assert stale.expired(stale.collected_at + 901, 900)


def test_json_scenario_loads(tmp_path: Path) -> None:
    data = {
        "api_keys": ["k1", "k2"],
        "rate_limit": "off",
        "sessions": {"review": {"verdict": "contradicted", "conclusive": False}},
    }
    scenario = load_scenario(_write(tmp_path / "team.json", json.dumps(data)))
    assert scenario.api_keys == ("k1", "k2")
    assert scenario.rate_limit == RateLimit(0, 1.0)
    assert scenario.sessions["review"].spec.conclusive is False


def test_json_suffix_is_parsed_as_json_not_yaml(tmp_path: Path) -> None:
    # valid YAML, invalid JSON: a .json file must be read as JSON
    with pytest.raises(ScenarioError, match="not valid JSON"):
        load_scenario(_write(tmp_path / "team.json", "sessions: {}\n"))
    assert load_scenario(_write(tmp_path / "team.yml", "sessions: {}\n")) == Scenario()


def test_empty_mapping_is_an_empty_scenario() -> None:
    assert parse_scenario({}, LOADED_AT) == Scenario()


def test_age_counts_back_from_the_load_time() -> None:
    scenario = parse_scenario({"sessions": {"old": {"age_seconds": 120}}}, LOADED_AT)
    assert scenario.sessions["old"].collected_at == LOADED_AT - 120


def test_rate_limit_may_be_a_yaml_number() -> None:
    assert parse_scenario({"rate_limit": 0}, LOADED_AT).rate_limit == RateLimit(0, 1.0)
    assert parse_scenario({"rate_limit": "50/1"}, LOADED_AT).rate_limit == RateLimit(50, 1.0)
    with pytest.raises(ScenarioError, match=r"needs its window: REQUESTS/SECONDS, e\.g\. 50/1"):
        parse_scenario({"rate_limit": 50}, LOADED_AT)  # a second or a minute? said, not guessed


def test_demo_sessions_parse() -> None:
    sessions = demo_sessions(LOADED_AT)
    assert set(sessions) == set(DEMO_SESSIONS)
    assert sessions["demo-expired"].expired(LOADED_AT, 900)
    assert not sessions["demo-contradicted"].expired(LOADED_AT + 10**6, 900)


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("bad.yaml", "sessions: {a: [unclosed\n", "not valid YAML"),
        ("bad.yaml", "\tsessions: {}\n", "not valid YAML"),
        ("bad.json", '{"sessions": }', "not valid JSON"),
        ("keys.yaml", "sessions: {}\nsesions: {}\n", "unknown key(s) ['sesions']"),
        (
            "verdict.yaml",
            "sessions:\n  a: {verdict: blocked}\n",
            "sessions.a.verdict must be one of",
        ),
        (
            "field.yaml",
            "sessions:\n  a: {verdikt: refused}\n",
            "sessions.a has unknown field(s) ['verdikt']",
        ),
        (
            "disputed.yaml",
            "sessions:\n  a: {verdict: disputed, conclusive: true}\n",
            "sessions.a: a 'disputed' verdict is never conclusive",
        ),
        ("rate.yaml", "rate_limit: fast\n", "rate_limit: rate limit 'fast' is not of the form"),
        ("rate.yaml", "rate_limit: 10/0\n", "rate_limit: rate limit '10/0': the window must be"),
        ("list.yaml", "- a\n- b\n", "the top level must be a mapping"),
        ("empty.yaml", "", "the top level must be a mapping"),
        ("keys.yaml", "api_keys: key-1\n", "api_keys must be a non-empty list of strings"),
        ("keys.yaml", "api_keys: []\n", "api_keys must be a non-empty list of strings"),
        ("keys.yaml", "api_keys: ['']\n", "api_keys must be a non-empty list of strings"),
        ("sessions.yaml", "sessions: [a, b]\n", "sessions must be a mapping"),
        ("long.yaml", f"sessions:\n  {'x' * 257}: {{}}\n", "must be a string of 1 to 256"),
        ("name.yaml", "sessions:\n  123: {}\n", "session id 123 must be a string"),
        ("script.yaml", "sessions:\n  a: {script: [200]}\n", "sessions.a.script[0] must be"),
    ],
)
def test_errors_name_the_file_and_the_problem(
    tmp_path: Path, name: str, text: str, problem: str
) -> None:
    path = _write(tmp_path / name, text)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert re.match(rf"{re.escape(str(path))}(:\d+:\d+)?: ", message), message
    assert problem in message
    assert "\n" not in message  # one line, for a CLI error


def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(ScenarioError, match=r"absent\.yaml: cannot read"):
        load_scenario(path)


def test_undecodable_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"sessions: {caf\xe9: {}}\n")
    with pytest.raises(ScenarioError, match=r"latin1\.yaml: not valid YAML"):
        load_scenario(path)


def test_session_id_of_256_characters_is_fine(tmp_path: Path) -> None:
    scenario = load_scenario(_write(tmp_path / "s.yaml", f"sessions:\n  {'x' * 256}: {{}}\n"))
    assert list(scenario.sessions) == ["x" * 256]


@pytest.mark.parametrize(
    "text",
    [
        "sessions:\n  a: {script: [2024-01-01]}\n",
        "sessions:\n  a: {1: x, foo: y}\n",
        "1: a\nfoo: b\n",
    ],
)
def test_non_json_yaml_values_give_a_scenario_error(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path / "odd.yaml", text)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert re.match(rf"{re.escape(str(path))}(:\d+:\d+)?: ", str(caught.value))


@pytest.mark.parametrize(
    "session",
    ["{fields: {schema: 8}}", "{fields: {verdict: nope}}"],
)
def test_a_session_the_mock_cannot_serve_is_refused_at_load(tmp_path: Path, session: str) -> None:
    path = _write(tmp_path / "broken.yaml", f"sessions:\n  broken: {session}\n")
    with pytest.raises(ScenarioError, match="broken"):
        create_app(Settings(scenario=path))


# --- the app with a scenario ------------------------------------------------------------------


def test_app_serves_scenario_sessions_keys_and_limit(tmp_path: Path) -> None:
    app = create_app(Settings(scenario=_write(tmp_path / "team.yaml", YAML_SCENARIO)))
    client = app.test_client()
    response = client.get("/e?n=blocked-user", headers=bearer(KEY))
    assert response.status_code == 200
    assert (response.json or {})["verdict"] == "contradicted"
    # the scenario's keys replace the configured ones
    default_key = bearer("verdict-mock-local-key")
    assert client.get("/e?n=blocked-user", headers=default_key).status_code == 401
    assert client.get("/e?n=stale", headers=bearer(KEY)).status_code == 404
    assert client.get("/e?n=flaky", headers=bearer(KEY)).status_code == 503  # script step 1
    assert state_of(app).limiter.limit == RateLimit(100, 60.0)
    # demo sessions are still served next to the scenario's
    assert client.get("/e?n=demo-refused", headers=bearer(KEY)).status_code == 200


# --- ScenarioWatcher --------------------------------------------------------------------------

BASE_NS = 1_700_000_000 * 10**9


@pytest.fixture
def scenario_file(tmp_path: Path) -> Path:
    return _write(
        tmp_path / "live.yaml",
        "sessions:\n  alpha: {verdict: refused}\n",
        stamp=BASE_NS,
    )


def test_reload_applies_a_valid_file(scenario_file: Path) -> None:
    applied: list[Scenario] = []
    watcher = ScenarioWatcher(scenario_file, applied.append)
    assert watcher.reload() is True
    assert list(applied[0].sessions) == ["alpha"]


def test_reload_keeps_the_old_scenario_on_an_invalid_file(
    scenario_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    applied: list[Scenario] = []
    watcher = ScenarioWatcher(scenario_file, applied.append)
    _write(scenario_file, "sessions:\n  alpha: {verdict: nope}\n", stamp=BASE_NS + 10**9)
    with caplog.at_level(logging.ERROR, logger="mockserver.scenario"):
        assert watcher.reload() is False
    assert applied == []
    assert "keeping the previous one" in caplog.text
    assert str(scenario_file) in caplog.text


@pytest.fixture
def watched(scenario_file: Path) -> Iterator[tuple[ScenarioWatcher, list[Scenario]]]:
    applied: list[Scenario] = []
    watcher = ScenarioWatcher(scenario_file, applied.append, interval=0.02)
    watcher.start()
    try:
        yield watcher, applied
    finally:
        watcher.stop()


def test_watcher_applies_a_valid_edit_and_keeps_the_old_on_an_invalid_one(
    scenario_file: Path,
    watched: tuple[ScenarioWatcher, list[Scenario]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, applied = watched
    caplog.set_level(logging.ERROR, logger="mockserver.scenario")

    _write(scenario_file, "sessions:\n  beta: {verdict: disputed}\n", stamp=BASE_NS + 10**9)
    assert wait_until(lambda: len(applied) == 1)
    assert list(applied[0].sessions) == ["beta"]

    _write(scenario_file, "sessions:\n  gamma: {verdict: wrong}\n", stamp=BASE_NS + 2 * 10**9)
    assert wait_until(lambda: "scenario not reloaded" in caplog.text)
    assert len(applied) == 1  # the invalid edit was not applied

    # the watcher is still alive and takes the next valid edit
    _write(
        scenario_file, "sessions:\n  delta: {verdict: insufficient}\n", stamp=BASE_NS + 3 * 10**9
    )
    assert wait_until(lambda: len(applied) == 2)
    assert list(applied[1].sessions) == ["delta"]


def test_watcher_ignores_an_untouched_file(
    scenario_file: Path, watched: tuple[ScenarioWatcher, list[Scenario]]
) -> None:
    watcher, applied = watched
    assert not wait_until(lambda: len(applied) > 0, timeout=0.2)
    watcher.stop()


def test_watched_app_serves_the_edit_and_survives_a_bad_one(
    scenario_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="mockserver.scenario")
    app = create_app(Settings(scenario=scenario_file))
    client = app.test_client()
    state = state_of(app)
    headers = bearer("verdict-mock-local-key")
    assert client.get("/e?n=alpha", headers=headers).status_code == 200
    watcher = ScenarioWatcher(scenario_file, state.apply, interval=0.02)
    watcher.start()
    try:
        _write(scenario_file, "sessions:\n  beta: {verdict: refused}\n", stamp=BASE_NS + 10**9)
        assert wait_until(lambda: client.get("/e?n=beta", headers=headers).status_code == 200)
        assert client.get("/e?n=alpha", headers=headers).status_code == 404

        _write(scenario_file, "sessions: [not, a, mapping]\n", stamp=BASE_NS + 2 * 10**9)
        assert wait_until(lambda: "sessions must be a mapping" in caplog.text)
        response = client.get("/e?n=beta", headers=headers)
        assert response.status_code == 200
        assert (response.json or {})["verdict"] == "refused"
    finally:
        watcher.stop()


@pytest.mark.parametrize(
    ("name", "text", "place"),
    [
        ("verdict.yaml", "sessions:\n  a: {verdict: blocked}\n", "2:16"),
        (
            "block.yaml",
            "rate_limit: 5/1\nsessions:\n  a:\n    script:\n      - 503\n      - 200\n",
            "6:9",
        ),
        ("disputed.yaml", "sessions:\n  a:\n    verdict: disputed\n    conclusive: true\n", "3:5"),
        ("rate.yaml", "sessions: {}\nrate_limit: fast\n", "2:13"),
        ("broken.yaml", "sessions:\n  a: {verdict: [refused\n", "3:1"),
        ("broken.json", '{\n  "sessions": {\n    "a": }\n}', "3:10"),
        ("schema.json", '{\n  "sessions": {\n    "a": {"verdict": "nope"}\n  }\n}', "3:22"),
    ],
)
def test_a_problem_names_its_line_and_column(
    tmp_path: Path, name: str, text: str, place: str
) -> None:
    path = _write(tmp_path / name, text)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(caught.value).startswith(f"{path}:{place}: "), str(caught.value)
