"""What one run of the shuffle machine shares across its examples: the cluster, the tallies,
and the judging of every shuffle that returned (which adds to them)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import distributed

from ... import EnvironmentFailure
from .. import faults as faults
from ..judge import Landing, field_metadata_kept, outcome_problems
from ..rich_tables import describe
from ..tables import ShuffleCase
from ..workers import poll_workers
from .hang_report import hang_report

HEAL = 60.0  # seconds for a killed worker's nanny to bring it back
# The suite's own bound on its wait, whose every scheduler RPC is bounded too: distributed's
# Cluster.wait_for_workers(timeout=60), used here before, once sat 12 minutes on an RPC that
# never answered (a README run, 2026-12-07).
WAIT_BOUND = HEAL + 30.0
POLL = 0.1


class NannyNeverRestarted(EnvironmentFailure):
    """The environment, not the shuffle: distributed's nanny did not bring a SIGKILLed worker
    back (about 1 in 40 kills). The test runs once more (conformance.runner.environment), and
    ci/flake_report.py names it an environment failure."""


class ClusterUnresponsive(EnvironmentFailure):
    """The wait for the workers did not end at all: a scheduler RPC, not the shuffle, hung.
    Rerun like NannyNeverRestarted."""


def healed(
    client: Any, n_workers: int, killed: Collection[str] = (), *, what: str = "the killed worker"
) -> None:
    """Wait until the scheduler has let the ``killed`` workers go and lists ``n_workers`` again
    (its nanny started a new one); NannyNeverRestarted if not within HEAL s,
    ClusterUnresponsive if the wait itself never ends (left behind, its stacks in the message).

    Both, never a count alone: right after a SIGKILL the scheduler may still list the dead
    worker, and a count of ``n_workers`` then said "healed" about a cluster whose nanny never
    restarted it; every later load waited a minute for the missing worker (CI's conformance
    step, 2026-12-07: SHUF-STATE-001 slowed by minutes, yet green)."""
    outcome: list[BaseException | None] = []

    def wait() -> None:
        try:
            _back(client, n_workers, killed, HEAL)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - raised again on the test's thread
            outcome.append(exc)

    waiter = threading.Thread(target=wait, name="conformance-healed", daemon=True)
    waiter.start()
    waiter.join(WAIT_BOUND)
    if not outcome:
        raise ClusterUnresponsive(
            f"environment: the wait for {n_workers} workers (timeout={HEAL:.0f}) did not "
            f"return within {WAIT_BOUND:.0f} s after a worker was killed; not the "
            f"implementation's failure: rerun\n{hang_report(client, waiter)}"
        )
    if isinstance(outcome[0], TimeoutError):
        raise NannyNeverRestarted(
            f"environment: the nanny never restarted {what} ({n_workers} workers "
            f"wanted, not back within {HEAL:.0f} s: {outcome[0]}); not the implementation's "
            "failure: rerun"
        ) from outcome[0]
    if outcome[0] is not None:
        raise outcome[0]


def _back(client: Any, n_workers: int, killed: Collection[str], timeout: float) -> None:
    """Wait until ``killed`` are gone and ``n_workers`` are listed; TimeoutError naming what the
    scheduler last listed."""
    seen, back = poll_workers(client, n_workers, timeout, gone=killed, poll=POLL)
    if back:
        return
    if seen is None:
        raise TimeoutError("the scheduler never answered")
    still = "".join(f"; the killed {w} still among them" for w in sorted(set(killed) & set(seen)))
    raise TimeoutError(f"{len(seen)} listed: {', '.join(seen) or 'none'}{still}")


@dataclass
class World:
    """What one machine run shares across its examples: the cluster and the tallies."""

    cluster: Any
    capabilities: frozenset
    landing: Landing = field(default_factory=Landing)
    faults: Counter = field(default_factory=Counter)  # (fault, "fired" | "not exercised")
    outcomes: Counter = field(default_factory=Counter)  # what the shuffles did
    seconds: Counter = field(default_factory=Counter)  # per rule
    watch: faults.PhaseWatch | None = None

    @property
    def phase_of(self):
        return getattr(self.cluster.adapter, "phase_of", None)

    def has(self, *caps: str) -> bool:
        return set(caps) <= self.capabilities

    def summary(self) -> str:
        done = ", ".join(f"{k} {n}" for k, n in sorted(self.outcomes.items()))
        fired = ", ".join(f"{f} {how} {n}" for (f, how), n in sorted(self.faults.items()))
        spent = ", ".join(f"{k} {v:.0f} s" for k, v in sorted(self.seconds.items()))
        return f"{done}; faults: {fired or 'none drawn'}; {spent}"

    def judge(self, case: ShuffleCase, outputs: Any, what: str) -> None:
        """Everything section 14 says about a shuffle that returned."""
        problems = outcome_problems(case, outputs, self.landing, what)
        assert not problems, f"{what}: " + "; ".join(problems)
        if any(f.metadata for f in case.schema):
            kept = field_metadata_kept(outputs, case.schema)
            self.outcomes["field metadata kept" if kept else "field metadata dropped"] += 1

    def within_budget(self, run: Any, case: ShuffleCase) -> None:
        """Clause 14.2: the measured peak within the budget plus twice the largest partition."""
        if run.peaks is None:
            return
        largest = max([t.nbytes for t in case.tables] + [t.nbytes for t in run.outputs] + [0])
        limit = self.cluster.budget() + 2 * largest
        over = {w: p for w, p in run.peaks.items() if p > limit}
        assert not over, f"14.2: peaks {over} above budget + 2 x {largest:,} = {limit:,}"


@dataclass
class Loaded:
    """A case's inputs, placed on the cluster."""

    case: ShuffleCase
    inputs: Any

    @property
    def keys(self) -> list[str]:
        # futures_of looks into exact lists only: an adapter's list subclass (the dask
        # adapters' Inputs) would hide its futures, and the inputs would read as leftovers
        inputs = list(self.inputs) if isinstance(self.inputs, list) else self.inputs
        return [str(f.key) for f in distributed.futures_of(inputs)]

    def __repr__(self) -> str:
        return f"<inputs on the cluster: {describe(self.case)}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))
