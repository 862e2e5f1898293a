"""What one run of the shuffle machine shares across its examples: the cluster, the tallies,
and the judging of every shuffle that returned (which adds to them)."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import distributed

from ... import EnvironmentFailure
from .. import faults as faults
from ..judge import Landing, field_metadata_kept, outcome_problems
from ..rich_tables import describe
from ..tables import ShuffleCase
from .hang_report import hang_report

HEAL = 60.0  # seconds for a killed worker's nanny to bring it back
# The suite's own bound on distributed's wait, whose timeout once never fired: a README run
# (2026-12-07) sat 12 minutes in Cluster.wait_for_workers(timeout=60), which checks its
# deadline only between scheduler RPCs, one of which never answered.
WAIT_BOUND = HEAL + 30.0


class NannyNeverRestarted(EnvironmentFailure):
    """The environment, not the shuffle: distributed's nanny did not bring a SIGKILLed worker
    back (about 1 in 40 kills). The test runs once more (conformance.runner.environment), and
    ci/flake_report.py names it an environment failure."""


class ClusterUnresponsive(EnvironmentFailure):
    """distributed's own wait for the workers did not return at all, its timeout included: the
    client's scheduler RPC, not the shuffle, hung. Rerun like NannyNeverRestarted."""


def healed(client: Any, n_workers: int) -> None:
    """Wait for the nanny to bring a killed worker back; NannyNeverRestarted if it does not,
    ClusterUnresponsive if distributed's wait itself never returns (it is left behind, and the
    message says what it and the client's loop were waiting on)."""
    outcome: list[BaseException | None] = []

    def wait() -> None:
        try:
            client.wait_for_workers(n_workers, timeout=HEAL)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - raised again on the test's thread
            outcome.append(exc)

    waiter = threading.Thread(target=wait, name="conformance-healed", daemon=True)
    waiter.start()
    waiter.join(WAIT_BOUND)
    if not outcome:
        raise ClusterUnresponsive(
            f"environment: distributed's wait_for_workers({n_workers}, timeout={HEAL:.0f}) did "
            f"not return within {WAIT_BOUND:.0f} s after a worker was killed; not the "
            f"implementation's failure: rerun\n{hang_report(client, waiter)}"
        )
    if isinstance(outcome[0], TimeoutError):
        raise NannyNeverRestarted(
            f"environment: the nanny never restarted the killed worker ({n_workers} workers "
            f"wanted, not back within {HEAL:.0f} s); not the implementation's failure: rerun"
        ) from outcome[0]
    if outcome[0] is not None:
        raise outcome[0]


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
