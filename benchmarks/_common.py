"""Helpers shared by the benchmark scripts: timing, the memcpy baseline, machine facts."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable

import numpy as np


def best_of(
    repeat: int,
    fn: Callable[[], object],
    sync: Callable[[], None] = lambda: None,
    setup: Callable[[], None] | None = None,
) -> float:
    """Best wall time of ``repeat`` runs after one warm-up (which also JIT-compiles).

    The minimum is the run least disturbed by whatever else shares the machine;
    ``sync`` waits for asynchronous devices before the clock stops; ``setup``, if
    given, runs untimed before every run (e.g. a fresh store for a timed fill).
    """
    if setup is not None:
        setup()
    fn()
    sync()
    times = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        start = time.perf_counter()
        out = fn()
        sync()
        times.append(time.perf_counter() - start)
        del out
    return min(times)


def memcpy_bandwidth(nbytes: int = 256 * 2**20, repeat: int = 5) -> float:
    """Bytes moved per second (read + write) by a large host copy on this machine."""
    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.empty_like(src)
    return 2 * nbytes / best_of(repeat, lambda: np.copyto(dst, src))


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}"


def load() -> str:
    """The machine's load, as ``uptime`` prints it: every figure is read against it."""
    import subprocess

    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def gbps(bytes_per_second: float) -> str:
    return f"{bytes_per_second / 1e9:.2f} GB/s"
