"""Readings taken during a run, in a thread of this process, for the timeline.

Worker readings come from the workers themselves (``client.run``): device bytes from the
process's device ledger (``reference_impl.device.default_device()``), host and disk bytes
from the worker store's public ``stats()`` where it has one, the bytes of the files under
the worker's local directory, the RSS (psutil), Arrow's pool (``pyarrow.total_allocated_bytes()``,
once the worker imported pyarrow) and what no ledger tracks: **untracked** = RSS - host tier
- device bytes where the device's memory is host RAM (``sim``), for workers whose store
reports its tiers. Store readings (store-churn) call a function in this process.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from conformance.shuffle.harness import DASK_FILES

from .record import RunRecord, Sample


def files_bytes(directory: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(directory):
        for fn in files:
            if fn.endswith(DASK_FILES):
                continue
            try:
                total += os.path.getsize(os.path.join(root, fn))
            except OSError:
                pass
    return total


def worker_probe(on_device: bool, dask_worker: Any = None) -> dict[str, Any]:
    """Runs on a worker: its readings now (and its device's high-water mark)."""
    import psutil

    out: dict[str, Any] = {"pid": os.getpid(), "rss": psutil.Process().memory_info().rss}
    stats = getattr(dask_worker.data, "stats", None)
    if callable(stats):
        s = stats()
        out.update(host=s.get("host_bytes"), store_disk=s.get("disk_bytes"))
        out.update(spilled=s.get("spilled_bytes"), disk_written=s.get("disk_written_bytes"))
    out["disk"] = files_bytes(dask_worker.local_directory)
    pyarrow = sys.modules.get("pyarrow")  # never imported just to read it
    if pyarrow is not None:
        out["arrow"] = int(pyarrow.total_allocated_bytes())
    ram_device = 0
    if on_device:
        from reference_impl.device import default_device

        dev = default_device()
        if dev is not None:
            out.update(device=dev.bytes_in_use(), device_peak=dev.peak_bytes())
            ram_device = out["device"] if getattr(dev, "kind", None) == "sim" else 0
    if out.get("host") is not None:
        out["untracked"] = out["rss"] - out["host"] - ram_device
    return out


class Sampler:
    """Calls ``read() -> {worker: Sample fields}`` every ``interval`` seconds until stopped."""

    def __init__(self, record: RunRecord, read: Callable[[], dict[str, dict]], interval: float):
        self.record, self.read, self.interval = record, read, interval
        self.last: dict[str, dict] = {}
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stress-sampler", daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def sample_once(self) -> None:
        try:
            readings = self.read()
        except Exception:  # a worker being killed or a cluster closing: skip this reading
            self.errors += 1
            return
        t = self.record.now()
        self.last = readings
        self.record.add_samples(
            [
                Sample(
                    t, w, r.get("device"), r.get("host"), r.get("disk"), r.get("rss"),
                    r.get("untracked"), r.get("arrow"),
                )
                for w, r in readings.items()
            ]
        )
        self.record.worker_pids.update(r["pid"] for r in readings.values() if "pid" in r)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample_once()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def cluster_reader(client: Any, on_device: bool, prefix: str = "") -> Callable[[], dict[str, dict]]:
    """Readings of every worker, labelled w0, w1, ... in order of first appearance."""
    labels: dict[str, str] = {}

    def read() -> dict[str, dict]:
        got = client.run(worker_probe, on_device, on_error="ignore")
        out = {}
        for addr in sorted(got):
            if not isinstance(got[addr], dict):
                continue
            label = labels.setdefault(addr, f"{prefix}w{len(labels)}")
            out[label] = got[addr]
        return out

    return read
