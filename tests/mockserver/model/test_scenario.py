"""mockserver.scenario: scenario files, their error messages, and reloading on change."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import KEY, bearer, running, wait_until
from verdict_contract.core.rates import RateLimit
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.cli import watch_files
from verdict_contract.mockserver.model import scenariofile
from verdict_contract.mockserver.model.scenario import (
    DEMO_SESSIONS,
    FileWatcher,
    Scenario,
    ScenarioError,
    demo_sessions,
    load_scenario,
    parse_scenario,
)
from verdict_contract.mockserver.model.scenariofile import MAX_SCENARIO_BYTES
from verdict_contract.mockserver.model.sessions import SessionSpec, Step
from verdict_contract.mockserver.web.answers import state_of

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


@pytest.mark.parametrize(
    ("written", "problem"),
    [
        ("*sk-live-0123456789", "2:5: not valid YAML"),
        ("!sk-live-0123456789", "2:5: not valid YAML"),
        ("!sk-li've-0123456789", "2:5: not valid YAML"),  # a quote inside: PyYAML quotes it with "
        ("&sk-live-0123456789 [*sk-live-0123456789]", "not valid YAML"),  # inside its own anchor
        ("!!int Sk-Live-0123456789", "unsupported value"),  # the conversion's message
        ("!!float Sk-Live-0123456789", "unsupported value"),
        ("!!bool Sk-Live-0123456789", "unsupported value"),  # a KeyError
    ],
)
def test_a_key_written_bare_or_tagged_is_not_shown(
    tmp_path: Path, written: str, problem: str
) -> None:
    """PyYAML quotes or names the alias, tag or value it cannot read: a key written unquoted."""
    path = tmp_path / "keys.yaml"
    path.write_text(f"api_keys:\n  - {written}\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert problem in str(caught.value)
    assert "-0123456" not in str(caught.value)


def test_a_key_written_a_level_too_far_out_is_masked_among_unknown_keys(tmp_path: Path) -> None:
    path = tmp_path / "keys.yaml"
    path.write_text("sessions: {}\nsesions: {}\nsk-live-0123456789: x\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert "unknown key(s) ['sesions', '…6789']" in str(caught.value)  # a word is shown


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
    assert state_of(app).limit == RateLimit(100, 60.0)
    # demo sessions are still served next to the scenario's
    assert client.get("/e?n=demo-refused", headers=bearer(KEY)).status_code == 200


# --- FileWatcher --------------------------------------------------------------------------

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
    watcher = FileWatcher(scenario_file, load_scenario, applied.append)
    assert watcher.reload() is True
    assert list(applied[0].sessions) == ["alpha"]


def test_reload_keeps_the_old_scenario_on_an_invalid_file(
    scenario_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    applied: list[Scenario] = []
    watcher = FileWatcher(scenario_file, load_scenario, applied.append)
    _write(scenario_file, "sessions:\n  alpha: {verdict: nope}\n", stamp=BASE_NS + 10**9)
    with caplog.at_level(logging.ERROR, logger="mockserver.scenario"):
        assert watcher.reload() is False
    assert applied == []
    assert "keeping the previous one" in caplog.text
    assert str(scenario_file) in caplog.text


@pytest.fixture
def watched(scenario_file: Path) -> Iterator[tuple[FileWatcher[Scenario], list[Scenario]]]:
    applied: list[Scenario] = []
    watcher = FileWatcher(scenario_file, load_scenario, applied.append, interval=0.02)
    watcher.start()
    try:
        yield watcher, applied
    finally:
        watcher.stop()


def test_watcher_applies_a_valid_edit_and_keeps_the_old_on_an_invalid_one(
    scenario_file: Path,
    watched: tuple[FileWatcher[Scenario], list[Scenario]],
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
    scenario_file: Path, watched: tuple[FileWatcher[Scenario], list[Scenario]]
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
    watcher = FileWatcher(scenario_file, load_scenario, state.apply, interval=0.02)
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
        ("broken.yaml", "sessions:\n  a: {verdict: [refused\n", "2:16"),  # the unclosed [
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


# --- untrusted files: kinds, sizes, alias bombs, reloads off the event loop -------------------


def _alias_bomb(levels: int = 9, width: int = 9) -> str:
    """A "billion laughs": each level a list of ``width`` aliases of the one below."""
    lines = [
        "sessions:",
        "  bomb:",
        "    allow_invalid:",
        f"      - &l0 [{', '.join(['lol'] * width)}]",
    ]
    for level in range(1, levels):
        lines.append(f"      - &l{level} [{', '.join([f'*l{level - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def _in_thread(call: Callable[[], object], deadline: float = 60.0) -> BaseException | None:
    """Run ``call`` in a daemon thread: the exception it raised (None if none); fail if it hangs."""
    caught: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            caught.append(exc)
        else:
            caught.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(deadline)
    assert not thread.is_alive(), f"still running after {deadline} s: it hangs"
    return caught[0]


def test_an_alias_bomb_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    path = _write(tmp_path / "bomb.yaml", _alias_bomb())
    assert path.stat().st_size < 1024  # a small file that expands to 9**9 strings
    error = _in_thread(lambda: load_scenario(path))
    assert isinstance(error, ScenarioError)
    message = str(error)
    assert message.startswith(f"{path}:"), message
    assert "aliases" in message
    assert len(message) < 500
    assert "\n" not in message


def test_an_alias_that_contains_itself_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "loop.yaml", "sessions:\n  a: {fields: &x {k: [*x]}}\n")
    error = _in_thread(lambda: load_scenario(path))
    assert isinstance(error, ScenarioError)
    assert "itself" in str(error)


def test_aliases_within_the_bound_still_load(tmp_path: Path) -> None:
    text = "sessions:\n  a: &s {verdict: refused}\n  b: *s\n  c: *s\n"
    assert set(load_scenario(_write(tmp_path / "ok.yaml", text)).sessions) == {"a", "b", "c"}


@pytest.mark.parametrize(
    ("name", "text"),
    [("deep.yaml", "[" * 5000 + "]" * 5000), ("deep.json", "[" * 50000 + "]" * 50000)],
)
def test_a_deeply_nested_file_is_refused(tmp_path: Path, name: str, text: str) -> None:
    path = _write(tmp_path / name, text)
    error = _in_thread(lambda: load_scenario(path))
    assert isinstance(error, ScenarioError), error
    assert "deep" in str(error)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "team.yaml"
    os.mkfifo(fifo)
    error = _in_thread(lambda: load_scenario(fifo), deadline=30.0)
    assert isinstance(error, ScenarioError)
    assert str(error) == f"{fifo}: not a regular file (a FIFO); a scenario is a YAML or JSON file"


@pytest.mark.parametrize(("target", "kind"), [("/dev/zero", "a device"), (".", "a directory")])
def test_a_device_or_a_folder_is_refused(tmp_path: Path, target: str, kind: str) -> None:
    path = Path(target) if target.startswith("/") else tmp_path
    if not path.exists():
        pytest.skip(f"no {target} here")
    error = _in_thread(lambda: load_scenario(path), deadline=30.0)
    assert isinstance(error, ScenarioError)
    assert f"not a regular file ({kind})" in str(error)


def test_a_file_over_the_size_cap_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert MAX_SCENARIO_BYTES == 16 * 1024 * 1024
    monkeypatch.setattr(scenariofile, "MAX_SCENARIO_BYTES", 1024)
    fits = _write(tmp_path / "fits.yaml", "sessions: {}\n" + "#" * (1024 - 14) + "\n")
    assert fits.stat().st_size == 1024
    assert load_scenario(fits).sessions == {}
    path = _write(tmp_path / "big.yaml", "sessions: {}\n" + "#" * 2000 + "\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(caught.value) == f"{path}: larger than 1024 bytes, the most a scenario file may hold"


@pytest.fixture
def slow_parse(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[threading.Event, threading.Event, list[str]]]:
    """Make each parse of a scenario wait for the test: (started, release, threads it ran on)."""
    started, release, threads = threading.Event(), threading.Event(), []
    real = scenariofile.decode

    def slow(path: Path, text: str) -> object:
        threads.append(threading.current_thread().name)
        started.set()
        if threading.current_thread() is not threading.main_thread():  # never block the loop's
            release.wait(30)
        return real(path, text)

    monkeypatch.setattr(scenariofile, "decode", slow)
    yield started, release, threads
    release.set()


def test_e_answers_over_http_while_a_reload_is_parsed(
    scenario_file: Path, slow_parse: tuple[threading.Event, threading.Event, list[str]]
) -> None:
    started, release, threads = slow_parse
    app = create_app(Settings(scenario=scenario_file, server="async"))
    started.clear()
    threads.clear()
    state = state_of(app)
    watcher = FileWatcher(scenario_file, load_scenario, state.apply, interval=0.02)
    headers = bearer("verdict-mock-local-key")
    with running(app, server="async") as server:
        watcher.start()
        try:
            _write(scenario_file, "sessions:\n  beta: {verdict: refused}\n", stamp=BASE_NS + 10**9)
            _answers_while_the_parse_is_held(server.base_url, headers, started, release)
        finally:
            watcher.stop()
    assert threads == ["scenario-watcher"]


def _answers_while_the_parse_is_held(
    base_url: str, headers: dict[str, str], started: threading.Event, release: threading.Event
) -> None:
    """With a reload's parse held, /e answers from the previous scenario; once it is let go,
    the new scenario's session answers."""
    assert started.wait(30)
    answer = httpx.get(f"{base_url}/e?n=alpha", headers=headers, timeout=10)
    assert answer.status_code == 200
    release.set()

    def reloaded() -> bool:
        return httpx.get(f"{base_url}/e?n=beta", headers=headers, timeout=10).status_code == 200

    assert wait_until(reloaded)


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP here")
def test_sighup_asks_the_watcher_and_never_parses_on_the_signalled_thread(
    scenario_file: Path, slow_parse: tuple[threading.Event, threading.Event, list[str]]
) -> None:
    started, release, threads = slow_parse
    app = create_app(Settings(scenario=scenario_file))
    started.clear()
    threads.clear()
    headers = bearer("verdict-mock-local-key")
    with running(app, server="async") as server:
        (watcher,) = watch_files(state_of(app))
        try:
            _write(scenario_file, "sessions:\n  beta: {verdict: refused}\n")
            os.kill(os.getpid(), signal.SIGHUP)  # its handler runs on this, the main, thread
            _answers_while_the_parse_is_held(server.base_url, headers, started, release)
        finally:
            watcher.stop()
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
    assert threads == ["scenario-watcher"]


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP here")
def test_a_sighup_while_the_mock_starts_is_kept_for_the_watcher(scenario_file: Path) -> None:
    """From the first line of start a hangup is noted, not fatal: a long first load survives
    it, and the watcher reloads once it runs (the file may have changed meanwhile)."""
    from verdict_contract.mockserver.cli import EarlyHangups

    early = EarlyHangups()
    try:
        os.kill(os.getpid(), signal.SIGHUP)  # a real signal to this process: it lives on
        assert early.hung_up
        app = create_app(Settings(scenario=scenario_file))  # the "long" first load
        _write(scenario_file, "sessions:\n  beta: {verdict: refused}\n")
        (watcher,) = watch_files(state_of(app), early)
        try:
            assert wait_until(lambda: "beta" in state_of(app).named)
        finally:
            watcher.stop()
    finally:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


