"""Masking, the Secret holder and the Redactor."""

from __future__ import annotations

import logging
from urllib.parse import quote, quote_plus

import pytest

from verdict_contract.core.redact import Redactor, Secret, mask

KEY = "abc+def/ghi=jkl&SECRET mid:9876"


def test_mask_shows_at_most_the_last_four_characters() -> None:
    assert mask("verdict-mock-local-key") == "…-key"
    assert mask("short-key") == "…"


def test_secret_never_prints_itself() -> None:
    secret = Secret(KEY)
    assert KEY not in repr(secret) + str(secret) + f"{secret}"
    assert secret.reveal() == KEY
    assert secret == Secret(KEY)
    assert secret != Secret(KEY + "x")


@pytest.mark.parametrize("form", [KEY, quote(KEY, safe=""), quote_plus(KEY)])
def test_redactor_masks_every_encoding(form: str) -> None:
    redactor = Redactor()
    redactor.add(KEY)
    cleaned = redactor.text(f"GET /e?api_key={form} 401")
    assert form not in cleaned
    assert "…9876" in cleaned


def test_redact_logs_masks_records_until_undone(caplog: pytest.LogCaptureFixture) -> None:
    redactor = Redactor()
    redactor.add(KEY)
    undo = redactor.redact_logs()
    try:
        logging.getLogger("httpx").warning("request with %s", quote_plus(KEY))
    finally:
        undo()
    logging.getLogger("httpx").warning("after: %s", "plain")
    assert quote_plus(KEY) not in caplog.text
    assert "request with …9876" in caplog.text
    assert "after: plain" in caplog.text


@pytest.mark.parametrize("key", ["z", "k3", "k3y"])
def test_a_short_key_is_masked_where_it_stands_alone(key: str) -> None:
    redactor = Redactor()
    redactor.add(key)
    assert redactor.text(f"Authorization: Bearer {key}") == "Authorization: Bearer …"
    assert redactor.text(f"?api_key={key}&n=1") == "?api_key=…&n=1"
    assert redactor.text(f"a{key}b stays") == f"a{key}b stays"  # inside a word: not the key
