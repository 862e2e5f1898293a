"""Scheduler plugins that act when a shuffle reaches a phase: kill the worker holding (or
sent) a task of the phase, once or in turn, or call an action once. Each records in
``fired`` what it did, so that a test can tell a fault that happened from one that never did.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin


@dataclass
class PhaseKiller(SchedulerPlugin):
    """Scheduler plugin: SIGKILL the worker holding the ``n``-th task of ``phase`` to finish
    (the first by default), as it finishes.

    A finished task, not one just sent: a worker killed as it is sent the shuffle's first
    task may not have joined the shuffle yet, so its loss costs nothing, and a shuffle that
    gives up at the first loss would pass. ``when="processing"`` kills the worker the first
    task of ``phase`` is sent to instead, as it is sent: for a phase every worker has joined
    before (the barrier), where the loss lands while the task runs on the dead worker.
    ``fired`` records (key, worker, pid) once the signal was sent, so that a test can tell a
    fault that happened from one that never did.
    """

    phase: str
    phase_of: Callable[[str], str | None]
    pids: dict[str, int]
    fired: list[tuple[str, str, int]] = field(default_factory=list)
    scheduler: Any = None
    n: int = 1
    done: set[str] = field(default_factory=set)
    name: str = "conformance-phase-killer"
    victim: str | None = None  # kill this worker instead of the task's holder
    when: str = "memory"  # or "processing": as the task is sent, the worker it is sent to

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if self.fired or finish != self.when or self.phase_of(str(key)) != self.phase:
            return
        self.done.add(str(key))
        ts = self.scheduler.tasks.get(key)
        if self.when == "processing":
            target = self.victim or (ts.processing_on.address if ts is not None and ts.processing_on else None)
            self._kill(key, target)
        elif self.victim is not None:
            self._kill(key, self.victim)
        elif len(self.done) >= self.n and ts is not None and ts.who_has:
            self._kill(key, min(ws.address for ws in ts.who_has))

    def _kill(self, key: Any, worker: str | None) -> None:
        pid = self.pids.get(worker)
        if pid is None:
            return
        os.kill(pid, signal.SIGKILL)
        self.fired.append((str(key), worker, pid))


@dataclass
class RepeatedKiller(PhaseKiller):
    """Scheduler plugin: SIGKILL the worker that finishes the first task of ``phase``, then,
    once the scheduler has removed it, the next worker (of those in ``pids``) to finish a
    task of ``phase``: ``times`` kills, each in the run the one before started."""

    times: int = 2
    removed: set[str] = field(default_factory=set)
    name: str = "conformance-repeated-killer"

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if len(self.fired) >= self.times or finish != "memory" or self.phase_of(str(key)) != self.phase:
            return
        if self.fired and self.fired[-1][1] not in self.removed:
            return  # the last kill is not through yet: the next must fall in the next run
        ts = self.scheduler.tasks.get(key)
        killed = {w for _k, w, _p in self.fired}
        for ws in sorted(ts.who_has or (), key=lambda ws: ws.address) if ts is not None else ():
            if ws.address in self.pids and ws.address not in killed:
                self._kill(key, ws.address)
                return

    def remove_worker(self, scheduler: Any, worker: str, **kwargs: Any) -> None:
        self.removed.add(worker)


@dataclass
class PhaseAction(SchedulerPlugin):
    """Scheduler plugin: call ``action()`` once, when the first task of ``phase`` is sent to
    a worker; ``fired`` holds what it returned (a count of what it did)."""

    phase: str
    phase_of: Callable[[str], str | None]
    action: Callable[[], int]
    fired: list[int] = field(default_factory=list)
    name: str = "conformance-phase-action"

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if not self.fired and finish == "processing" and self.phase_of(str(key)) == self.phase:
            self.fired.append(self.action())
