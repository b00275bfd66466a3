"""What a CI shows beside JUnit: GitHub Actions annotations, when the run is under Actions.

Under GitHub Actions (``GITHUB_ACTIONS=true``) the summary ends with workflow commands: an
``::error`` per failed check, titled by its spec clause, its check and the sessions it names,
an ``::error`` for a failed gate no check explains (nothing verified, incomplete, interrupted),
and a ``::warning`` per advisory. Actions shows them on the run's page and its summary.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote

from .body import SESSION_NAMED
from .gate import Gate
from .report import Failure, SuiteReport

MAX_LINES = 30
"""The most lines of one failure an annotation carries (the log and the report have all)."""
MAX_SESSIONS = 3
MAX_ID = 24
"""A longer session id is cut in the middle in a title (the message has it whole)."""
_SESSION_PARAM = re.compile(r"[?&]n=([^&'\" ]*)")


def under_github_actions() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


def _data(text: str) -> str:
    """A workflow command's message, escaped as the Actions toolkit does."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def sessions(failure: Failure) -> list[str]:
    """The sessions a failure names: in its text, else in its replay lines' ``n=``."""
    named = [m[1] for m in SESSION_NAMED.finditer(failure.text)]
    named += [unquote(m[1]) for line in failure.curl for m in _SESSION_PARAM.finditer(line)]
    return list(dict.fromkeys(n for n in named if n))


def _title(failure: Failure) -> str:
    found = [n if len(n) <= MAX_ID else f"{n[:12]}…{n[-8:]}" for n in sessions(failure)]
    listed = ", ".join(found[:MAX_SESSIONS]) + (
        f" (+{len(found) - MAX_SESSIONS} more)" if len(found) > MAX_SESSIONS else ""
    )
    where = f" · session {listed}" if found else ""
    return f"{failure.clause} {failure.check}{where}"


def workflow_commands(report: SuiteReport, gate: Gate) -> list[str]:
    """The run's workflow commands, one line each."""
    out = []
    for failure in report.failures:
        lines = failure.text.splitlines()
        more = (
            [f"… {len(lines) - MAX_LINES} more lines in the log"] if len(lines) > MAX_LINES else []
        )
        message = "\n".join([*lines[:MAX_LINES], *more])
        out.append(f"::error title={_property(_title(failure))}::{_data(message)}")
    if gate.unexplained:
        title = f"Explain API contract: {gate.outcome}"
        out.append(f"::error title={_property(title)}::{_data(chr(10).join(gate.lines()))}")
    for advisory in report.advisories:
        out.append(f"::warning title={_property('Explain API advisory')}::{_data(advisory)}")
    return out
