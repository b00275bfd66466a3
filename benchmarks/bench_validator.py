"""Validator throughput: verdicts validated per second on one core, against a baseline.

Run: ``python benchmarks/bench_validator.py`` (add ``--seconds 5`` for steadier numbers).

The baseline, measured in the same run, is what a consumer would write without this library:
a jsonschema ``Draft202012Validator`` over the schema file. The library adds the rule registry
on top, yet answers faster because a valid body takes the compiled fastjsonschema path.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from jsonschema import Draft202012Validator

from verdict_contract import validate_verdict
from verdict_contract.core.resources import example_verdict, verdict_schema

TARGET_PER_SECOND = 20_000

TYPICAL = example_verdict()  # two composite signals from two families


def rate(work: Callable[[], object], seconds: float) -> float:
    """Calls per second of ``work`` over about ``seconds`` (bounded in time and count)."""
    work()  # warm caches: compiled validators, schema file
    calls, start = 0, time.perf_counter()
    deadline = start + seconds
    while calls < 10_000_000:
        for _ in range(200):
            work()
        calls += 200
        if time.perf_counter() >= deadline:
            break
    return calls / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    seconds = parser.parse_args().seconds
    assert validate_verdict(TYPICAL) == [], "the benchmark body must be valid"
    baseline_validator = Draft202012Validator(verdict_schema())
    baseline = rate(lambda: baseline_validator.is_valid(TYPICAL), seconds)
    ours = rate(lambda: validate_verdict(TYPICAL), seconds)
    strict = rate(lambda: validate_verdict(TYPICAL, strict=True), seconds)
    print(f"{'measurement':44} {'per second':>12} {'vs baseline':>12}")
    for name, value in [
        ("baseline: jsonschema Draft202012Validator", baseline),
        ("validate_verdict (schema + rules)", ours),
        ("validate_verdict(strict=True)", strict),
    ]:
        print(f"{name:44} {value:12,.0f} {value / baseline:11.2f}x")
    verdict = "meets" if ours >= TARGET_PER_SECOND else "MISSES"
    print(
        f"target {TARGET_PER_SECOND:,}/s on one core: {verdict} ({ours / TARGET_PER_SECOND:.2f}x)"
    )


if __name__ == "__main__":
    main()
