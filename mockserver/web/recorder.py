"""Recording what a proxied service answered, as a scenario file ``--scenario`` replays.

Each distinct session id seen becomes a named session with a ``recorded`` answer: its status
and its body exactly as received (text when it is UTF-8, base64 otherwise)::

    sessions:
      s-123: {recorded: {status: 200, body: '{"schema":7,...}'}}

The file is started afresh by the first answer of a run, then each new session (or a 404 that
became a 200) is appended in O(1) (in JSON, the closing braces are rewritten): stopping the
proxy between two answers leaves a complete scenario behind; an id seen again later is written
again, and the last one wins when the file is read. The proxy records only answers whose body is
JSON (:mod:`.proxy`): a cut or malformed body is not the session's answer.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import yaml

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


@dataclass
class Recorder:
    """Collects the answers a proxy sees, one per session id, and keeps ``path`` up to date.

    A 200 is kept over a 404 for the same id (a session that expired while recording replays as
    the verdict it had); otherwise the first answer stays.
    """

    path: Path
    _sessions: dict[str, Recorded] = field(default_factory=dict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _full_said: bool = field(default=False, init=False)
    _started: bool = field(default=False, init=False)

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
            try:
                self._append(session_id, recorded)
            except OSError as exc:
                log.error("cannot write the recording to %s: %s", self.path, exc.strerror or exc)

    def _append(self, session_id: str, recorded: Recorded) -> None:
        """Add one session to the file, writing only its own lines."""
        if self.path.suffix == ".json":
            entry = json.dumps({session_id: {"recorded": recorded.to_json()}}, ensure_ascii=False)
            if not self._started:
                text = '{"sessions": {\n' + entry[1:-1] + _JSON_END
                self.path.write_text(text, encoding="utf-8")
            else:
                with self.path.open("r+b") as file:
                    file.seek(-len(_JSON_END), os.SEEK_END)
                    file.write((",\n" + entry[1:-1] + _JSON_END).encode())
                    file.truncate()
        else:
            data = {"sessions": {session_id: {"recorded": recorded.to_json(_yaml_keeps)}}}
            text = yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=2**31)
            lines = text if not self._started else text.partition("\n")[2]  # not "sessions:"
            with self.path.open("w" if not self._started else "a", encoding="utf-8") as file:
                file.write(lines)
        self._started = True


_JSON_END: Final = "\n}}\n"
