"""Masking, the Secret holder and the Redactor."""

from __future__ import annotations

import base64
import json
import logging
from urllib.parse import quote, quote_plus

import pytest

from verdict_contract.core.redact import (
    MAX_RUN_SECRET,
    KeyFinder,
    KeyHeaders,
    Redactor,
    Secret,
    mask,
    mask_credentials,
    masked_header,
    masked_url,
)

KEY = "abc+def/ghi=jkl&SECRET mid:9876"


def test_mask_shows_at_most_the_last_four_characters() -> None:
    assert mask("verdict-mock-local-key") == "…-key"
    assert mask("short-key") == "…"


SK = "sk-live-0123456789abcdef"


@pytest.mark.parametrize(
    ("header", "shown"),
    [
        ("", ""),
        (f"Bearer {SK}", "Bearer …cdef"),
        (f"bearer   {SK}  ", "bearer …cdef"),
        (f"Basic {SK}", "Basic …cdef"),
        (SK, "…cdef"),  # no scheme: the whole value is the secret
        (f"{SK} {SK}", "…cdef"),  # nor a first word that is not a scheme's letters
        ("Bearer short", "Bearer …"),
        ("Token" + f" {SK}", "Token …cdef"),
        ("S" * 7 + f" {SK}", "S" * 7 + " …cdef"),
        ("S" * 8 + f" {SK}", "…cdef"),  # 8 letters could be a key's: masked with the rest
    ],
)
def test_mask_credentials(header: str, shown: str) -> None:
    assert mask_credentials(header) == shown


def test_key_headers_are_sent_whole_and_print_masked() -> None:
    headers = KeyHeaders({"Authorization": f"Bearer {KEY}", "X-Trace": "t-1"})
    assert headers == {"Authorization": f"Bearer {KEY}", "X-Trace": "t-1"}  # sent as they are
    for shown in (repr(headers), str(headers), f"{headers}", repr([headers])):
        assert shown.count(KEY[-4:]) == 1, shown
        assert KEY[:8] not in shown
    assert repr(headers) == f"{{'Authorization': 'Bearer …{KEY[-4:]}', 'X-Trace': 't-1'}}"
    assert repr(KeyHeaders(authorization=KEY)) == f"{{'authorization': '…{KEY[-4:]}'}}"


URL_KEY = "kq7Zp2Lw9RtX4mVb8NcY1sHd"  # as a client sends a key in a URL: nothing to encode


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://api.test/e?n=demo-session", "https://api.test/e?n=…sion"),
        ("https://api.test/e?n=s&api_key=" + URL_KEY, "https://api.test/e?n=…&api_key=…1sHd"),
        ("https://user:" + URL_KEY + "@api.test/e?flag", "https://api.test/e?flag"),
        ("https://api.test/e?n=s&" + URL_KEY, "https://api.test/e?n=…&…1sHd"),
        ("https://api.test/e#" + URL_KEY, "https://api.test/e"),
    ],
)
def test_a_url_shows_no_query_value_nor_user_info(url: str, shown: str) -> None:
    assert masked_url(url) == shown


def test_a_header_is_shown_as_sent_only_if_it_holds_no_secret() -> None:
    assert masked_header("Content-Type", "application/json") == "application/json"
    assert masked_header("authorization", f"Bearer {KEY}") == f"Bearer …{KEY[-4:]}"
    assert masked_header("X-Api-Key", KEY) == f"…{KEY[-4:]}"


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


LONG_KEY = "sk_live_9f8e7d6c5b4a3210ZyXwVuTsRqPoNm1a0Z"
"""A 42-character key, as the issue's staging reflected it."""


