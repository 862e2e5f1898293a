"""Helpers shared by the benchmark scripts: timing, the memcpy baseline, machine facts."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np


def best_of(fn: Callable[[], object], repeat: int = 5) -> float:
    """Fastest wall time of ``repeat`` runs: the least disturbed by the other core's noise."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def median_of(fn: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def memcpy_bandwidth(nbytes: int = 256 * 2**20, repeat: int = 5) -> float:
    """Bytes moved per second (read + write) by a large host copy on this machine."""
    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # fault the pages in before timing
    return 2 * nbytes / best_of(lambda: np.copyto(dst, src), repeat)


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


def gbps(bytes_per_second: float) -> str:
    return f"{bytes_per_second / 1e9:.2f} GB/s"