def test_aliases_may_double_a_file_but_not_more(tmp_path: Path) -> None:
    big = "x" * (scenariofile.MIN_EXPANDED // 3)
    fits = f"sessions:\n  a: {{fields: {{summary: &s {big}}}}}\n  b: {{fields: {{summary: *s}}}}\n"
    assert set(load_scenario(_write(tmp_path / "fits.yaml", fits)).sessions) == {"a", "b"}
    over = fits + "  c: {fields: {summary: *s}}\n  d: {fields: {summary: *s}}\n"
    with pytest.raises(ScenarioError, match=r"over\.yaml:4:\d+: not valid YAML: the document"):
        load_scenario(_write(tmp_path / "over.yaml", over))


# --- YAML's own readings ----------------------------------------------------------------------


def test_rate_limit_off_in_yaml_turns_the_limit_off(tmp_path: Path) -> None:
    for text in ("rate_limit: off\n", "rate_limit: 'off'\n", "rate_limit: no\n"):
        scenario = load_scenario(_write(tmp_path / "off.yaml", text))
        assert scenario.rate_limit == RateLimit(0, 1.0), text


@pytest.mark.parametrize("value", ["on", "true", "yes"])
def test_rate_limit_on_says_to_write_a_rate(tmp_path: Path, value: str) -> None:
    path = _write(tmp_path / "on.yaml", f"sessions: {{}}\nrate_limit: {value}\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(caught.value) == (
        f"{path}:2:13: rate_limit: true (as YAML reads on, yes and true) is not a rate: "
        "write REQUESTS/SECONDS (e.g. 600/60), or off"
    )


# --- where a YAML error is --------------------------------------------------------------------


def test_a_yaml_error_names_the_line_of_the_mistake_and_where_the_parser_stopped(
    tmp_path: Path,
) -> None:
    text = (
        "rate_limit: 5/1\n"
        "sessions:\n"
        "  a: {verdict: refused\n"  # line 3: the { is never closed (the first problem)
        "  b: {verdict: disputed}\n"  # line 4: where the parser notices
        "  c: [unclosed\n"  # line 5: a second problem
    )
    path = _write(tmp_path / "two.yaml", text)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(caught.value) == (
        f"{path}:3:6: not valid YAML: while parsing a flow mapping (from here): "
        "expected ',' or '}', but got ':' at 4:4"
    )


def test_a_yaml_error_on_its_own_line_is_named_there(tmp_path: Path) -> None:
    path = _write(tmp_path / "tab.yaml", "sessions:\n  a: {}\n\tb: {}\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(caught.value).startswith(f"{path}:3:1: not valid YAML: ")
