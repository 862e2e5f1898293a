"""``stress shuffle --kill-every SECONDS``: SIGKILL a random worker at intervals while a round's
shuffle runs (its nanny brings it back), so that a long run meets losses wherever they fall,
not only at the phase boundaries the faults scenario picks.

The reaper is armed only around the shuffle itself: inputs are loaded and outputs checked on a
whole cluster. The pids come from the scheduler (what each worker registered with), never from
the workers, which may be the ones dying; each kill is recorded (when, which worker), so a run in which no
kill fired says "not exercised" instead of passing.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from conformance.shuffle.workers import poll_workers

BACK_TIMEOUT = 120.0  # seconds for the nannies to bring the killed workers back
POLL = 0.25  # seconds between looks at the cluster


def _workers(dask_scheduler: Any = None) -> dict[str, tuple[int, str]]:
    """On the scheduler: each worker's pid and directory, as it registered (the workers are
    not asked)."""
    return {w: (ws.pid, ws.local_directory) for w, ws in dask_scheduler.workers.items()}


@dataclass(frozen=True)
class Kill:
    at: float  # seconds since the reaper was made
    worker: str
    pid: int
    directory: str  # the killed worker's local_directory: what it left there is not the shuffle's


def killed_workers_files(left: list[str], kills: list[Kill]) -> tuple[list[str], list[str]]:
    """``left`` (leftover descriptions) split into those under a killed worker's directory
    (a SIGKILLed process cleans nothing; distributed purges its directory when a worker next
    starts in that workspace and finds the lock free) and the rest."""
    dirs = {os.path.basename(k.directory.rstrip("/")) for k in kills if k.directory}
    theirs = [x for x in left if any(f"/{d}/" in x for d in dirs)]
    return theirs, [x for x in left if x not in theirs]

class Reaper:
    """Kills one worker of ``client``'s cluster every ``every`` seconds while armed."""

    def __init__(self, client: Any, every: float, seed: int, n_workers: int) -> None:
        self.client, self.every, self.n_workers = client, every, n_workers
        self.kills: list[Kill] = []
        self.problems: list[str] = []  # what went wrong around the kills (the round reports it)
        self._rng = random.Random(seed)
        self._t0 = time.perf_counter()

    @contextmanager
    def armed(self) -> Iterator[list[Kill]]:
        """Kill while the body runs; yields the kills of this period (filled as they
        happen); afterwards, waits for the cluster to be whole again."""
        stop = threading.Event()
        period: list[Kill] = []
        thread = threading.Thread(target=self._run, args=(stop, period), name="stress-reaper", daemon=True)
        thread.start()
        try:
            yield period
        finally:
            stop.set()
            thread.join()
            if period:
                self._wait_whole(period)

    def _wait_whole(self, period: list[Kill]) -> None:
        """The killed workers gone and ``n_workers`` listed (a count alone would count a worker
        killed a few milliseconds ago); else a problem, and the run goes on."""
        killed = [k.worker for k in period]
        seen, whole = poll_workers(self.client, self.n_workers, BACK_TIMEOUT, gone=killed)
        if not whole:  # distributed's nanny did not restart a worker: say so, go on
            self.problems.append(
                f"after {len(period)} kills ({', '.join(killed)}) the cluster was not whole within "
                f"{BACK_TIMEOUT:.0f} s (the scheduler listed {seen}): a nanny did not bring its "
                "worker back"
            )

    def _run(self, stop: threading.Event, period: list[Kill]) -> None:
        """Kill when the cluster has been whole for ``every`` seconds: the interval runs from
        the last loss's replacement, never from the kill (a worker killed while it starts
        can leave its nanny without a worker)."""
        whole_since: float | None = None
        while not stop.wait(min(self.every, POLL)):
            try:
                workers = self.client.run_on_scheduler(_workers)
            except Exception:  # the scheduler is busy with the last loss: next time
                continue
            dead = {k.pid for k in self.kills}
            workers = {w: (pid, d) for w, (pid, d) in workers.items() if pid and pid not in dead}
            now = time.perf_counter()
            if len(workers) < self.n_workers:  # the last loss is not replaced yet: one at a time
                whole_since = None
                continue
            whole_since = now if whole_since is None else whole_since
            if now - whole_since < self.every:
                continue
            worker = self._rng.choice(sorted(workers))
            pid, directory = workers[worker]
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            kill = Kill(now - self._t0, worker, pid, directory or "")
            period.append(kill)
            self.kills.append(kill)
            whole_since = None
