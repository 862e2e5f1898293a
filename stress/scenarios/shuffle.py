"""``shuffle``: repeated shuffles of data several times the workers' aggregate device memory.

Each round generates fresh inputs (seeded), loads them through the adapter, shuffles, and
checks the outputs: count and schema, every key in one output, per-row checksums in ==
out, each worker's device high-water mark within the adapter's budget plus the largest
output (``shuffle.bounded``), and nothing left behind afterwards.
"""

from __future__ import annotations

import math
import time
import warnings
from pathlib import Path

from dask.utils import format_bytes

from .. import data, runs
from ..cluster import open_cluster
from ..impls import Impl
from ..progress import Progress
from ..record import RunRecord
from ..sampler import Sampler, cluster_reader
from ..settings import ROW_BYTES, Settings

BOUND = "device bound (budget + 2 x largest partition)"
KEEP_INPUTS = 256 * 2**20  # below this, inputs stay in memory to name the rows that differ


def run(settings: Settings, record: RunRecord, progress: Progress, impls: list[Impl], workdir: Path) -> None:
    for impl in impls:
        if "shuffle" not in impl.caps:
            record.note(f"{impl.name}: skipped, it does not declare 'shuffle'")
            continue
        _run_one(settings, record, progress, impl, workdir / impl.name)


