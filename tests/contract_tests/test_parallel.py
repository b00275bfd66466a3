"""Parallel runs that share one key: answers fetched once per run, a pace split across workers.

The suite runs with pytest-xdist against a local service that counts what it was sent.
"""

from __future__ import annotations

import time

import pytest

from tests.contract_tests.servers import CONFORMING, LIMITED, serve
from verdict_contract.contract_tests.maxrate import Pace


@pytest.mark.parametrize(
    ("workers", "per_session"),
    [([], 1), (["-n", "2", "--dist", "each"], 1)],  # each: both workers run the check
)
def test_each_session_is_fetched_once_per_run(
    pytester: pytest.Pytester, workers: list[str], per_session: int
) -> None:
    with serve(CONFORMING["extra fields"]) as running:
        result = pytester.runpytest_subprocess(
            *running.suite_args("-k", "test_success_is_a_json_object", *workers)
        )
        assert running.traffic is not None
        calls = {n: running.traffic.calls[n] for n in running.session_ids}
    assert result.ret == 0, result.stdout.str()
    assert result.parseoutcomes()["passed"] == (2 if workers else 1)  # the check ran twice ...
    assert calls == dict.fromkeys(running.session_ids, per_session)  # ... the fetch once


def test_the_max_rate_keeps_two_workers_under_the_limit(pytester: pytest.Pytester) -> None:
    """10 requests per second for the key: paced to 8/1 across 2 workers, no 429 comes.

    The margin is for the network: requests sent 0.25 s apart may arrive a little closer.
    """
    with serve(LIMITED) as running:
        result = pytester.runpytest_subprocess(
            *running.suite_args("-n", "2", "--verdict-max-rate", "8/1")
        )
        assert running.traffic is not None
        refused = running.traffic.statuses[429]
    assert result.ret == 0, result.stdout.str()
    assert refused == 0


def test_without_a_pace_the_same_run_meets_the_limit(pytester: pytest.Pytester) -> None:
    """The counterpart of the test above: the limit is real, and found through 429s."""
    with serve(LIMITED) as running:
        result = pytester.runpytest_subprocess(*running.suite_args())
        assert running.traffic is not None
        refused = running.traffic.statuses[429]
    assert result.ret == 0, result.stdout.str()  # waited out: throttling is no breach
    assert refused > 0


def test_a_pace_is_split_across_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    paced = Pace.of(10, 1.0, workers=2)
    assert paced.interval == pytest.approx(0.2)  # 10/s for the run: 5/s for each of 2
    assert paced.wait() == 0  # the first request goes at once
    paced.wait()
    paced.wait()
    assert len(slept) == 2
    assert 0 < slept[0] <= 0.2
    assert 0.2 < slept[1] <= 0.4
    assert slept[1] > slept[0]  # the third waits for the second's turn too


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("ten/1", "is not of the form REQUESTS/SECONDS"),
        ("0/1", "N must be above 0"),
        ("5/0", "the window must be a number of seconds above 0"),
        ("5/-1", "the window must be a number of seconds above 0"),
        # The mock's --rate-limit refuses a bare count too: one reader, one answer.
        ("10", "needs its window: REQUESTS/SECONDS, e.g. 10/1*"),
    ],
)
def test_a_bad_max_rate_is_one_line(pytester: pytest.Pytester, value: str, said: str) -> None:
    result = pytester.runpytest_inprocess(
        "--pyargs", "verdict_contract.contract_tests", "--verdict-max-rate", value
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --verdict-max-rate*{value!r}*{said}*"])


def test_a_pytest_started_from_a_worker_shares_nothing_with_its_siblings(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """xdist's variables are inherited by a pytest started inside a worker: it is no worker."""
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "one-outer-run")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    for variant in (CONFORMING["extra fields"], CONFORMING["every verdict kind"]):
        with serve(variant) as running:
            result = pytester.runpytest_subprocess(*running.suite_args())
            assert running.traffic is not None
            fetched = all(running.traffic.calls[n] for n in running.session_ids)
        assert result.ret == 0, result.stdout.str()
        assert fetched  # its own sessions, not the sibling's
        given = len(running.session_ids)
        result.stdout.fnmatch_lines([f"sessions:*checked {given} of {given}"])
