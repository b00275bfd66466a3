"""mockserver.recorder: what a proxy saw, written as a scenario that replays the same bytes."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import bearer, running
from verdict_contract.core.errors import SettingsError
from verdict_contract.core.rates import RateLimit
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.model.recorded import Recorded, parse_recorded
from verdict_contract.mockserver.model.scenario import ScenarioError, load_scenario, parse_scenario
from verdict_contract.mockserver.model.sessions import SpecError, parse_spec
from verdict_contract.mockserver.settings import DEFAULT_API_KEY
from verdict_contract.mockserver.web.proxy import PROXY_EXTENSION
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
    recorder.flush()
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
    recorder.flush()
    assert set(load_scenario(recorder.path).sessions) == {"a", "b"}
    assert MAX_RECORDED_SESSIONS > 2


@pytest.mark.parametrize(
    ("where", "problem"),
    [
        ("missing-folder/r.yaml", "its folder {folder} does not exist"),
        ("a-file/r.yaml", "{folder} is not a folder"),
        ("a-folder", "{path} is a folder, not a file"),
    ],
)
def test_a_recording_that_cannot_be_written_is_refused_at_start(
    tmp_path: Path, where: str, problem: str
) -> None:
    (tmp_path / "a-file").write_text("")
    (tmp_path / "a-folder").mkdir()
    path = tmp_path / where
    with pytest.raises(SettingsError) as caught:
        Recorder(path)
    assert str(caught.value) == "--record: " + problem.format(folder=path.parent, path=path)


def test_a_read_only_folder_is_refused_at_start(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        if os.access(folder, os.W_OK):  # root writes anywhere: a mode is no test of it
            pytest.skip("this user can write a read-only folder")
        with pytest.raises(SettingsError, match=r"^--record: cannot write in .*ro: Permission"):
            Recorder(folder / "r.yaml")
    finally:
        folder.chmod(0o700)


class _DiskFull:
    """``os.fsync`` of a disk that fills up after ``room`` successful syncs."""

    def __init__(self, room: int) -> None:
        self.room = room

    def __call__(self, fd: int) -> None:
        if self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= 1


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_full_disk_leaves_the_previous_complete_recording(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    suffix: str,
) -> None:
    recorder = Recorder(tmp_path / f"r{suffix}")
    for n in range(5):
        recorder.observe(f"s{n}", 200, b'{"n": %d}' % n)
    recorder.flush()
    before = recorder.path.read_bytes()
    assert recorder.problem is None
    monkeypatch.setattr(os, "fsync", _DiskFull(room=0))
    for n in range(5, 60):
        recorder.observe(f"s{n}", 200, b'{"n": %d}' % n)
        recorder.flush()  # a write fails for each: one problem said, not one per session
    assert recorder.path.read_bytes() == before  # the last complete file, whole
    assert len(load_scenario(recorder.path).sessions) == 5
    assert [p.name for p in tmp_path.iterdir()] == [f"r{suffix}"]  # no temporary file left
    errors = [r.getMessage() for r in caplog.records if r.name == "mockserver.recorder"]
    assert len(errors) == 1, errors  # said once, not once per session
    assert "No space left on device" in errors[0]
    assert "keeps the 5 sessions written before" in errors[0]
    assert recorder.problem == errors[0]
    monkeypatch.undo()  # room again: the next session writes every one seen
    recorder.observe("s60", 200, b"{}")
    recorder.flush()
    assert len(load_scenario(recorder.path).sessions) == 61
    assert recorder.problem is None


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (root only), unmounted after."""
    folder = tmp_path / "small"
    folder.mkdir()
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.decode(errors='replace')}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_really_full_disk_leaves_a_loadable_recording(small_disk: Path, suffix: str) -> None:
    recorder = Recorder(small_disk / f"r{suffix}")
    body = b'{"pad": "%s"}' % (b"x" * 700)
    for n in range(200):  # about 150 KiB: more than the disk holds
        recorder.observe(f"session-{n}", 200, body)
    recorder.flush()
    assert recorder.problem is not None
    kept = load_scenario(recorder.path).sessions  # complete, whatever was cut
    assert 5 < len(kept) < 200
    assert all(s.spec.recorded == Recorded(200, body) for s in kept.values())


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=st.one_of(st.text(), st.binary()), suffix=st.sampled_from([".yaml", ".json"]))
def test_any_body_replays_exactly(tmp_path: Path, body: str | bytes, suffix: str) -> None:
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    recorder = Recorder(tmp_path / f"r{suffix}")
    recorder.observe("n", 200, raw)
    recorder.flush()
    assert load_scenario(recorder.path).sessions["n"].spec.recorded == Recorded(200, raw)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_text_yaml_would_fold_is_kept_exactly(tmp_path: Path, suffix: str) -> None:
    odd = "a\x85b\u2028c"  # line breaks to YAML 1.1, plain characters to JSON
    recorder = Recorder(tmp_path / f"r{suffix}")
    recorder.observe("body", 200, odd.encode())
    recorder.observe(odd, 200, b"{}")
    recorder.flush()
    sessions = load_scenario(recorder.path).sessions
    assert sessions["body"].spec.recorded == Recorded(200, odd.encode())
    assert sessions[odd].spec.recorded == Recorded(200, b"{}")  # escaped in YAML, not folded


