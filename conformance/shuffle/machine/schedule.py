"""Which of the shuffle machine's rules may run next: a fair schedule over the rules that
apply, and the bookkeeping every rule does (``step``).

A cluster makes examples dear (the ci profile affords 2 examples of 8 steps), and left to
itself a derandomized run of 3 examples of 8 steps never drew ``shuffle_again``; with the
schedule (``fair``) every example of a few steps meets every rule.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING

from hypothesis.stateful import precondition

from .world import healed

if TYPE_CHECKING:
    from .rules import ShuffleMachine


def step(fn):
    """A rule: counted, timed, and until the invariant after it passes, not known clean. It
    starts on a whole cluster: a worker that left it (one the suite did not kill, or whose
    nanny died with it) and is not back within HEAL s is the environment's failure, raised
    here once, not a minute's wait in every later load (CI's conformance step, 2026-12-07)."""

    @functools.wraps(fn)
    def counted(self, *args, **kwargs):
        healed(self.cluster.client, self.cluster.env.n_workers, what="a worker that left the cluster")
        self.clean = False
        self.counts[fn.__name__] += 1
        start = time.perf_counter()
        try:
            return fn(self, *args, **kwargs)
        finally:
            self.world.seconds[fn.__name__] += time.perf_counter() - start

    return counted


def _always(m: ShuffleMachine) -> bool:
    return True


def _holds_inputs(m: ShuffleMachine) -> bool:
    """Inputs kept from an earlier shuffle are on the cluster."""
    return bool(m.loaded)


def _checks(m: ShuffleMachine) -> bool:
    return m.world.has("shuffle.checks")


def _phases_seen(m: ShuffleMachine) -> bool:
    """The adapter names a task's phase, so a fault can be timed to one."""
    return m.world.phase_of is not None


def _spills_by_phase(m: ShuffleMachine) -> bool:
    return m.world.phase_of is not None and m.world.has("shuffle.spill")


# When each rule can run (a rule runs only while no other that can has run fewer times in
# this example).
APPLIES = {
    "shuffle": _always,
    "shuffle_again": _holds_inputs,
    "two_at_once": _always,
    "rejected": _checks,
    "release_inputs": _holds_inputs,
    "kill_a_worker": _phases_seen,
    "cancel_mid_flight": _phases_seen,
    "stall_the_scheduler": _phases_seen,
    "remove_spill_files": _spills_by_phase,
    "truncate_spill_files": _spills_by_phase,
}


def fair(name: str):
    """The precondition of rule ``name``: it applies, and no rule that applies has run fewer
    times in this example."""

    def fair(m: ShuffleMachine) -> bool:
        if not APPLIES[name](m):
            return False
        return m.counts[name] <= min(m.counts[n] for n, can in APPLIES.items() if can(m))

    fair.__name__ = f"fair_{name}"
    return precondition(fair)
