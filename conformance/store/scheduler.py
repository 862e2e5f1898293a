"""A seeded scheduler for the suite's threads: races found by a seed, not by luck.

A hammer started with a short switch interval finds a race only when the operating
system happens to switch threads inside its window; on a loaded machine it can miss a
race it caught the run before. :func:`run_scheduled` runs the threads one at a time
instead. Every Python line any of them executes is a point where a seeded random choice
may hand the turn to another thread, so the same seed gives the same interleaving and
windows a few lines wide are entered often, whatever the implementation (nothing of its
internals is needed: only the interpreter's trace hook).

A thread blocked in C code (a lock another thread holds) executes no lines; the turn
then passes on, and the blocked thread rejoins the queue at its next line. Whether it is
blocked is asked of the operating system, not of the clock: its CPU time has not moved for
:data:`QUIET_S` and it sleeps (``S`` in ``/proc/self/task/<tid>/stat``). A thread the
operating system merely descheduled is runnable (``R``), and one waiting for the GIL wakes
every switch interval, so neither is ever taken for blocked, however loaded the machine.
While a thread whose turn was taken away is out of the queue, the running thread settles it
at every line: waits until it is back in the queue or still blocked. So the thread a lock's
release wakes takes that lock and rejoins the queue at the same line of the others every
time (a released lock would otherwise go to whichever thread the machine ran first).

The collector never starts by itself during a run. An automatic collection starts when
allocations on *any* thread of the process cross a threshold, and it runs the finalizers of
whatever garbage is due, from before the run too, on the thread that crossed it: their lines
would be switch points at a place the load decides (a replay under the load of another test
ran a leftover finalizer's 9 lines inside the run, 2026-12-07). So a run starts after a full
collection and runs with automatic collection off. Finalizers still run where a reference
count drops to zero, and a target that wants a collection at some point calls ``gc.collect()``
there: both are lines of the schedule like any other.

Guarantee (Linux, where both probes exist): for a seed, the schedule (every switch point,
every switch, every stall-driven hand-off, recorded in :attr:`Schedule.stall_at`) is the same
on any load, as long as the threads block only on each other (locks, events, queues between
them) and no thread outside the run hands them objects while it runs. A thread that sleeps
or waits on something outside the run (a timer, I/O, a thread not under the scheduler) is
blocked until the world, not a thread, wakes it: where it rejoins is up to the world, and
``stall_at`` tells such runs apart. Elsewhere the probes fall back to the clock (no line for
:data:`QUIET_S`), which holds on an idle machine only.
"""

from __future__ import annotations

import gc
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

QUIET_S = 0.005  # at least: no CPU time for this long (and asleep) is blocked; see _quiet_s
TICK_S = 0.002  # how often the watcher and a settling thread look again
_SKIP = {threading.__file__, __file__}  # the scheduler's own machinery is never a switch point


@dataclass
class Schedule:
    """What one scheduled run did: how many switch points, switches and stalls."""

    seed: int
    points: int = 0
    switches: int = 0
    stalls: int = 0
    stall_at: list[tuple[int, int]] = field(default_factory=list)  # (points so far, thread)
    errors: list[BaseException] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)


def _quiet_s() -> float:
    """A GIL waiter wakes every switch interval: quiet for two of them is not waiting for it."""
    return max(QUIET_S, 2 * sys.getswitchinterval())


class _Probe:
    """What the operating system says of one thread: its CPU time and whether it sleeps.

    Built on the thread itself. ``blocked`` is true once the thread has used no CPU (and
    made no scheduler progress) for ``quiet`` seconds and sleeps now; without the probes
    (not Linux) only the progress and the clock are left. It allocates nothing the collector
    tracks (no tuple, no file object), so no collection starts on the watcher's thread."""

    def __init__(self) -> None:
        self.stat = f"/proc/self/task/{threading.get_native_id()}/stat"
        try:
            self.clock: int | None = time.pthread_getcpuclockid(threading.get_ident())
            time.clock_gettime(self.clock)
            self._state()
        except (AttributeError, OSError):
            self.clock = None
        self.progress = -1
        self.cpu = -1.0
        self.since = time.monotonic()

    def _cpu(self) -> float:
        return time.clock_gettime(self.clock) if self.clock is not None else 0.0

    def _state(self) -> str:
        fd = os.open(self.stat, os.O_RDONLY)
        try:
            raw = os.read(fd, 512)
        finally:
            os.close(fd)
        return chr(raw[raw.rindex(b")") + 2])

    def blocked(self, progress: int, quiet: float) -> bool:
        try:
            cpu = self._cpu()
            asleep = self.clock is None or self._state() == "S"
            steady = self._cpu() == cpu
        except OSError:  # the thread has ended
            return False
        now = time.monotonic()
        if progress != self.progress or cpu != self.cpu or not steady:
            self.progress, self.cpu, self.since = progress, cpu, now
            return False
        return asleep and now - self.since >= quiet


