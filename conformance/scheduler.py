"""A seeded scheduler for the suite's threads: races found by a seed, not by luck.

A hammer started with a short switch interval finds a race only when the operating
system happens to switch threads inside its window; on a loaded machine it can miss a
race it caught the run before. :func:`run_scheduled` runs the threads one at a time
instead. Every Python line any of them executes is a point where a seeded random choice
may hand the turn to another thread, so the same seed gives the same interleaving and
windows a few lines wide are entered often, whatever the implementation (nothing of its
internals is needed: only the interpreter's trace hook).

A thread blocked in C code (a lock another thread holds) executes no lines; after
:data:`STALL_S` without one, the turn passes on, and the blocked thread rejoins the
queue at its next line. That is the only timed step, and only a thread that really
blocks reaches it.
"""

from __future__ import annotations

import gc
import random
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

STALL_S = 0.005  # no line for this long: the thread is blocked in C code (a lock)
_SKIP = {threading.__file__, __file__}  # the scheduler's own machinery is never a switch point


@dataclass
class Schedule:
    """What one scheduled run did: how many switch points, switches and stalls."""

    seed: int
    points: int = 0
    switches: int = 0
    stalls: int = 0
    errors: list[BaseException] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)


class _Turns:
    """Whose turn it is. Nobody runs until every thread has arrived at its first point.

    A thread waits for its turn on its own baton (a lock the thread whose turn ends
    releases), never inside the scheduler's critical section. That section holds ``_mu``
    with the garbage collector off: a collection there could run a finalizer that takes an
    implementation's lock, held by a thread blocked on ``_mu`` (a lock-order inversion the
    scheduler itself would add).
    """

    def __init__(self, n: int, seed: int, switch_p: float) -> None:
        self.rng = random.Random(seed)
        self.switch_p = switch_p
        self._mu = threading.Lock()
        self._gc = gc.isenabled()
        self._batons = [threading.Lock() for _ in range(n)]
        for baton in self._batons:
            baton.acquire()  # released once per turn handed to its thread
        self.running: int | None = None
        self.waiting: set[int] = set()
        self.done: set[int] = set()
        self.n = n
        self.started = False
        self.stopping = False
        self.last = time.monotonic()
        self.stats = Schedule(seed)

    def _enter(self) -> None:
        self._mu.acquire()
        if self._gc:
            gc.disable()  # nothing between these two allocates: no collection under _mu

    def _exit(self) -> None:
        if self._gc:
            gc.enable()
        self._mu.release()

    def _hand_on(self, me: int | None) -> None:
        """Give the turn to a waiting thread other than ``me`` (none waits: nothing changes)."""
        candidates = sorted(self.waiting - {me})
        if candidates:
            self.running = self.rng.choice(candidates)
            self.waiting.discard(self.running)
            self.stats.switches += 1
            self._batons[self.running].release()

    def point(self, me: int) -> None:
        self._enter()
        try:
            self.last = time.monotonic()
            self.stats.points += 1
            if self.running == me:
                if self.rng.random() >= self.switch_p:
                    return
                self.waiting.add(me)
                self._hand_on(me)
                if self.running == me:  # nobody else is waiting: go on
                    self.waiting.discard(me)
                    return
            else:
                self.waiting.add(me)
                if not self.started and len(self.waiting) + len(self.done) == self.n:
                    self.started = True
                if self.started and self.running is None:
                    self._hand_on(None)
        finally:
            self._exit()
        self._batons[me].acquire()  # until a thread hands this one the turn
        self.last = time.monotonic()

    def finish(self, me: int) -> None:
        self._enter()
        try:
            self.done.add(me)
            self.waiting.discard(me)
            if self.running == me:
                self.running = None
                self._hand_on(None)
        finally:
            self._exit()

    def watch(self) -> None:
        """Pass the turn on when its holder has executed no line for STALL_S.

        Its loop allocates nothing the collector tracks (a sleep and a flag, no Event), so
        no collection, and no finalizer of the implementation's, ever runs on this thread:
        one that blocked here on an implementation's lock would stop every hand-off."""
        while not self.stopping:
            time.sleep(STALL_S / 2)
            self._enter()
            try:
                stalled = time.monotonic() - self.last > STALL_S
                if self.started and self.running is not None and self.waiting and stalled:
                    self.stats.stalls += 1
                    self.running = None
                    self._hand_on(None)
                    self.last = time.monotonic()
            finally:
                self._exit()


def run_scheduled(
    targets: list[Callable[[], None]],
    seed: int,
    *,
    switch_p: float = 0.05,
    deadline: float = 60.0,
) -> Schedule:
    """Run ``targets`` on their own threads, one line at a time under a seeded schedule.

    Returns what happened; exceptions the targets raised are in ``errors`` and threads
    still running at the deadline in ``stuck`` (a deadlock).
    """
    turns = _Turns(len(targets), seed, switch_p)

    def tracer(me: int):
        def local(frame, event, arg):
            if event == "line":
                turns.point(me)
            return local

        def global_(frame, event, arg):
            if frame.f_code.co_filename in _SKIP:
                return None
            return local

        return global_

    def body(me: int, fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                turns.point(me)  # wait for the first turn (untraced: not a switch point)
                sys.settrace(tracer(me))
                fn()
            except BaseException as exc:  # noqa: BLE001 - reported to the caller
                turns.stats.errors.append(exc)
            finally:
                sys.settrace(None)
                turns.finish(me)

        return run

    watcher = threading.Thread(target=turns.watch, daemon=True)
    threads = [
        threading.Thread(target=body(i, fn), daemon=True, name=f"scheduled-{i}")
        for i, fn in enumerate(targets)
    ]
    watcher.start()
    for t in threads:
        t.start()
    end = time.monotonic() + deadline
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    turns.stopping = True
    watcher.join(5.0)  # a daemon: never let it hold the caller
    turns.stats.stuck = [t.name for t in threads if t.is_alive()]
    return turns.stats
