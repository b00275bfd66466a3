"""What throttling cost a run: answers of 429 met, seconds waited on them, of what budget.

Each process of a run (each xdist worker) has its own client and its own wait budget. After
every check it records what it has met so far; the controller keeps each process's last
record and adds them up, so the summary, the report and JUnit say how close a green run came
to ending throttled. The rate-limit probe's 429s are not counted (they are what it looks
for); the 429s other checks meet after it are.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

THROTTLING = "verdict_throttling"
"""The property a check carries: its process's throttling so far, as JSON."""


@dataclass(frozen=True)
class Throttling:
    """One process's throttling so far."""

    process: str
    answered_429: int  # answers of 429 waited out or given up on
    waited: float  # seconds slept on them (Retry-After, or backoff)
    budget: float  # the process's --verdict-wait-budget
    paced: float  # seconds slept by --verdict-max-rate before calls

    def dumps(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def loads(cls, text: str) -> Throttling:
        data = json.loads(text)
        return cls(
            process=str(data["process"]),
            answered_429=int(data["answered_429"]),
            waited=float(data["waited"]),
            budget=float(data["budget"]),
            paced=float(data["paced"]),
        )


@dataclass
class RunThrottling:
    """The run's throttling: the last record of each process, added up."""

    processes: dict[str, Throttling] = field(default_factory=dict)

    def add(self, record: Throttling) -> None:
        known = self.processes.get(record.process)
        # Counts only grow within a process: the larger record is the later one.
        if known is None or (record.answered_429, record.waited, record.paced) >= (
            known.answered_429,
            known.waited,
            known.paced,
        ):
            self.processes[record.process] = record

    @property
    def answered_429(self) -> int:
        return sum(p.answered_429 for p in self.processes.values())

    @property
    def waited(self) -> float:
        return sum(p.waited for p in self.processes.values())

    @property
    def paced(self) -> float:
        return sum(p.paced for p in self.processes.values())

    def budget(self) -> str:
        """The wait budget as the run had it: one per process."""
        each = "/".join(f"{b:g}" for b in sorted({p.budget for p in self.processes.values()}))
        return f"{each} s" if len(self.processes) == 1 else f"{each} s per process"

    def closest(self) -> float:
        """The largest share of its wait budget one process spent (0 to 1)."""
        return max((p.waited / p.budget for p in self.processes.values() if p.budget), default=0)

    def line(self) -> str | None:
        """``31 answer(s) of 429, 61.0 s waited on them of the 60 s wait budget (…)``."""
        if not self.processes:
            return None
        count = len(self.processes)
        spent = f"{self.closest():.0%} spent" + (
            "" if count == 1 else f" at most, by one of {count} processes"
        )
        text = (
            f"{self.answered_429} answer(s) of 429, {self.waited:.1f} s waited on them of the "
            f"{self.budget()} wait budget ({spent})"
        )
        if self.paced:
            text += f"; {self.paced:.1f} s paced by --verdict-max-rate"
        return text

    def properties(self) -> list[tuple[str, str]]:
        """The run's throttling for the JUnit test suite, one fact per property."""
        if not self.processes:
            return []
        return [
            ("verdict_throttling_429s", str(self.answered_429)),
            ("verdict_throttling_waited_seconds", f"{self.waited:.1f}"),
            ("verdict_throttling_wait_budget", self.budget()),
            ("verdict_throttling_paced_seconds", f"{self.paced:.1f}"),
        ]
