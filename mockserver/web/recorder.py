"""Recording what a proxied service answered, as a scenario file ``--scenario`` replays.

Each session id seen becomes ``sessions: {s-1: {recorded: {status: 200, body: '{...}'}}}``, its
body as received; how the file is written and bounded is told in docs/proxy.md (``--record``).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from collections import deque
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Final, NamedTuple

import yaml

from verdict_contract.core.errors import SettingsError

from ..model.recorded import Recorded
from ..model.scenariofile import MAX_SCENARIO_BYTES

log = logging.getLogger("mockserver.recorder")

RECORDED_STATUSES: Final = frozenset({200, 404})
"""What a session answers, whoever asks: 401, 429 and 5xx depend on the key or the moment."""

MAX_RECORDED_SESSIONS: Final = 10_000
"""Past this many ids the recorder refuses new sessions."""

MAX_QUEUED_BYTES: Final = 32 * 1024 * 1024
"""Bodies waiting for the writer, in bytes; an answer beyond is refused, not waited for."""

# libyaml where it is installed: the pure-Python emitter took a second per MiB of body.
_DUMPER: Final[Any] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_WIDTH: Final = 2**31 - 1  # no folded lines (the C emitter's largest width)


def _yaml_dump(data: object) -> str:
    return str(yaml.dump(data, Dumper=_DUMPER, allow_unicode=True, sort_keys=False, width=_WIDTH))


def _yaml_keeps(text: str) -> bool:
    # YAML folds some characters JSON keeps (U+0085): check with the loader a scenario is read by
    return bool(yaml.safe_load(_yaml_dump(text)) == text)


def check_record_path(path: Path) -> None:
    """Refuse at start a recording that could never be written."""
    folder = path.parent
    if path.is_dir():
        raise SettingsError(f"--record: {path} is a folder, not a file")
    if not folder.exists():
        raise SettingsError(f"--record: its folder {folder} does not exist")
    if not folder.is_dir():
        raise SettingsError(f"--record: {folder} is not a folder")
    try:  # a real write, as permissions, read-only mounts and ACLs all decide it
        with tempfile.TemporaryFile(dir=folder, prefix=f".{path.name}."):
            pass
    except OSError as exc:
        raise SettingsError(f"--record: cannot write in {folder}: {exc.strerror or exc}") from None


def _write_synced(file: BinaryIO, data: bytes) -> None:
    file.write(data)
    file.flush()
    os.fsync(file.fileno())


def _replace_whole(path: Path, data: bytes) -> None:
    """Write ``data`` as ``path`` or leave the previous file: a synced temporary file renamed."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            _write_synced(file, data)
        os.chmod(temporary, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        os.replace(temporary, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise
    if hasattr(os, "O_DIRECTORY"):  # the rename itself survives a crash once its folder is synced
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


class _Layout(NamedTuple):
    """How a recording's file begins, separates its sessions and ends."""

    head: bytes
    separator: bytes
    tail: bytes


_JSON_LAYOUT: Final = _Layout(b'{"sessions": {\n', b",\n", b"\n}}\n")
_YAML_LAYOUT: Final = _Layout(b"sessions:\n", b"", b"")


@dataclass
class Recorder:
    """Collects the answers a proxy sees, one per session id, and appends them to ``path``.

    A 200 is kept over a 404 for the same id (a session that expired while recording replays as
    the verdict it had). :meth:`observe` never waits for the disk: one writer thread at a time
    writes what is queued.
    """

    path: Path
    max_bytes: int = MAX_SCENARIO_BYTES
    problem: str | None = field(default=None, init=False)
    """Why the file on disk lacks sessions seen, else None."""
    _statuses: dict[str, int] = field(default_factory=dict, init=False, repr=False)
    _accepted_bytes: int = field(default=0, init=False)
    _full: bool = field(default=False, init=False)
    _logged: set[str] = field(default_factory=set, init=False, repr=False)
    _queue: deque[tuple[str, Recorded]] = field(default_factory=deque, init=False, repr=False)
    _queued_bytes: int = field(default=0, init=False)
    _writing: bool = field(default=False, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _idle: threading.Condition = field(init=False, repr=False)
    # The writer's own: the file's size as last written (0 until the run's first write)
    _size: int = field(default=0, init=False)
    _written: int = field(default=0, init=False)
    _unwritten: list[str] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        check_record_path(self.path)
        self._idle = threading.Condition(self._lock)
        self._json = self.path.suffix == ".json"
        self._layout = _JSON_LAYOUT if self._json else _YAML_LAYOUT

    def observe(self, session_id: str, status: int, body: bytes) -> str | None:
        """Queue one answer for ``session_id`` if it is new; why it is refused, if it is."""
        if status not in RECORDED_STATUSES:
            return None
        if not self._json and not _yaml_keeps(session_id):
            return self._refuse("a session id YAML cannot hold exactly; record to .json")
        with self._lock:
            known = self._statuses.get(session_id)
            if known is not None and (known == 200 or status != 200):
                return None
            if known is None and len(self._statuses) >= MAX_RECORDED_SESSIONS:
                return self._refuse(f"the recording holds {MAX_RECORDED_SESSIONS} sessions: full")
            if self._full or self._accepted_bytes + len(body) > self.max_bytes:
                return self._refuse_full()
            if self._queued_bytes + len(body) > MAX_QUEUED_BYTES:
                return self._refuse(f"{MAX_QUEUED_BYTES} bytes of answers wait to be written")
            self._statuses[session_id] = status
            self._accepted_bytes += len(body)
            self._queued_bytes += len(body)
            self._queue.append((session_id, Recorded(status, body)))
            if not self._writing:
                self._writing = True
                threading.Thread(target=self._drain, name="recorder", daemon=True).start()
        return None

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued answer is written (or failed); False if ``timeout`` passed."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._writing, timeout)

    def _refuse(self, why: str) -> str:
        """A refusal as the journal shows it; logged once for each reason."""
        if why not in self._logged:
            self._logged.add(why)
            log.warning("not recorded: %s (said once; each such answer is journaled)", why)
        return f"not recorded: {why}"

    def _refuse_full(self) -> str:
        bound = f"{self.max_bytes} bytes (--record-max-bytes)"
        return self._refuse(f"the recording reached its bound of {bound}")

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._writing = False
                    self._idle.notify_all()
                    return
                session_id, recorded = self._queue.popleft()
            try:
                self._write(self._text_of(session_id, recorded))
            except Exception:  # the writer must go on; say what failed
                log.exception("recording a session failed")
            finally:
                with self._lock:
                    self._queued_bytes -= len(recorded.body)

    def _text_of(self, session_id: str, recorded: Recorded) -> str:
        if self._json:
            entry = json.dumps({session_id: {"recorded": recorded.to_json()}}, ensure_ascii=False)
            return entry[1:-1]
        data = {"sessions": {session_id: {"recorded": recorded.to_json(_yaml_keeps)}}}
        return _yaml_dump(data).partition("\n")[2]  # its lines under "sessions:"

    def _write(self, text: str) -> None:
        """Append ``text`` (and any a failed write left out) to the file, or leave it whole."""
        head, separator, tail = self._layout
        texts = [*self._unwritten, text]
        joined = separator.join(t.encode("utf-8") for t in texts)
        start = self._size + len(separator) if self._size else len(head) + len(tail)
        if start + len(joined) > self.max_bytes:
            with self._lock:
                self._full = True
                self._refuse_full()
            return
        try:
            if not self._size:  # the run's first write: a new file, put in place whole
                data = head + joined + tail
                _replace_whole(self.path, data)
                self._size = len(data)
            else:
                self._append(separator + joined + tail)
        except OSError as exc:
            self._unwritten = texts
            if self.problem is None:  # once until a write succeeds, not once per session
                self.problem = (
                    f"cannot write the recording to {self.path}: {exc.strerror or exc}; it keeps "
                    f"the {self._written} sessions written before, and the next new session "
                    "writes them all"
                )
                log.error("%s", self.problem)
            return
        self._unwritten = []
        self._written += len(texts)
        if self.problem is not None:
            log.info("the recording %s is written again, with every session seen", self.path)
        self.problem = None

    def _append(self, data: bytes) -> None:
        """Write ``data`` over the file's tail; on failure cut the file back to what it was."""
        tail = self._layout.tail
        at = self._size - len(tail)
        with open(self.path, "r+b") as file:
            try:
                file.seek(at)
                _write_synced(file, data)
            except OSError:
                with suppress(OSError):  # truncating frees the space the tail needs
                    file.truncate(at)
                    file.seek(at)
                    _write_synced(file, tail)
                raise
        self._size = at + len(data)
