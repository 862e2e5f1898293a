"""The world moving under a running shuffle: faults the shuffle machine injects at a phase
boundary, each recording whether it fired.

Every fault is an action for ``ShuffleCluster.during(phase, action)``: it runs once, in the
scheduler's event loop, when the first task of ``phase`` is sent to a worker, and returns
how much it did (0 = it found nothing to act on, so the fault was not exercised). Work that
needs the client (which shares that loop) is handed to a thread, never done in the loop.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

from ..store.harness import files_under
from .harness import DASK_FILES, remove_files

STALL_SECONDS = 0.3  # a slow link: the scheduler's loop (every message through it) stops


def truncate_files(root: str | Path) -> int:
    """Cut every file under ``root`` (dask's lock files aside) to half its size; how many."""
    n = 0
    for path, size in files_under(root).items():
        if path.endswith(DASK_FILES) or size < 2:
            continue
        try:
            os.truncate(path, size // 2)
            n += 1
        except OSError:
            pass
    return n


def stall(seconds: float = STALL_SECONDS) -> int:
    """Block the scheduler's event loop (the action runs in it): messages between the
    workers and the scheduler wait, and the shuffle's timing shifts."""
    time.sleep(seconds)
    return 1


def release_wanted(client_id: str, keep: Collection[str] = (), dask_scheduler: Any = None) -> int:
    """On the scheduler, in its loop: what ``client.cancel`` does to the keys the client
    wants but ``keep``: release them for the client and tell it they are cancelled; how
    many. Not ``client.cancel``: a key released between the listing and the cancel's
    arrival trips the scheduler (``assert ts.who_wants`` in ``stimulus_cancel``), which
    ends its handling of the client's stream for good."""
    cs = dask_scheduler.clients.get(client_id)
    kept = {str(k) for k in keep}
    keys = [ts.key for ts in list(cs.wants_what) if str(ts.key) not in kept] if cs else []
    if keys:
        dask_scheduler.client_releases_keys(
            keys=keys, client=client_id, stimulus_id=f"conformance-cancel-{time.time()}"
        )
        dask_scheduler.report(
            {"op": "cancelled-keys", "keys": keys, "reason": "the suite cancels", "msg": ""}
        )
    return len(keys)


def cancel_shuffle(cluster: Any, spare: Callable[[], set[str]]) -> Callable[[], int]:
    """Cancel every future the client wants but the inputs (``spare()``), as a user letting
    go of a shuffle's outputs mid-flight does, right after the current transition; the
    number of keys wanted at that moment."""
    scheduler = cluster.cluster.scheduler
    client_id = cluster.client.id

    def action() -> int:
        keep = spare()
        cs = scheduler.clients.get(client_id)
        n = sum(1 for ts in (cs.wants_what if cs else ()) if str(ts.key) not in keep)
        scheduler.loop.add_callback(release_wanted, client_id, keep, dask_scheduler=scheduler)
        return n

    return action


def cancel_all(cluster: Any) -> int:
    """Cancel every future the client still wants (what a failed example left)."""
    client = cluster.client
    return client.run_on_scheduler(release_wanted, client.id)


def remove_spill(cluster: Any) -> Callable[[], int]:
    return lambda: remove_files(cluster.spill_dir)


def truncate_spill(cluster: Any) -> Callable[[], int]:
    return lambda: truncate_files(cluster.spill_dir)


@dataclass
class PhaseWatch(SchedulerPlugin):
    """Scheduler plugin: every phase a shuffle task was sent to a worker in, since the last
    ``clear()`` (a rejected call must raise before any data moves, clause 14.12)."""

    phase_of: Callable[[str], str | None]
    seen: set[str] = field(default_factory=set)
    name: str = "conformance-phase-watch"

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if finish == "processing":
            phase = self.phase_of(str(key))
            if phase is not None:
                self.seen.add(phase)

    def clear(self) -> None:
        self.seen = set()