@pytest.mark.parametrize(
    "shown",
    [
        LONG_KEY[:41],  # everything but the last character
        LONG_KEY[9:17],  # any 8 in a row
        "".join(f"\\u{ord(c):04x}" for c in LONG_KEY[:20]),  # JSON-escaped
        "".join(f"\\\\u{ord(c):04x}" for c in LONG_KEY[3:12]),  # ... as a repr shows them
        "".join(f"%{ord(c):02X}" for c in LONG_KEY[20:30]),  # percent-encoded
    ],
)
def test_any_eight_characters_of_the_key_in_a_row_are_masked(shown: str) -> None:
    redactor = Redactor()
    redactor.add(LONG_KEY)
    cleaned = redactor.text(f"received: {{'debug': 'AAAA{shown}'}} (end)")
    assert cleaned.startswith("received: {'debug': 'AAAA…1a0Z")
    assert cleaned.endswith(" (end)")
    decoded = cleaned.encode().decode("unicode_escape", errors="ignore")
    for start in range(len(LONG_KEY) - 7):
        assert LONG_KEY[start : start + 8] not in cleaned + decoded


@pytest.mark.parametrize(
    "shown",
    [
        base64.b64encode(LONG_KEY[:-4].encode()).decode(),  # all a mask does not show
        base64.urlsafe_b64encode(b"x" + LONG_KEY[10:22].encode()).decode(),  # a part, shifted
        LONG_KEY[:-4].encode().hex(),
        ":".join(f"{b:02X}" for b in LONG_KEY[5:14].encode()),
        "".join(f"\\x{b:02x}" for b in LONG_KEY[:9].encode()),  # each byte escaped
    ],
)
def test_a_part_of_the_key_encoded_is_masked_and_stays_valid_json(shown: str) -> None:
    """An encoding's last 4 characters are not the key's: its mask is ``…`` alone, so a JSON
    string masked stays one (``…\\x5a`` would not)."""
    redactor = Redactor()
    redactor.add(LONG_KEY)
    cleaned = redactor.text(json.dumps({"debug": shown, "n": "s1"}))
    debug = json.loads(cleaned)["debug"]  # still JSON
    assert "…" in debug
    assert not KeyFinder.of([LONG_KEY.encode()]).finds(debug), debug
    assert len(debug) <= 6, debug  # "…", and the encoding's edges (bits of the text around)
    assert (
        redactor.text(json.dumps({"debug": "0123456789abcdef"})) == '{"debug": "0123456789abcdef"}'
    )


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if 0x21 <= ord(c) <= 0x7E else c for c in text)


@pytest.mark.parametrize(
    "shown",
    [
        LONG_KEY.upper(),
        LONG_KEY[4:20].swapcase(),
        _full_width(LONG_KEY[:12]),  # NFKC reads it as the key
        "".join(f"%25{byte:02X}" for byte in LONG_KEY[6:16].encode()),  # percent-encoded twice
        "0x" + ", 0x".join(f"{byte:02x}" for byte in LONG_KEY[:10].encode()),  # a C array
        quote(_full_width(LONG_KEY[3:14])),  # its characters' UTF-8 bytes, percent-encoded
    ],
    ids=["capitals", "case swapped", "full-width", "percent twice", "0x bytes", "wide percent"],
)
def test_the_key_in_capitals_full_width_or_encoded_again_is_a_key(shown: str) -> None:
    """What a reader (or NFKC, or a second decoding) turns back into the key is the key."""
    redactor = Redactor()
    redactor.add(LONG_KEY)
    cleaned = redactor.text(f"received: {shown} (end)")
    assert cleaned.startswith("received:")  # (a separator of the form's may go with it)
    assert "…" in cleaned
    assert cleaned.endswith(" (end)")
    if not shown.startswith("0x"):  # the journal's finder reads no C array (a 4-byte run is
        assert KeyFinder.of([LONG_KEY.encode()]).finds(shown)  # 24 of its characters)
    assert not KeyFinder.of([LONG_KEY.encode()]).finds(cleaned)
    plain = (
        "received: a sentence in capitals, SK-LIVE, and NOTHING of a key, "
        "{0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x2c, 0x20, 0x77} and b'\\x68\\x65\\x6c\\x6c\\x6f' (end)"
    )
    assert redactor.text(plain) == plain


def test_a_key_in_capitals_is_masked_whole_not_cut_at_its_first_capital() -> None:
    """The key's own runs are not looked for in a folded reading (its first capital would end
    one there, leaving the rest beside the mask)."""
    key = "sk-live-Profile-Q7fR2-abcdefgh"
    redactor = Redactor()
    redactor.add(key)
    for shown in (key.upper(), key.swapcase(), key[:21].upper()):
        assert redactor.text(f"x {shown} tail") == "x …efgh tail", shown


