"""The run's outcome as a release gate reads it: passed, failed, incomplete or interrupted.

A run is green only when every session it was given was checked and no check failed. The exit
codes (documented in the README):

- 0 ``PASSED``: every check that ran passed and every given session was checked;
- 1 ``FAILED``: a contract breach, nothing verified at all, an interrupted run, or advisories
  under ``--verdict-fail-on-advisory``;
- 10 ``INCOMPLETE``: no breach, but sessions or checks were left unchecked (throttled), or a
  verdict kind was never seen under ``--verdict-require-every-kind``.
  ``--verdict-allow-partial`` turns unchecked sessions into a pass (not missing kinds).

Other codes are pytest's own (2 interrupted before the suite ran, 4 a
usage error, 5 nothing collected, 6 too many warnings); 10 is clear of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .config import SuiteConfig, flag
from .report import SuiteReport

PASSED = 0
FAILED = 1
INCOMPLETE = 10


@dataclass(frozen=True)
class Gate:
    """The outcome, its exit code, and why (for the summary, the report and JUnit)."""

    outcome: str  # passed, failed, incomplete or interrupted
    exit_code: int
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # said, but not failing the run
    unexplained: bool = False  # no failing check says why: JUnit gets a failing test case

    def lines(self) -> list[str]:
        """The verdict, first line first: ``OUTCOME (exit N): reason``."""
        head = f"{self.outcome.upper()} (exit {self.exit_code})"
        if not self.reasons:
            return [f"{head}: every given session was checked and every check passed", *self.notes]
        return [f"{head}: {self.reasons[0]}", *self.reasons[1:], *self.notes]


def decide(report: SuiteReport, config: SuiteConfig | None, interrupted: str | None) -> Gate:
    """The gate's outcome from what the run recorded."""
    allow_partial = config is not None and config.allow_partial
    failed = report.counted("failed")
    if interrupted is not None:
        return Gate("interrupted", FAILED, [f"the run was interrupted: {interrupted}"], [], True)
    reasons: list[str] = []
    if failed:
        reasons.append(f"{failed} check(s) found a breach of the contract")
    problem = report.unverified()
    if problem:
        reasons.append(problem)
    if report.advisories and config is not None and config.fail_on_advisory:
        reasons.append(
            f"{len(report.advisories)} advisory(ies) and {flag('fail_on_advisory')} was given"
        )
    if reasons:
        return Gate("failed", FAILED, reasons, [], unexplained=not failed)
    incomplete: list[str] = []
    checked, given = report.checked_sessions()
    throttled = report.counted("throttled")
    if checked < given:
        incomplete.append(f"checked {checked} of {given} sessions (the others stayed throttled)")
    if throttled:
        incomplete.append(f"{throttled} check(s) ended throttled, unchecked")
    missing: list[str] = []
    if config is not None and config.require_every_kind and report.kinds_missing():
        missing.append(
            f"verdict kind(s) never seen: {', '.join(report.kinds_missing())} "
            f"({flag('require_every_kind')})"
        )
    if missing or (incomplete and not allow_partial):
        hint = (
            []
            if allow_partial or not incomplete
            else [
                f"pass {flag('allow_partial')} to accept a partial check, or "
                f"{flag('max_rate')} N/SECONDS to stay under the target's rate limit"
            ]
        )
        return Gate("incomplete", INCOMPLETE, [*missing, *incomplete, *hint], [], True)
    notes = [f"partial check accepted ({flag('allow_partial')}): {'; '.join(incomplete)}"]
    return Gate("passed", PASSED, [], notes if incomplete else [])
