"""mockserver.ratelimit: parsing the limit and counting exactly, per key and under threads."""

from __future__ import annotations

import pytest

from tests.helpers import FakeClock, run_threads
from verdict_contract.core.rates import RateLimit
from verdict_contract.mockserver.store.ratelimit import RateLimiter

# --- RateLimit.parse --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("600/60", RateLimit(600, 60.0)),
        ("1/0.5", RateLimit(1, 0.5)),
        (" 10 / 2 ", RateLimit(10, 2.0)),
        ("0/60", RateLimit(0, 60.0)),
        ("off", RateLimit(0, 1.0)),
        ("OFF", RateLimit(0, 1.0)),
        ("none", RateLimit(0, 1.0)),
        ("0", RateLimit(0, 1.0)),
    ],
)
def test_parse_accepts(text: str, expected: RateLimit) -> None:
    assert RateLimit.parse(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "is not of the form REQUESTS/SECONDS"),
        ("fast", "is not of the form REQUESTS/SECONDS"),
        ("1.5/60", "is not of the form REQUESTS/SECONDS"),
        ("10/minute", "is not of the form REQUESTS/SECONDS"),
        ("/60", "is not of the form REQUESTS/SECONDS"),
        ("-1/60", "REQUESTS must be 0 or more"),
        ("10/0", "the window must be a number of seconds above 0"),
        ("10/-5", "the window must be a number of seconds above 0"),
        ("10/inf", "the window must be a number of seconds above 0"),
        ("10/nan", "the window must be a number of seconds above 0"),
        ("10", "needs its window: REQUESTS/SECONDS, e.g. 10/1 for 10 a second or 10/60"),
        ("25/", "needs its window: REQUESTS/SECONDS, e.g. 25/1"),
    ],
)
def test_parse_refuses(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="rate limit") as caught:
        RateLimit.parse(text)
    assert message in str(caught.value)
    assert repr(text) in str(caught.value)


@pytest.mark.parametrize(
    ("limit", "text"),
    [(RateLimit(600, 60.0), "600/60"), (RateLimit(5, 0.5), "5/0.5"), (RateLimit(0, 1.0), "off")],
)
def test_str_round_trips(limit: RateLimit, text: str) -> None:
    assert str(limit) == text
    assert RateLimit.parse(text) == limit


# --- RateLimiter ------------------------------------------------------------------------------


def test_budget_is_admitted_then_refused_with_the_wait() -> None:
    clock = FakeClock()
    limiter = RateLimiter(RateLimit(3, 10.0), clock=clock)
    assert [limiter.admit("k") for _ in range(3)] == [None, None, None]
    assert limiter.admit("k") == pytest.approx(10.0)
    clock.advance(4)
    assert limiter.admit("k") == pytest.approx(6.0)
    clock.advance(5.5)
    assert limiter.admit("k") == pytest.approx(0.5)


def test_refused_requests_do_not_extend_the_window() -> None:
    clock = FakeClock()
    limiter = RateLimiter(RateLimit(1, 10.0), clock=clock)
    assert limiter.admit("k") is None
    for _ in range(19):
        clock.advance(0.5)
        assert limiter.admit("k") is not None
    clock.advance(0.5)  # 10 s after the window opened
    assert limiter.admit("k") is None


def test_window_reset_restores_the_whole_budget() -> None:
    clock = FakeClock()
    limiter = RateLimiter(RateLimit(2, 60.0), clock=clock)
    assert limiter.admit("k") is None
    assert limiter.admit("k") is None
    clock.advance(59.9)
    assert limiter.admit("k") == pytest.approx(0.1)
    clock.advance(0.1)
    assert limiter.admit("k") is None
    assert limiter.admit("k") is None
    assert limiter.admit("k") == pytest.approx(60.0)


def test_keys_are_counted_separately() -> None:
    clock = FakeClock()
    limiter = RateLimiter(RateLimit(2, 60.0), clock=clock)
    assert limiter.admit("a") is None
    assert limiter.admit("a") is None
    assert limiter.admit("a") is not None
    assert limiter.admit("b") is None
    assert limiter.admit("b") is None
    assert limiter.admit("b") is not None


def test_off_admits_everything() -> None:
    clock = FakeClock()
    limiter = RateLimiter(RateLimit.parse("off"), clock=clock)
    assert all(limiter.admit("k") is None for _ in range(5000))
    limited = RateLimiter(RateLimit(1, 60.0), clock=clock)
    assert limited.admit("k") is None
    assert limited.admit("k") is not None


def test_reset_forgets_counts_and_can_change_the_limit() -> None:
    clock = FakeClock()
    limiter = RateLimiter(RateLimit(1, 60.0), clock=clock)
    assert limiter.admit("k") is None
    assert limiter.admit("k") is not None
    limiter.reset()
    assert limiter.admit("k") is None
    assert limiter.admit("k") is not None
    limiter.reset(RateLimit(3, 60.0))
    assert limiter.limit == RateLimit(3, 60.0)
    assert [limiter.admit("k") for _ in range(4)][:3] == [None, None, None]
    assert limiter.admit("k") is not None


def test_exact_counting_under_threads() -> None:
    limiter = RateLimiter(RateLimit(3000, 3600.0), clock=FakeClock())
    admitted = [0] * 16
    refused = [0] * 16

    def work(index: int) -> None:
        for _ in range(500):
            if limiter.admit("shared") is None:
                admitted[index] += 1
            else:
                refused[index] += 1

    run_threads(16, work)
    assert sum(admitted) == 3000
    assert sum(refused) == 16 * 500 - 3000


def test_exact_counting_under_threads_per_key() -> None:
    limiter = RateLimiter(RateLimit(100, 3600.0), clock=FakeClock())
    admitted: dict[int, int] = {}

    def work(index: int) -> None:
        key = f"key-{index % 4}"
        admitted[index] = sum(limiter.admit(key) is None for _ in range(60))

    run_threads(16, work)  # 4 threads per key, 240 attempts against a budget of 100
    for key_index in range(4):
        assert sum(admitted[i] for i in range(key_index, 16, 4)) == 100
