"""mockserver.journal: masking secrets and keeping a bounded record of requests."""

from __future__ import annotations

import gc
import json
import tracemalloc
import types

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.helpers import run_threads
from tests.mockserver.entries import ENTRY, EXPECTED, record
from verdict_contract.core.redact import mask
from verdict_contract.mockserver.store.journal import (
    CUT,
    JSON_FIELDS,
    MAX_HEADERS,
    MAX_PARAMS,
    Journal,
    kept_headers,
)

SECRET = "sk-live-0123456789abcdef"


# --- mask -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("secret", "shown"),
    [
        (SECRET, "…cdef"),
        ("abcdefghijkl", "…ijkl"),  # 12 characters: the shortest that shows its tail
        ("abcdefghijk", "…"),  # 11: fully hidden
        ("pass", "…"),
        ("", "…"),
    ],
)
def test_mask(secret: str, shown: str) -> None:
    assert mask(secret) == shown


@settings(max_examples=300, deadline=None)
@given(secret=st.text(max_size=80))
def test_mask_never_shows_more_than_the_last_4_characters(secret: str) -> None:
    shown = mask(secret)
    assert shown.startswith("…")
    tail = shown[1:]
    assert len(tail) <= 4
    assert secret.endswith(tail)
    if len(secret) < 12:
        assert tail == ""
    else:
        assert tail == secret[-4:]


# --- Journal ----------------------------------------------------------------------------------


def _record(
    journal: Journal, n: str = "id", status: int = 200, generation: int | None = None
) -> None:
    record(
        journal,
        generation=generation,
        method="GET",
        path="/e",
        args=[("n", n)],
        authorization=f"Bearer {SECRET}",
        status=status,
        outcome="verdict",
    )


def test_journal_keeps_only_the_newest_entries() -> None:
    journal = Journal(size=3)
    for i in range(5):
        _record(journal, n=f"id-{i}")
    assert len(journal) == 3
    assert [entry.n for entry in journal.entries()] == ["id-2", "id-3", "id-4"]


def test_journal_bound_holds_under_threads() -> None:
    journal = Journal(size=100)

    def work(index: int) -> None:
        for i in range(200):
            _record(journal, n=f"t{index}-{i}")

    run_threads(8, work)
    assert len(journal) == 100
    assert len(journal.entries()) == 100


def test_clear_empties_the_journal() -> None:
    journal = Journal(size=10)
    _record(journal)
    assert len(journal) == 1
    journal.clear()
    assert len(journal) == 0
    assert journal.entries() == []


def test_record_masks_authorization_and_every_query_value_but_n() -> None:
    journal = Journal()
    record(
        journal,
        method="GET",
        path="/e",
        args=[
            ("n", "demo-contradicted"),
            ("api_key", SECRET),
            ("token", "short"),
            ("n", "second-n-value-0000"),
        ],
        authorization=f"Bearer {SECRET}",
        status=200,
        outcome="verdict",
    )
    (entry,) = journal.entries()
    assert entry.n == "demo-contradicted"
    assert entry.authorization == "Bearer …cdef"
    assert entry.query == {"api_key": ["…cdef"], "token": ["…"], "n": ["…0000"]}
    text = json.dumps(entry.to_json(), ensure_ascii=False)
    assert SECRET not in text
    assert "short" not in text
    assert "second-n-value" not in text


def test_record_keeps_n_and_the_rest_of_the_request() -> None:
    journal = Journal()
    record(
        journal,
        method="HEAD",
        path="/e",
        args=[("n", "x" * 300)],
        authorization=None,
        status=401,
        outcome="unauthorized",
    )
    data = journal.entries()[0].to_json()
    assert data["method"] == "HEAD"
    assert data["path"] == "/e"
    assert data["n"] == "x" * 256 + CUT  # cut, with a marker, so a huge id stays small
    assert data["authorization"] is None
    assert data["status"] == 401
    assert data["outcome"] == "unauthorized"
    assert data["query"] == {}
    assert isinstance(data["time"], float)


def test_record_without_n() -> None:
    journal = Journal()
    record(
        journal,
        method="GET",
        path="/e",
        args=[],
        authorization="",
        status=400,
        outcome="bad_request",
    )
    entry = journal.entries()[0]
    assert entry.n is None
    assert entry.authorization == ""


