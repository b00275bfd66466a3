"""Recording what a proxied service answered, as a scenario file ``--scenario`` replays.

Each distinct session id seen becomes a named session with a ``recorded`` answer: its status
and its body exactly as received (text when it is UTF-8, base64 otherwise)::

    sessions:
      s-123: {recorded: {status: 200, body: '{"schema":7,...}'}}

The file is started afresh by the first answer of a run, then replaced whole at each new session
(or a 404 that became a 200), atomically: stopping the proxy, a crash or a full disk leave the
last complete scenario behind. A rewrite costs the file's size (each session's text is made once
and joined), bounded by :data:`MAX_RECORDED_SESSIONS`. The folder is checked at start. The proxy
records only answers whose body is JSON (:mod:`.proxy`): a cut or malformed body is not the
session's answer.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import yaml

from verdict_contract.core.errors import SettingsError

from ..model.recorded import Recorded

log = logging.getLogger("mockserver.recorder")

RECORDED_STATUSES: Final = frozenset({200, 404})
"""What a session answers, whoever asks: 401, 429 and 5xx depend on the key or the moment."""

MAX_RECORDED_SESSIONS: Final = 10_000
"""Past this many ids the recorder stops adding sessions (and says so once)."""


def _yaml_keeps(text: str) -> bool:
    # YAML folds some characters JSON keeps (U+0085 is a line break to it): check, don't guess.
    dumped = yaml.safe_dump(text, allow_unicode=True, width=2**31)
    return bool(yaml.safe_load(dumped) == text)


def check_record_path(path: Path) -> None:
    """Refuse at start a recording that could never be written: one line, as settings are."""
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


def _replace_whole(path: Path, data: bytes) -> None:
    """Write ``data`` as ``path`` or leave the previous file: a temporary file in the same
    folder, synced, then renamed over it (a rename within a folder is atomic)."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
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


@dataclass
class Recorder:
    """Collects the answers a proxy sees, one per session id, and keeps ``path`` up to date.

    A 200 is kept over a 404 for the same id (a session that expired while recording replays as
    the verdict it had); otherwise the first answer stays. Each change replaces the file whole
    (:func:`_replace_whole`), from each session's text made once: a failed write (a full disk)
    leaves the previous complete file, is logged once and shown as :attr:`problem`; the next
    change writes every session seen.
    """

    path: Path
    problem: str | None = field(default=None, init=False)
    """Why the file on disk lacks sessions seen (the last write failed), else None."""
    _sessions: dict[str, Recorded] = field(default_factory=dict, init=False)
    _texts: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _written: int = field(default=0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _full_said: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        check_record_path(self.path)

    def observe(self, session_id: str, status: int, body: bytes) -> None:
        """Record one answer for ``session_id`` if it is new; rewrite the file if it changed."""
        if status not in RECORDED_STATUSES:
            return

        if self.path.suffix != ".json" and not _yaml_keeps(session_id):
            log.warning("a session id YAML cannot hold exactly is not recorded; record to .json")
            return
        with self._lock:
            known = self._sessions.get(session_id)
            if known is not None and (known.status == 200 or status != 200):
                return
            if known is None and len(self._sessions) >= MAX_RECORDED_SESSIONS:
                if not self._full_said:
                    log.warning("recorded %d sessions; no more are added", MAX_RECORDED_SESSIONS)
                    self._full_said = True
                return
            recorded = self._sessions[session_id] = Recorded(status, body)
            self._texts[session_id] = self._text_of(session_id, recorded)
            self._write()

    def _text_of(self, session_id: str, recorded: Recorded) -> str:
        """One session's text in the file, made once (a rewrite only joins them)."""
        if self.path.suffix == ".json":
            entry = json.dumps({session_id: {"recorded": recorded.to_json()}}, ensure_ascii=False)
            return entry[1:-1]
        data = {"sessions": {session_id: {"recorded": recorded.to_json(_yaml_keeps)}}}
        text = yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=2**31)
        return text.partition("\n")[2]  # its lines under "sessions:"

    def _write(self) -> None:
        if self.path.suffix == ".json":
            text = '{"sessions": {\n' + ",\n".join(self._texts.values()) + "\n}}\n"
        else:
            text = "sessions:\n" + "".join(self._texts.values())
        try:
            _replace_whole(self.path, text.encode("utf-8"))
        except OSError as exc:
            if self.problem is None:  # once until a write succeeds, not once per session
                self.problem = (
                    f"cannot write the recording to {self.path}: {exc.strerror or exc}; it keeps "
                    f"the {self._written} sessions written before, and the next new session "
                    "writes them all"
                )
                log.error("%s", self.problem)
            return
        if self.problem is not None:
            log.info("the recording %s is written again, with every session seen", self.path)
        self.problem = None
        self._written = len(self._texts)
