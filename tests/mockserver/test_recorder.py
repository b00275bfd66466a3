"""mockserver.recorder: what a proxy saw, written as a scenario that replays the same bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.model.recorded import Recorded, parse_recorded
from verdict_contract.mockserver.model.scenario import ScenarioError, load_scenario, parse_scenario
from verdict_contract.mockserver.model.sessions import SpecError, parse_spec
from verdict_contract.mockserver.web.recorder import (
    MAX_RECORDED_SESSIONS,
    Recorder,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"status": 200, "body": '{"a": 1}'}, Recorded(200, b'{"a": 1}')),
        ({"status": 404, "body_base64": "/w=="}, Recorded(404, b"\xff")),
    ],
)
def test_a_recorded_answer_is_read(raw: object, expected: Recorded) -> None:
    assert parse_recorded(raw, "r") == expected
    assert parse_recorded(expected.to_json(), "r") == expected


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"status": 200}, 'must be {"status": N, "body": "..."}'),
        ({"status": 200, "body": "x", "extra": 1}, 'must be {"status": N'),
        ({"status": True, "body": "x"}, "status must be an HTTP status"),
        ({"status": 99, "body": "x"}, "status must be an HTTP status"),
        ({"status": 200, "body": 3}, "body must be a string"),
        ({"status": 200, "body_base64": "%%"}, "not valid base64"),
    ],
)
def test_a_bad_recorded_answer_is_named(raw: object, problem: str) -> None:
    with pytest.raises(ValueError, match=r"^r") as caught:
        parse_recorded(raw, "r")
    assert problem in str(caught.value)


def test_a_session_spec_carries_its_recording() -> None:
    spec = parse_spec({"recorded": {"status": 200, "body": "{}"}}, "s")
    assert spec.recorded == Recorded(200, b"{}")
    with pytest.raises(SpecError, match=r"s\.recorded must be"):
        parse_spec({"recorded": []}, "s")


def test_a_scenario_names_a_bad_recording() -> None:
    with pytest.raises(ScenarioError, match=r"sessions\.x\.recorded\.status"):
        parse_scenario({"sessions": {"x": {"recorded": {"status": 1, "body": ""}}}}, 0.0)


def test_one_answer_per_session_a_200_preferred(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "r.yaml")
    recorder.observe("expired-later", 200, b"first")
    recorder.observe("expired-later", 404, b"gone")
    recorder.observe("found-later", 404, b"not yet")
    recorder.observe("found-later", 200, b"found")
    recorder.observe("twice", 404, b"one")
    recorder.observe("twice", 404, b"two")
    recorder.observe("busy", 429, b"")  # depends on the moment, not the session
    recorder.observe("failing", 500, b"")
    sessions = load_scenario(recorder.path).sessions
    assert {n: s.spec.recorded for n, s in sessions.items()} == {
        "expired-later": Recorded(200, b"first"),
        "found-later": Recorded(200, b"found"),
        "twice": Recorded(404, b"one"),
    }


def test_the_recording_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("verdict_contract.mockserver.web.recorder.MAX_RECORDED_SESSIONS", 2)
    recorder = Recorder(tmp_path / "r.json")
    for n in ("a", "b", "c"):
        recorder.observe(n, 200, b"{}")
    assert set(load_scenario(recorder.path).sessions) == {"a", "b"}
    assert MAX_RECORDED_SESSIONS > 2


def test_an_unwritable_recording_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder(tmp_path / "missing-folder" / "r.yaml")
    recorder.observe("a", 200, b"{}")
    assert "cannot write the recording" in caplog.text


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=st.one_of(st.text(), st.binary()), suffix=st.sampled_from([".yaml", ".json"]))
def test_any_body_replays_exactly(tmp_path: Path, body: str | bytes, suffix: str) -> None:
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    recorder = Recorder(tmp_path / f"r{suffix}")
    recorder.observe("n", 200, raw)
    assert load_scenario(recorder.path).sessions["n"].spec.recorded == Recorded(200, raw)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_text_yaml_would_fold_is_kept_exactly(tmp_path: Path, suffix: str) -> None:
    odd = "a\x85b\u2028c"  # line breaks to YAML 1.1, plain characters to JSON
    recorder = Recorder(tmp_path / f"r{suffix}")
    recorder.observe("body", 200, odd.encode())
    recorder.observe(odd, 200, b"{}")
    sessions = load_scenario(recorder.path).sessions
    assert sessions["body"].spec.recorded == Recorded(200, odd.encode())
    assert (odd in sessions) == (suffix == ".json")  # YAML: not recorded rather than changed


def test_a_recorded_session_is_described_by_its_body(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "r.yaml")
    recorder.observe("seen", 200, b'{"verdict": "disputed", "conclusive": false}')
    recorder.observe("odd", 200, b"[1, 2]")
    client = create_app(Settings(scenario=recorder.path, demo_sessions=False)).test_client()
    described = {s["n"]: s for s in client.get("/_mock/sessions").get_json()}
    assert (described["seen"]["verdict"], described["seen"]["conclusive"]) == ("disputed", False)
    assert described["odd"]["verdict"] is None


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_each_new_session_is_appended_not_the_file_rewritten(tmp_path: Path, suffix: str) -> None:
    recorder = Recorder(tmp_path / f"r{suffix}")
    recorder.observe("first", 404, b'{"error": 1}')
    before, inode = recorder.path.read_bytes(), recorder.path.stat().st_ino
    kept = before[: -len(b"\n}}\n")] if suffix == ".json" else before  # JSON: all but the end
    for n in range(50):
        recorder.observe(f"s{n}", 200, b"{}")
        assert recorder.path.read_bytes().startswith(kept)
        assert recorder.path.stat().st_ino == inode  # written in place, not replaced whole
    recorder.observe("first", 200, b'{"found": true}')  # a 404 that became a 200: appended too
    assert recorder.path.read_bytes().startswith(kept)
    sessions = load_scenario(recorder.path).sessions
    assert len(sessions) == 51
    assert sessions["first"].spec.recorded == Recorded(200, b'{"found": true}')
