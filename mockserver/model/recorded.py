"""An answer recorded from a real service (``recorded:`` in a scenario; :mod:`..web.recorder`)."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

_RECORDED_SHAPES: Final = ({"status", "body"}, {"status", "body_base64"})


@dataclass(frozen=True)
class Recorded:
    """An answer recorded from a real service, replayed byte for byte."""

    status: int
    body: bytes

    def decoded(self) -> dict[str, Any]:
        """The body as a JSON object, to describe the session; ``{}`` if it is not one."""
        try:
            body = json.loads(self.body)
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            return {}
        return body if isinstance(body, dict) else {}

    def to_json(self, keeps: Callable[[str], bool] = lambda _: True) -> dict[str, object]:
        """As a scenario holds it: the text if it is UTF-8 and ``keeps`` it exactly, or base64."""
        try:
            text = self.body.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None and keeps(text):
            return {"status": self.status, "body": text}
        return {"status": self.status, "body_base64": base64.b64encode(self.body).decode()}


def parse_recorded(raw: object, where: str) -> Recorded:
    """Read ``{"status": 200, "body": "..."}`` or ``body_base64``; ValueError names the problem."""
    if not isinstance(raw, Mapping) or set(raw) not in _RECORDED_SHAPES:
        raise ValueError(f'{where} must be {{"status": N, "body": "..."}} (or "body_base64")')
    status = raw["status"]
    if not isinstance(status, int) or isinstance(status, bool) or not 200 <= status <= 599:
        raise ValueError(f"{where}.status must be an HTTP status from 200 to 599")
    if "body" in raw:
        if not isinstance(raw["body"], str):
            raise ValueError(f"{where}.body must be a string")
        return Recorded(status, raw["body"].encode("utf-8"))
    try:
        return Recorded(status, base64.b64decode(str(raw["body_base64"]), validate=True))
    except (binascii.Error, ValueError):
        raise ValueError(f"{where}.body_base64 is not valid base64") from None
