"""mockserver.coverage, its habits: client habits read from a journal, on the mock's clock."""

from __future__ import annotations

from tests.mockserver.entries import entry as made_entry
from verdict_contract.mockserver.coverage import habits, on_mock_clock
from verdict_contract.mockserver.state import ClockMove
from verdict_contract.mockserver.store.journal import JournalEntry

KEY = "habits-key-000123456789"
SESSION = "session-abcdef-0001"


def entry(at: float, status: int = 200, n: str = SESSION, **changes: object) -> JournalEntry:
    made = made_entry(
        method="GET",
        path="/e",
        args=[("n", n)],
        authorization=f"Bearer {KEY}",
        status=status,
        outcome="verdict" if status == 200 else "x",
        is_key=lambda v: v == KEY,
    )
    verdict = "refused" if status == 200 else None
    return made.replace(time=at, verdict=verdict, **changes)


def ids(found: list) -> list[str]:  # type: ignore[type-arg]
    return [h.id for h in found]


def test_refetch_after_a_200_not_after_a_429() -> None:
    assert ids(habits([entry(0), entry(1)])) == ["refetch"]
    assert ids(habits([entry(0, 429), entry(1)])) == []
    assert ids(habits([entry(0), entry(1, n="another-session-01")])) == []


def test_refetch_names_the_session_masked() -> None:
    (habit,) = habits([entry(0), entry(1)])
    assert SESSION not in habit.session + habit.detail
    assert habit.session == "…0001"


def test_early_retry_reads_the_mocks_clock() -> None:
    limited = entry(100.0, 429, retry_after="30")
    assert ids(habits([limited, entry(110.0, 429)])) == ["early_retry"]
    assert ids(habits([limited, entry(131.0, 429)])) == []
    moved = [ClockMove(105.0, 30.0)]  # advance(30) between the two
    assert ids(habits([limited, entry(110.0, 429)], moves=moved)) == []
    assert on_mock_clock(110.0, moved) == 140.0


def test_early_retry_reads_an_http_date() -> None:
    limited = entry(100.0, 429, retry_after="Tue, 01 Jan 2030 00:00:00 GMT")
    assert ids(habits([limited, entry(110.0, 429)])) == ["early_retry"]
    assert ids(habits([entry(100.0, 429), entry(101.0, 429)])) == []  # no Retry-After


def test_a_refused_key_sent_again() -> None:
    assert ids(habits([entry(0, 401), entry(1, 401)])) == ["retry_after_401"]
    keyless = [entry(0, 401, authorization=None), entry(1, 401, authorization=None)]
    assert ids(habits(keyless)) == []


def test_a_key_in_the_query_or_the_path() -> None:
    in_query = made_entry(
        method="GET",
        path="/e",
        args=[("n", SESSION), ("api_key", KEY)],
        authorization=None,
        status=401,
        outcome="unauthorized",
        is_key=lambda v: v == KEY,
    )
    assert ids(habits([in_query], keys=[KEY])) == ["key_outside_header"]
    assert ids(habits([in_query], keys=["another-key-0000000"])) == []
    assert ids(habits([entry(0)], keys=[KEY])) == []