def test_a_recorded_session_is_described_by_its_body(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "r.yaml")
    recorder.observe("seen", 200, b'{"verdict": "disputed", "conclusive": false}')
    recorder.observe("odd", 200, b"[1, 2]")
    recorder.flush()
    client = create_app(Settings(scenario=recorder.path, demo_sessions=False)).test_client()
    described = {s["n"]: s for s in client.get("/_mock/sessions").get_json()}
    assert (described["seen"]["verdict"], described["seen"]["conclusive"]) == ("disputed", False)
    assert described["odd"]["verdict"] is None


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_each_new_session_replaces_the_file_whole(tmp_path: Path, suffix: str) -> None:
    recorder = Recorder(tmp_path / f"r{suffix}")
    recorder.observe("first", 404, b'{"error": 1}')
    for n in range(50):
        recorder.observe(f"s{n}", 200, b"{}")
        recorder.flush()
        assert len(load_scenario(recorder.path).sessions) == n + 2  # complete after each
    recorder.observe("first", 200, b'{"found": true}')  # a 404 that became a 200: in its place
    recorder.flush()
    sessions = load_scenario(recorder.path).sessions
    assert list(sessions)[:2] == ["first", "s0"]
    assert len(sessions) == 51
    assert sessions["first"].spec.recorded == Recorded(200, b'{"found": true}')


def test_a_failed_write_shows_in_health(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    record = tmp_path / "r.yaml"
    upstream = create_app(Settings(rate_limit=RateLimit.parse("off")))
    with running(upstream) as real:
        proxy = create_app(Settings(proxy_to=real.base_url, record=record))
        with running(proxy) as server, httpx.Client(base_url=server.base_url, timeout=10) as http:

            def fetch(n: str) -> None:
                answer = http.get("/e", params={"n": n}, headers=bearer(DEFAULT_API_KEY))
                assert answer.status_code == 200
                assert proxy.extensions[PROXY_EXTENSION].recorder.flush()  # written off the call

            fetch("demo-refused")
            assert http.get("/_mock/health").json()["proxy"]["record_problem"] is None
            monkeypatch.setattr(os, "fsync", _DiskFull(room=0))
            fetch("demo-disputed")
            problem = http.get("/_mock/health").json()["proxy"]["record_problem"]
            assert problem.startswith(f"cannot write the recording to {record}: No space left")
            monkeypatch.undo()
            fetch("demo-insufficient")
            assert http.get("/_mock/health").json()["proxy"]["record_problem"] is None
    assert set(load_scenario(record).sessions) == {
        "demo-refused",
        "demo-disputed",
        "demo-insufficient",
    }


def test_observe_never_waits_for_the_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder(tmp_path / "r.yaml")
    release, written = threading.Event(), []

    def slow_disk(path: Path, data: bytes) -> None:
        release.wait(30)
        written.append(path)
        path.write_bytes(data)

    monkeypatch.setattr("verdict_contract.mockserver.web.recorder._replace_whole", slow_disk)
    assert recorder.observe("a", 200, b"{}") is None
    assert written == []  # observe returned while the disk was still busy
    release.set()
    assert recorder.flush()
    assert written == [recorder.path]


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_new_session_is_appended_not_rewritten(tmp_path: Path, suffix: str) -> None:
    recorder = Recorder(tmp_path / f"r{suffix}")
    recorder.observe("first", 200, b'{"a": 1}')
    recorder.flush()
    before, inode = recorder.path.read_bytes(), recorder.path.stat().st_ino
    recorder.observe("second", 404, b'{"b": 2}')
    recorder.flush()
    after = recorder.path.read_bytes()
    assert recorder.path.stat().st_ino == inode  # the same file, grown
    assert after.startswith(before.removesuffix(b"\n}}\n"))  # JSON: its closing written over
    assert set(load_scenario(recorder.path).sessions) == {"first", "second"}
