"""The benchmarks' own reading of wrk's output: a misread number would be a wrong table."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time

import pytest

from benchmarks.bench_serve import _ms, _percentile, cpu_seconds, requests_of, tree

WRK_OUT = """\
Running 2s test @ http://127.0.0.1:8000/e?n=demo-contradicted
  2 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   523.42us  278.24us   4.19ms   80.50%
    Req/Sec    19.97k     1.06k   22.82k    99.00%
  Latency Distribution
     50%  484.00us
     75%  668.00us
     90%    0.86ms
     99%    1.25ms
  79164 requests in 2.00s, 108.21MB read
Requests/sec:  39582.58
"""


@pytest.mark.parametrize(
    ("text", "ms"),
    [("484.00us", 0.484), ("1.25ms", 1.25), ("2.00s", 2000.0), ("1.01m", 60600.0)],
)
def test_wrk_durations_read_in_milliseconds(text: str, ms: float) -> None:
    assert _ms(text) == pytest.approx(ms)


def test_an_unreadable_duration_is_nan_not_a_number_made_up() -> None:
    assert math.isnan(_ms("-nanus"))


def test_percentiles_come_from_the_distribution_not_a_stdev_column() -> None:
    # "80.50%" and "99.00%" end other lines: a loose pattern read "Req/Sec" as the p50
    assert _percentile(WRK_OUT, 50) == pytest.approx(0.484)
    assert _percentile(WRK_OUT, 99) == pytest.approx(1.25)
    assert math.isnan(_percentile(WRK_OUT, 95))  # not printed: said, not guessed


def test_the_requests_wrk_completed_are_read_not_its_rate() -> None:
    assert requests_of(WRK_OUT) == 79164


def test_cpu_is_counted_for_a_process_and_its_children() -> None:
    # --workers: the parent's CPU and its workers'; a child that burns CPU must show
    # It burns more than the 0.3 s looked for: /proc's ticks are sampled and may show less than
    # the burn's own clock (with a burn of exactly 0.3 s, a run under load waited here until the
    # child's sleep ended: 30 s).
    burn = "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass"
    child = subprocess.Popen([sys.executable, "-c", f"{burn}\nimport time; time.sleep(30)"])
    try:
        found = tree(os.getpid())
        assert found[0] == os.getpid()
        assert child.pid in found
        while cpu_seconds([child.pid]) < 0.3:  # it burns, then sleeps: bounded by its burn
            assert child.poll() is None
            time.sleep(0.01)  # not a busy wait: the child it waits for needs the CPU
        own = cpu_seconds([os.getpid()])  # read first: this process moves on meanwhile
        assert cpu_seconds(found) - own >= 0.29  # in clock ticks of 10 ms
    finally:
        child.kill()
        child.wait()


def test_callgrind_counts_are_read_from_its_refs_line() -> None:
    from benchmarks.bench_instructions import refs_of

    said = "==12== Collected : 106289\n==12==\n==12== I   refs:      1,844,262,484\n"
    assert refs_of(said) == 1_844_262_484
    with pytest.raises(ValueError, match="no 'I refs' line"):
        refs_of("==12== valgrind: failed to start tool 'callgrind'\n")