@settings(max_examples=200, deadline=None)
@given(
    secret=st.text(min_size=12, max_size=60).filter(lambda s: s.strip() == s and " " not in s),
    name=st.text(min_size=1, max_size=10).filter(lambda s: s != "n"),
)
@example(secret="000000000000", name=CUT)  # the server's own marker, sent by a client
def test_no_secret_value_survives_recording(secret: str, name: str) -> None:
    journal = Journal()
    record(
        journal,
        method="GET",
        path="/e",
        args=[("n", "id"), (name, secret)],
        authorization=f"Bearer {secret}",
        status=401,
        outcome="unauthorized",
    )
    entry = journal.entries()[0]
    assert entry.authorization == f"Bearer …{secret[-4:]}"
    assert list(entry.query.values()) == [[f"…{secret[-4:]}"]]
    # Where the caller's text lands (field names and our own words, such as "unauthorized",
    # may contain a generated secret by chance: they are not what the client sent).
    shown = json.dumps([entry.n, entry.query, entry.authorization], ensure_ascii=False)
    assert secret not in shown


@pytest.mark.parametrize(
    ("name", "shown"),
    [("api_key", "api_key"), ("token", "token"), ("verdict-mock-local-key", "…-key"), ("Ab1", "…")],
)
def test_query_names_that_may_be_secrets_are_masked(name: str, shown: str) -> None:
    journal = Journal()
    record(
        journal,
        method="GET",
        path="/e",
        args=[("n", "id"), (name, "")],
        authorization=None,
        status=401,
        outcome="unauthorized",
    )
    assert list(journal.entries()[0].query) == [shown]


# --- bounded in bytes -------------------------------------------------------------------------

HUGE_QUERY = [(f"p{i}", "v" * 50) for i in range(30_000)]


def _recorded_size(args: list[tuple[str, str]], authorization: str | None = None) -> int:
    journal = Journal(size=1)
    record(
        journal,
        method="GET",
        path="/e" + "x" * 100_000,
        args=args,
        authorization=authorization,
        status=400,
        outcome="bad_request",
    )
    return len(json.dumps(journal.entries()[0].to_json()))


def test_an_entry_stays_small_whatever_the_request_holds() -> None:
    hostile = [("n", "n" * 100_000), *HUGE_QUERY]
    size = _recorded_size(hostile, "S" * 100_000 + " " + "k" * 100_000)
    assert size < 4_000, f"received an entry of {size} bytes; documented: a few KB at most"
    # the check can fail: the same request unbounded would be megabytes
    assert len(json.dumps(hostile)) > 1_000_000


def test_parameters_past_the_limit_are_counted_under_the_marker() -> None:
    journal = Journal(size=1)
    record(
        journal,
        method="GET",
        path="/e",
        args=HUGE_QUERY,
        authorization=None,
        status=400,
        outcome="x",
    )
    query = journal.entries()[0].query
    assert query[CUT] == [f"{len(HUGE_QUERY) - MAX_PARAMS} more parameter(s)"]
    assert sum(len(values) for name, values in query.items() if name != CUT) == MAX_PARAMS


def test_the_journal_of_a_flood_of_huge_queries_is_bounded_in_bytes() -> None:
    journal = Journal(size=300)
    for _ in range(300):
        record(
            journal,
            method="GET",
            path="/e",
            args=HUGE_QUERY,
            authorization=None,
            status=400,
            outcome="x",
        )
    total = len(json.dumps([e.to_json() for e in journal.entries()]))
    assert total < 300 * 2_000, f"received {total} bytes for 300 entries"


def test_headers_and_parameters_are_kept_as_bounded_salted_fingerprints() -> None:
    journal = Journal(size=1)
    headers = [(f"X-H{i}", "v" * 10_000) for i in range(1000)]
    secret = "Bearer sk-live-0123456789abcdef"
    record(
        journal,
        method="GET",
        path="/e",
        args=[("n", "demo-refused"), *HUGE_QUERY],
        authorization=secret,
        status=200,
        outcome="verdict",
        headers=[(b"X-Trace", b"abc"), *((k.encode(), v.encode()) for k, v in headers)],
    )
    (entry,) = journal.entries()
    assert entry.sent("h", "authorization", secret)
    assert not entry.sent("h", "authorization", "Bearer sk-live-0123456789abcdeF")
    assert entry.sent("h", "x-trace", "abc")  # bytes as sent, matched as text
    assert entry.sent("q", "n", "demo-refused")
    assert entry.sent("q", "p0", "v" * 50)
    assert not entry.sent("q", f"p{len(HUGE_QUERY) - 1}", "v" * 50)  # past the bound
    assert len(entry.fingerprints) <= MAX_HEADERS + MAX_PARAMS + 2
    assert all(len(p) == 16 for p in entry.fingerprints)
    shown = json.dumps(entry.to_json()) + repr(entry)
    assert "fingerprints" not in shown
    assert "sk-live" not in shown