class _Turns:
    """Whose turn it is. Nobody runs until every thread has arrived at its first point.

    A thread waits for its turn on its own baton (a lock the thread whose turn ends
    releases), never inside the scheduler's critical section (``_mu``). No collection starts
    inside that section (the collector is off during a run): its finalizer could take an
    implementation's lock held by a thread blocked on ``_mu``, a lock-order inversion the
    scheduler itself would add.
    """

    def __init__(self, n: int, seed: int, switch_p: float) -> None:
        self.rng = random.Random(seed)
        self.switch_p = switch_p
        self._mu = threading.Lock()
        self._batons = [threading.Lock() for _ in range(n)]
        for baton in self._batons:
            baton.acquire()  # released once per turn handed to its thread
        self.probes: list[_Probe | None] = [None] * n
        self.lines = [0] * n  # points each thread reached: its progress
        self.inside = [False] * n  # in the scheduler's own code (never "blocked")
        self.running: int | None = None
        self.waiting: set[int] = set()
        self.stalled: set[int] = set()  # turn taken away while blocked, not back in the queue
        self.done: set[int] = set()
        self.n = n
        self.started = False
        self.stopping = False
        self.settling = False  # the running thread settles the stalled ones: not blocked
        self.stats = Schedule(seed)
        self.quiet = _quiet_s()  # once: the watcher's loop must build no tuple (max() would)

    def _enter(self) -> None:
        self._mu.acquire()

    def _exit(self) -> None:
        self._mu.release()

    def _hand_on(self, me: int | None) -> None:
        """Give the turn to a waiting thread other than ``me`` (none waits: nothing changes)."""
        candidates = sorted(self.waiting - {me})
        if candidates:
            self.running = self.rng.choice(candidates)
            self.waiting.discard(self.running)
            self.stats.switches += 1
            self._batons[self.running].release()

    def _blocked(self, t: int) -> bool:
        probe = self.probes[t]
        return probe is not None and not self.inside[t] and probe.blocked(self.lines[t], self.quiet)

    def _settle(self, me: int | None) -> None:
        """Wait until every stalled thread (but ``me``) is back in the queue or still blocked:
        a hand-off then sees the same queue whatever the machine's load. Called outside
        ``_mu``."""
        while not self.stopping:
            for t in range(self.n):
                if t != me and t in self.stalled and not self._blocked(t):
                    break
            else:
                return
            time.sleep(TICK_S)

    def point(self, me: int) -> None:
        self.inside[me] = True
        try:
            self._point(me)
        finally:
            self.inside[me] = False

    def _point(self, me: int) -> None:
        if self.running == me and self.stalled:
            # A lock this thread released at its last line woke a stalled thread: let it
            # take that lock and come back before this one can take the lock again.
            self._settle_running(me)
        self._enter()
        try:
            self.stats.points += 1
            self.lines[me] += 1
            turn = self.running == me
            if turn:
                if self.rng.random() >= self.switch_p:
                    return
                self.waiting.add(me)
                self._hand_on(me)
                if self.running == me:  # nobody else is waiting: go on
                    self.waiting.discard(me)
                    return
            else:
                self.waiting.add(me)
                self.stalled.discard(me)
                if not self.started and len(self.waiting) + len(self.done) == self.n:
                    self.started = True
                if self.started and self.running is None:
                    self._hand_on(None)
        finally:
            self._exit()
        self._batons[me].acquire()  # until a thread hands this one the turn

    def _settle_running(self, me: int) -> None:
        self.settling = True
        try:
            self._settle(me)
        finally:
            self.settling = False

    def finish(self, me: int) -> None:
        self.inside[me] = True
        self._enter()
        try:
            self.done.add(me)
            self.waiting.discard(me)
            self.stalled.discard(me)
            turn = self.running == me
        finally:
            self._exit()
        if not turn:
            return
        self._settle_running(me)
        self._enter()
        try:
            self.running = None
            self._hand_on(None)
        finally:
            self._exit()

    def watch(self) -> None:
        """Pass the turn on when its holder is blocked (see the module's docstring).

        Its loop allocates little and nothing that outlives an iteration, and no collection
        starts during a run, so no finalizer of the implementation's runs on this thread: one
        that blocked here on an implementation's lock would stop every hand-off."""
        while not self.stopping:
            time.sleep(TICK_S)
            r = self.running
            if not self.started or r is None or self.settling or not self._blocked(r):
                continue
            seen = self.lines[r]
            self._settle(r)
            self._enter()
            try:
                if self.running == r and self.lines[r] == seen and not self.settling:
                    self.running = None
                    self._hand_on(None)
                    if self.running is None:  # nobody to hand to: it keeps the turn
                        self.running = r
                    else:
                        self.stalled.add(r)
                        self.stats.stalls += 1
                        self.stats.stall_at.append((self.stats.points, r))
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
    with _no_automatic_collection():
        return _run(targets, seed, switch_p, deadline)


@contextmanager
def _no_automatic_collection() -> Iterator[None]:
    """A full collection, then the collector off for the run (module docstring). Nothing is
    collected after it: a finalizer could wait on a lock a stuck thread holds."""
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _run(
    targets: list[Callable[[], None]], seed: int, switch_p: float, deadline: float
) -> Schedule:
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
                turns.probes[me] = _Probe()
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
