"""The log's two formats (``--log-format``): text lines, or one JSON object a line.

``json`` is for a log collector: each line has ``time`` (ISO 8601, UTC), ``level``, ``logger``,
``message``, an unexpected error's traceback as ``exception``, and the facts a line carries for
machines (``extra={"fields": {...}}``: a dead worker's ``pid``, the state store's ``state``).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Final

TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_RESERVED: Final = frozenset({"time", "level", "logger", "process", "message", "exception"})


class JSONFormatter(logging.Formatter):
    """One JSON object per record, on one line (see the module's docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "process": record.process,  # under --workers, whose line it is
            "message": record.getMessage(),
        }
        extra = getattr(record, "fields", None)
        if isinstance(extra, dict):
            line.update((k, v) for k, v in extra.items() if k not in _RESERVED)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, separators=(",", ":"))


def configure(level: str, form: str) -> None:
    """The root logger at ``level``, writing ``form`` (text or json) to stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter() if form == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler])


def announce(banner: str, form: str) -> None:
    """Say the banner where the operator reads: as text on stdout, or under ``--log-format
    json`` as one record of the ``mockserver`` logger, on the logs' stream (its first line the
    message; its URL as ``url``, every other line in ``banner``)."""
    if form != "json":
        print(banner, flush=True)
        return
    first, *rest = banner.splitlines()
    fields = {"url": first.rpartition(" ")[2], "banner": [line.strip() for line in rest]}
    logging.getLogger("mockserver").info("%s", first, extra={"fields": fields})
