"""The shuffle machine: what users do with a shuffle on one cluster, drawn by hypothesis.

Programs of shuffles in any order, two at once, rejected calls, shuffles cancelled mid-
flight, and shuffles during which the world moves (a worker killed, the scheduler stalled,
spill files removed or truncated), over inputs carrying everything a Table holds
(``rich_tables``). Every shuffle, whatever its outcome, is judged against the whole of
SPEC.md section 14; after every step nothing may be left behind (14.11).

One cluster serves a whole run (``World``, set on the class by ``run_shuffle_machine``):
starting one per example would cost more than the examples. A fault that never fired is
counted ``not exercised`` in ``World.faults``, never as a pass.

The parts: ``rules`` (the machine), ``world`` (what a run shares, and the judging that
tallies in it), ``arguments`` (the rules' strategies and the cases made from their draws),
``schedule`` (which rule may run next), ``world_moves`` (a shuffle with a fault at a phase).
"""

from __future__ import annotations

from .rules import ShuffleMachine, run_shuffle_machine
from .world import ClusterUnresponsive, NannyNeverRestarted, World

__all__ = [
    "ClusterUnresponsive",
    "NannyNeverRestarted",
    "ShuffleMachine",
    "World",
    "run_shuffle_machine",
]
