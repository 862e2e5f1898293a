"""What a run found: violations, figures, samples and fault outcomes, kept as it goes, so an
interrupted run still has a partial report to write."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Sample:
    """One reading of one worker: bytes on the device, in host memory and on disk, RSS, what
    no ledger tracks (RSS - host tier - device bytes held in RAM) and Arrow's pool."""

    t: float
    worker: str
    device: int | None = None
    host: int | None = None
    disk: int | None = None
    rss: int | None = None
    untracked: int | None = None
    arrow: int | None = None


@dataclass
class Outcome:
    """How one implementation came out of one fault case."""

    impl: str
    case: str
    status: str  # correct | error | violation | not exercised | n/a | unavailable
    detail: str = ""
    seconds: float | None = None


@dataclass
class RunRecord:
    scenario: str
    settings: dict[str, Any]
    started: float = field(default_factory=time.time)
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    limits: dict[str, int | None] = field(default_factory=dict)
    outcomes: list[Outcome] = field(default_factory=list)
    marks: list[tuple[float, str]] = field(default_factory=list)
    impls: dict[str, dict[str, Any]] = field(default_factory=dict)
    worker_pids: set[int] = field(default_factory=set)
    interrupted: bool = False
    error: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def now(self) -> float:
        return time.time() - self.started

    def violate(self, what: str) -> None:
        with self._lock:
            self.violations.append(what)

    def note(self, what: str) -> None:
        with self._lock:
            self.notes.append(what)

    def mark(self, label: str) -> None:
        """A labelled moment on the timeline (a round, a fault)."""
        with self._lock:
            self.marks.append((self.now(), label))

    def add_samples(self, samples: list[Sample]) -> None:
        with self._lock:
            self.samples.extend(samples)

    def outcome(self, o: Outcome, judged: bool) -> None:
        """Record a fault outcome; a judged implementation's violation fails the run."""
        with self._lock:
            self.outcomes.append(o)
        if judged and o.status == "violation":
            self.violate(f"{o.case} [{o.impl}]: {o.detail}")

    @property
    def ok(self) -> bool:
        return not self.violations and self.error is None and not self.interrupted