def test_requests_with_many_headers_leave_no_more_held_than_the_headers_kept() -> None:
    """The headers a journal keeps digests of are the first MAX_HEADERS: what is remembered of
    a request (an unauthenticated one too) is bounded by them, not by what it sent."""
    kept_headers.cache_clear()
    journal = Journal(size=1)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(64):  # the cache's size: each request a new set of headers
            headers = [(f"x-h{j}".encode(), f"{i}.{j}".encode()) for j in range(2000)]
            record(journal, method="GET", path="/e", authorization=None, status=401,
                   outcome="unauthorized", headers=headers)  # fmt: skip
        del headers
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 64 * MAX_HEADERS * 1_000, f"{held} bytes held after 64 requests"


_CODE = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def _held_texts(root: object) -> list[str]:
    """Every str and bytes the objects under ``root`` hold: its data, not its class's module."""
    texts: list[str] = []
    seen: set[int] = set()
    stack = [root]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, bytes):
            texts.append(item.decode("latin-1"))
        elif not isinstance(item, (int, float, type(None), type, *_CODE)):
            stack.extend(gc.get_referents(item))
    return texts


def test_what_the_journal_keeps_holds_no_secret_before_it_is_read() -> None:
    # Entries are built when read; what is kept until then is masked and digested already.
    secret = "sk-live-0123456789abcdef"
    journal = Journal()
    record(
        journal,
        method="GET",
        path="/e",
        args=[("n", "id-1"), ("api_key", secret)],
        authorization=f"Bearer {secret}",
        status=200,
        outcome="verdict",
        headers=[(b"Authorization", f"Bearer {secret}".encode()), (b"X-Api-Key", secret.encode())],
    )
    held = _held_texts(journal)
    assert "id-1" in held  # the walk reaches what is kept
    assert not [text for text in held if secret in text]
    entry = journal.entries()[0]
    assert entry.sent("h", "x-api-key", secret)  # ... and the matchers still tell it


def test_an_entry_of_a_request_from_before_a_clear_is_never_read() -> None:
    journal = Journal()
    before = journal.generation
    journal.clear()
    _record(journal, generation=before)  # its request arrived before the clear
    assert len(journal) == 0
    assert journal.entries() == []
    _record(journal, generation=journal.generation)
    assert len(journal) == 1
    assert len(journal.entries()) == 1


def test_an_entry_shows_every_field_of_its_request_its_answer_and_its_body() -> None:
    assert set(JSON_FIELDS) == set(EXPECTED)
    assert list(ENTRY.to_json()) == list(JSON_FIELDS)
    assert ENTRY.to_json() == EXPECTED


def test_what_an_entry_shows_is_a_copy_its_reader_may_edit() -> None:
    shown = ENTRY.to_json()
    shown["query"]["q"].append("edited")
    shown["query"]["new"] = ["x"]
    assert ENTRY.query == {"q": ["…4321"]}
    assert ENTRY.to_json() == EXPECTED


def test_an_entry_replaced_by_shown_names_changes_only_those() -> None:
    changed = ENTRY.replace(status=503, verdict="disputed", path="/x", latency_ms=1.5)
    assert (changed.status, changed.verdict, changed.path, changed.latency_ms) == (
        503,
        "disputed",
        "/x",
        1.5,
    )
    assert changed.to_json() == {
        **EXPECTED,
        "status": 503,
        "verdict": "disputed",
        "path": "/x",
        "latency_ms": 1.5,
    }
    with pytest.raises(TypeError, match=r"unexpected field names: \['verdit'\]"):
        ENTRY.replace(verdit="refused")
    with pytest.raises(TypeError, match=r"unexpected field names: \['untrusted'\]"):
        ENTRY.replace(untrusted=True)  # which ring an entry goes to is make_entry's rule
