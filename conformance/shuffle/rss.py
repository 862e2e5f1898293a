"""Clause 14.20's ground truth: every worker process's RSS, sampled from this process, and
the bound its growth during a shuffle must stay within."""

from __future__ import annotations

import threading
import time

# Clause 14.20: a worker's RSS growth during a shuffle <= the memory it may hold in RAM
# (rss_allowance) + RSS_PARTITIONS x the largest partition + RSS_OVERHEAD. The overhead was
# measured after a warm-up shuffle of the same size (SPEC.md 14.20 gives the figures).
RSS_OVERHEAD = 8 * 2**20
RSS_PARTITIONS = 2


class RssSampler:
    """Samples every worker process's RSS in a thread of this process (psutil)."""

    def __init__(self, pids: dict[str, int], interval: float = 0.005) -> None:
        import psutil

        self.procs = {w: psutil.Process(pid) for w, pid in pids.items()}
        self.before = {w: p.memory_info().rss for w, p in self.procs.items()}
        self.peak = dict(self.before)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)
        self._thread.start()

    def _run(self, interval: float) -> None:
        while not self._stop.is_set():
            for w, p in self.procs.items():
                try:
                    self.peak[w] = max(self.peak[w], p.memory_info().rss)
                except Exception:  # the process went away (a fault test)
                    pass
            time.sleep(interval)

    def stop(self) -> dict[str, int]:
        """``{worker: peak RSS above the level before}``."""
        self._stop.set()
        self._thread.join()
        return {w: self.peak[w] - self.before[w] for w in self.procs}


def rss_allowance(
    on_device: bool, device_kind: str | None, budget: int, host_limit: int | None
) -> int:
    """Clause 14.20: the bytes a worker may hold in RAM. On a device: the host limit, plus the
    budget where the device's memory is host RAM (``sim``); otherwise the budget (which is
    RSS already, 14.2)."""
    if not on_device:
        return budget
    return (host_limit or 0) + (budget if device_kind == "sim" else 0)


def rss_bound(allowance: int, largest: int) -> int:
    """Clause 14.20's bound on a worker's RSS growth, given ``rss_allowance`` and the largest
    partition (input or output) of the shuffle."""
    return allowance + RSS_PARTITIONS * largest + RSS_OVERHEAD
