"""Run settings, parsed and checked before anything starts (bad input: one clear line)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dask.utils import format_bytes, parse_bytes

ROW_BYTES = 24  # k0 int64, p0 float64, row_id int64 (stress.data)


class UsageError(Exception):
    """Impossible or malformed settings; the CLI prints the message as one line, exit 2."""


def size(text: str | int | None, what: str, *, allow_zero: bool = False) -> int | None:
    """Bytes from ``256MiB`` / ``2GiB`` / an int; a UsageError naming the option otherwise."""
    if text is None:
        return None
    try:
        n = int(parse_bytes(text)) if isinstance(text, str) else int(text)
    except (ValueError, TypeError):
        raise UsageError(f"{what} {text!r}: not a size (e.g. 256MiB, 2GiB)") from None
    if n < 0 or (n == 0 and not allow_zero):
        raise UsageError(f"{what} {text!r}: must be positive")
    return n


@dataclass
class Settings:
    """What one run does. Sizes are bytes; ``host_memory`` None means no host limit."""

    scenario: str
    out: Path
    impls: tuple[str, ...] = ("reference",)
    compare: tuple[str, ...] = ()
    device: str = "sim"
    workers: int = 2
    device_memory: int = 256 * 2**20
    host_memory: int | None = None
    data: int = 1 * 2**30
    partition_size: int | None = None
    duration: float | None = None
    rounds: int = 1
    kill_every: float | None = None  # shuffle: seconds between SIGKILLs of a random worker
    threads: int = 4
    seed: int = 0
    scheduler: str | None = None
    interval: float = 0.25
    spill_dir: Path | None = None
    progress: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def partition(self) -> int:
        """Bytes per input partition: an eighth of a worker's device memory by default."""
        return self.partition_size or max(ROW_BYTES, self.device_memory // 8)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["out"] = str(self.out)
        d["spill_dir"] = str(self.spill_dir) if self.spill_dir else None
        for k in ("device_memory", "host_memory", "data", "partition_size"):
            if d[k] is not None:
                d[k + "_text"] = format_bytes(d[k])
        return d


def check(s: Settings) -> None:
    """Reject impossible settings before any cluster starts."""
    if s.workers < 1:
        raise UsageError(f"--workers {s.workers}: need at least one worker")
    if s.threads < 1:
        raise UsageError(f"--threads {s.threads}: need at least one thread")
    if s.rounds < 1:
        raise UsageError(f"--rounds {s.rounds}: need at least one round")
    if s.duration is not None and s.duration <= 0:
        raise UsageError(f"--duration {s.duration}: must be positive seconds")
    if s.kill_every is not None:
        if s.scenario != "shuffle":
            raise UsageError(f"--kill-every: only the shuffle scenario kills workers, not {s.scenario}")
        if not s.kill_every > 0:
            raise UsageError(f"--kill-every {s.kill_every}: must be positive seconds")
        if s.scheduler is not None:
            raise UsageError("--kill-every: the workers of --scheduler run elsewhere; only local ones can be killed")
        if s.workers < 2:
            raise UsageError(f"--kill-every with --workers {s.workers}: a shuffle needs a worker left to recover on")
    if s.interval <= 0:
        raise UsageError(f"--interval {s.interval}: must be positive seconds")
    if s.host_memory is not None and s.host_memory < 1:
        raise UsageError("--host-memory must be positive")
    if s.partition < ROW_BYTES:
        raise UsageError(f"--partition-size {s.partition}: smaller than one row ({ROW_BYTES} B)")
    if s.scenario == "shuffle" and s.data < s.partition:
        raise UsageError(
            f"--data {format_bytes(s.data)} is smaller than one partition "
            f"({format_bytes(s.partition)}; set --partition-size or raise --data)"
        )
    if s.out.exists() and not s.out.is_dir():
        raise UsageError(f"--out {s.out}: exists and is not a directory")
    if s.scheduler is None:
        if s.device == "cuda":
            _check_gpus(s)
        else:
            _check_host_ram(s)


def _check_gpus(s: Settings) -> None:
    try:
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no CuPy, no driver, no GPU
        raise UsageError(f"--device cuda: no GPU is usable here ({type(exc).__name__}: {exc})") from None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    n = min(n, len(visible.split(","))) if visible else n
    if s.workers > n:
        raise UsageError(f"--workers {s.workers} on cuda: only {n} GPU(s) visible (one worker per GPU)")
    total = min(cupy.cuda.runtime.getDeviceProperties(i)["totalGlobalMem"] for i in range(n))
    if s.device_memory > total:
        raise UsageError(
            f"--device-memory {format_bytes(s.device_memory)} per worker: the GPU has "
            f"{format_bytes(total)}"
        )


def _check_host_ram(s: Settings) -> None:
    """The sim device is host RAM: the workers' device (and host) limits must fit in it."""
    import psutil

    total = psutil.virtual_memory().total
    per_worker = s.device_memory + (s.host_memory or 0)
    if s.workers * per_worker > total:
        raise UsageError(
            f"--workers {s.workers} x (--device-memory {format_bytes(s.device_memory)} + "
            f"--host-memory {format_bytes(s.host_memory or 0)}) exceeds this machine's "
            f"{format_bytes(total)} of RAM (the sim device is host memory)"
        )
