"""The head of a journal entry for a shared store (journaling.head_past_time): the same text
whether kept from an earlier request or built anew, and the JSON of its fields.
"""

from __future__ import annotations

import json

import pytest

from verdict_contract.mockserver import Settings
from verdict_contract.mockserver.explain import _UNAUTHORIZED
from verdict_contract.mockserver.journaling import (
    _kept_head,
    _new_head,
    head_past_time,
    parse_query,
    query_start,
)
from verdict_contract.mockserver.model.answer import Served
from verdict_contract.mockserver.model.steps import outcome
from verdict_contract.mockserver.settings import DEFAULT_API_KEY
from verdict_contract.mockserver.state import MockState

STATE = MockState(Settings())
KEYED = f"Bearer {DEFAULT_API_KEY}"
SERVED = Served("contradicted", True, 7, ())
REQUESTS = [  # query, Authorization, keyed
    (b"n=demo-contradicted", KEYED, True),
    (b"n=d%C3%A9mo&token=" + DEFAULT_API_KEY.encode(), KEYED, True),  # a key in the query
    (b"n=" + DEFAULT_API_KEY.encode(), KEYED, True),  # a key as the session id: masked too
    (b"n=demo&n=again&x=1", None, False),
    (b"n=demo&api_key=sk-live-0123456789abcdef", "Bearer wrong-key-0000", False),
    (b"%FF", KEYED, True),  # not UTF-8
]


@pytest.mark.parametrize(("query", "authorization", "keyed"), REQUESTS)
def test_a_kept_head_is_the_head_built_anew(
    query: bytes, authorization: str | None, keyed: bool
) -> None:
    refused = None if keyed else outcome(_UNAUTHORIZED)
    pairs = parse_query(query) if keyed else query_start(query)
    kept = head_past_time(STATE, "GET", query, pairs, authorization, refused, SERVED)
    assert _kept_head.cache_info().currsize > 0
    built = _new_head("GET", query, pairs, authorization, refused, SERVED, STATE.key_ok)
    assert kept == built
    assert DEFAULT_API_KEY not in kept[0]


def test_the_head_is_the_json_of_its_fields_up_to_the_answers() -> None:
    past_time, untrusted = head_past_time(
        STATE, "GET", b"n=d%C3%A9mo", [("n", "démo")], KEYED, None, SERVED
    )
    fields = json.loads("[" + past_time[:-1] + "]")
    body = ["contradicted", True, 7, []]
    assert fields == ["GET", "/e", "démo", {}, "Bearer …-key", body]
    assert past_time.endswith(",")
    assert "démo" in past_time  # as the store keeps it: UTF-8, not escaped
    assert not untrusted