def _run_one(settings: Settings, record: RunRecord, progress: Progress, impl: Impl, spill: Path) -> None:
    adapter, name = impl.adapter, impl.name
    spill.mkdir(parents=True, exist_ok=True)
    n_inputs = max(1, math.ceil(settings.data / settings.partition))
    rows = max(1, settings.partition // ROW_BYTES)
    npartitions = n_inputs
    timeout = max(120.0, settings.data / (1 * 2**20))  # 1 MiB/s is a hang
    device_limit, host_limit = settings.device_memory, settings.host_memory
    record.limits.update({"device limit": device_limit, "host limit": host_limit})
    figs = record.figures
    figs.update({f"{name} data bytes": n_inputs * rows * ROW_BYTES, f"{name} input partitions": n_inputs,
                 f"{name} rows per round": f"{n_inputs * rows:,}"})
    progress.start(f"{name}: starting {settings.workers} workers", settings.rounds)
    t0 = time.perf_counter()
    with open_cluster(adapter, settings, str(spill), device_limit=device_limit, host_limit=host_limit) as cluster:
        record.timings[f"{name} cluster start"] = time.perf_counter() - t0
        warm = [data.make_table(settings.seed + 10**6, i, 1000) for i in range(2)]
        res = runs.shuffle(cluster, runs.load(cluster, warm, timeout), 2, timeout, measure=False)
        if res.error is not None:
            record.violate(f"{name}: the warm-up shuffle failed: {res.error!r}")
            return
        del res
        cluster.mark_baseline()
        with Sampler(record, cluster_reader(cluster.client, cluster.on_device), settings.interval) as sampler:
            rnd, start = 0, time.perf_counter()
            while rnd < settings.rounds or (
                settings.duration and time.perf_counter() - start < settings.duration
            ):
                progress.start(f"{name}: round {rnd + 1}", None if settings.duration else settings.rounds)
                _round(settings, record, progress, cluster, name, rnd, n_inputs, rows, npartitions, timeout)
                progress.advance(1, status=_status(sampler))
                rnd += 1
            figs[f"{name} rounds"] = rnd
            sampler.sample_once()
            _final_figures(record, name, sampler)
        left = cluster.settled(30.0)
        if left:
            record.violate(f"{name}: left behind after the last round: {'; '.join(left[:5])}")
    record.timings[f"{name} total"] = time.perf_counter() - t0


def _round(settings, record, progress, cluster, name, rnd, n_inputs, rows, npartitions, timeout) -> None:
    seed = settings.seed + rnd
    record.mark(f"round {rnd + 1}")
    t = time.perf_counter()
    tables = [data.make_table(seed, i, rows) for i in range(n_inputs)]
    schema = tables[0].schema
    in_largest = max(t.nbytes for t in tables)
    digest_in = data.digest_all(tables, schema.names)
    record.timings[f"{name} round {rnd + 1} generate"] = time.perf_counter() - t
    progress.status("loading inputs")
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "large object in task graph": the protocol sends tables
        inputs = runs.load(cluster, tables, timeout)
    record.timings[f"{name} round {rnd + 1} load"] = time.perf_counter() - t
    kept = tables if settings.data <= KEEP_INPUTS else None
    del tables
    progress.status("shuffling")
    record.mark("shuffle")
    res = runs.shuffle(cluster, inputs, npartitions, timeout, measure=True)
    record.timings[f"{name} round {rnd + 1} shuffle"] = res.seconds
    del inputs
    if res.error is not None:
        record.violate(f"{name} round {rnd + 1}: the shuffle failed: {type(res.error).__name__}: {res.error}")
        return
    progress.status("checking")
    t = time.perf_counter()
    problems = runs.check(kept, digest_in, res.outputs, npartitions, schema)
    record.timings[f"{name} round {rnd + 1} check"] = time.perf_counter() - t
    for p in problems:
        record.violate(f"{name} round {rnd + 1}: {p}")
    largest = max(max((t.nbytes for t in res.outputs), default=0), in_largest)
    del res.outputs
    _check_peaks(record, cluster, name, rnd, res.peaks, largest)
    left = cluster.settled(30.0)
    if left:
        record.violate(f"{name} round {rnd + 1}: left behind: {'; '.join(left[:5])}")


def _check_peaks(record, cluster, name, rnd, peaks, largest) -> None:
    if not peaks:
        return
    budget_fn = getattr(cluster.adapter, "memory_budget", None)
    budget = int(budget_fn(cluster.env)) if budget_fn else cluster.env.device_limit
    bound = budget + 2 * largest  # conformance SPEC 14.2
    record.limits[BOUND] = max(bound, record.limits.get(BOUND) or 0)
    figs = record.figures
    for i, (w, peak) in enumerate(sorted(peaks.items())):
        key = f"{name} device peak bytes w{i}"
        figs[key] = max(peak, figs.get(key, 0))
        if "shuffle.bounded" in cluster.adapter.capabilities and peak > bound:
            record.violate(
                f"{name} round {rnd + 1}: worker {w} device peak {format_bytes(peak)} > budget "
                f"{format_bytes(budget)} + 2 x the largest partition {format_bytes(largest)} "
                "(conformance SPEC 14.2)"
            )
    figs[f"{name} largest partition bytes"] = max(largest, figs.get(f"{name} largest partition bytes", 0))


def _status(sampler: Sampler) -> str:
    last = sampler.last
    dev = [r.get("device") for r in last.values() if r.get("device") is not None]
    disk = [r.get("disk") or 0 for r in last.values()]
    return (f"device {format_bytes(max(dev))}" if dev else "") + (f" disk {format_bytes(sum(disk))}" if disk else "")


def _final_figures(record: RunRecord, name: str, sampler: Sampler) -> None:
    figs = record.figures
    for label, r in sorted(sampler.last.items()):
        for k in ("spilled", "disk_written"):
            if r.get(k) is not None:
                figs[f"{name} {k} bytes {label}"] = r[k]
    limit = record.limits.get("device limit")
    devs = [s.device for s in record.samples if s.device is not None]
    disks = [s.disk for s in record.samples if s.disk is not None]
    if devs:
        figs[f"{name} max sampled device bytes"] = max(devs)
        figs[f"{name} samples above the device limit"] = f"{sum(d > limit for d in devs) if limit else 0} of {len(devs)}"
    if disks:
        figs[f"{name} max sampled disk bytes (one worker)"] = max(disks)
    spilled = sum(r.get("spilled") or 0 for r in sampler.last.values())
    if "shuffle.spill" in sampler_caps(record, name) and not spilled and not any(disks):
        record.note(f"{name}: no spilling observed (data may fit the limits)")


def sampler_caps(record: RunRecord, name: str) -> list[str]:
    return record.impls.get(name, {}).get("capabilities", [])