def test_a_credential_past_the_bound_is_looked_for_whole_only() -> None:
    """A client's made-up credential of 30,000 characters once cost a regex of 30,000
    alternatives per form, per request: past ``MAX_RUN_SECRET`` it is masked whole."""
    long = "QzLong-" + "0123456789abcdefghij" * 30
    redactor = Redactor()
    redactor.add(long)
    assert redactor.runs == {}
    assert redactor.text(f"echo {long}.") == f"echo {mask(long)}."
    redactor.add(long[:MAX_RUN_SECRET])
    assert redactor.runs  # at the bound: its runs too


def test_seven_characters_in_a_row_and_the_last_four_stay() -> None:
    redactor = Redactor()
    redactor.add(LONG_KEY)
    text = f"a run of 7 {LONG_KEY[3:10]} and the mask …{LONG_KEY[-4:]}"
    assert redactor.text(text) == text


@pytest.mark.parametrize("kept", [4, 5, 7])
def test_a_value_cut_before_masking_is_masked_at_the_cut(kept: int) -> None:
    """A value cut for display (``…``) may split a longer run: what is left beside the cut
    is masked from 4 characters on, before and after it; a mask is left as it is."""
    redactor = Redactor()
    redactor.add(LONG_KEY)
    cut_at_the_end = '{"debug": "' + LONG_KEY[:kept] + "…"
    cut_in_the_middle = "n=AAAA…" + LONG_KEY[-kept - 6 : -6] + " (end)"
    assert redactor.text(cut_at_the_end) == '{"debug": "…1a0Z…'
    assert redactor.text(cut_in_the_middle) == "n=AAAA……1a0Z (end)"
    once = redactor.text(f"key {LONG_KEY}")
    assert once == "key …1a0Z" == redactor.text(once)  # masking again changes nothing
    three = '{"debug": "' + LONG_KEY[:3] + "…"
    assert redactor.text(three) == three  # fewer than a mask shows
    uncut = Redactor(cuts=False).joined([LONG_KEY])  # an upstream's body: nothing of it was cut
    assert uncut.text(cut_at_the_end) == cut_at_the_end  # (7 characters: under a run)
    assert uncut.text(f"key {LONG_KEY}") == "key …1a0Z"


def test_a_key_finder_finds_eight_characters_of_a_key_in_a_row_or_its_encodings() -> None:
    key = "team-key-0123456789abcdef"
    found = KeyFinder.of([key.encode(), b"", b"tiny"])
    for text in (
        key,
        key[:-4],  # the key less its last 4 characters
        f"x{key[5:13]}y",  # any 8 of its characters in a row, inside a value
        key[3:11],  # 8 of them, alone: the text's only window
        base64.b64encode(f"user:{key}".encode()).decode(),  # base64, whatever surrounds it
        key.encode().hex(),
        "a-tiny-id",  # a secret under 8 characters: whole
    ):
        assert found.finds(text), text
    for text in (f"x{key[5:12]}y", "demo-contradicted", ""):  # 7 in a row: not a part
        assert not found.finds(text), text
    assert not KeyFinder.of([key.encode()], encoded=False).finds(key.encode().hex())
    assert KeyFinder.of([key.encode()]) == KeyFinder.of([key.encode()])  # a cache may key on it


def test_a_joined_redactor_leaves_the_one_it_was_joined_from_as_it_was() -> None:
    """The proxy joins each call's credential to its state's redactor: the next call must not
    find it there."""
    base = Redactor(cuts=False).joined([LONG_KEY])
    joined = base.joined(["QzCall-0123456789-credential"])
    assert "QzCall-0123456789-credential" in joined.secrets
    assert "QzCall-0123456789-credential" not in base.secrets
    assert len(joined.runs) > len(base.runs)
    assert not joined.cuts
    assert base.text("QzCall-0123456789-credential") == "QzCall-0123456789-credential"
