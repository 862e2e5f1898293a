"""``shuffle``: repeated shuffles of data several times the workers' aggregate device memory.

A warm-up round of the same size comes first (not judged: SPEC 14.20 is judged after one).
Each round generates fresh inputs (seeded) on the workers, loads them through the adapter,
shuffles, and checks the outputs from summaries made on the workers (count and schema, every
key in one output, per-row checksums in == out): no input or output row travels to this
process. With ``shuffle.bounded``: each worker's device high-water mark within the adapter's
budget plus twice the largest partition (SPEC 14.2), and each local worker's RSS growth
within what it may hold in RAM plus twice the largest partition plus the fixed overhead (SPEC
14.20). Nothing may be left behind afterwards. An adapter without ``accepts_worker_tables``
and ``shuffle_map`` gets its inputs from this process and its outputs checked here.
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from contextlib import nullcontext
from pathlib import Path

from dask.utils import format_bytes

from conformance.shuffle.harness import RSS_OVERHEAD, RSS_PARTITIONS, rss_allowance, rss_bound

from .. import data, runs
from ..cluster import open_cluster
from ..impls import Impl
from ..progress import Progress
from ..reaper import Reaper, killed_workers_files
from ..record import RunRecord
from ..sampler import Sampler, cluster_reader
from ..settings import ROW_BYTES, Settings
from .shuffle_faults import RECOVER  # --kill-every needs it: every round must still be right

BOUND = "device bound (budget + 2 x largest partition)"
RSS_BOUND = "rss bound (SPEC 14.20, over the RSS before the shuffle)"
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
        with Sampler(record, cluster_reader(cluster.client, cluster.on_device), settings.interval) as sampler:
            # The warm-up: a round of the same size, not judged (SPEC 14.20 is judged after one).
            progress.status("warm-up round")
            record.mark("warm-up")
            t = time.perf_counter()
            err = _round(settings, record, progress, cluster, name, -1, n_inputs, rows,
                         npartitions, timeout, judge=False)
            record.timings[f"{name} warm-up"] = time.perf_counter() - t
            if err is not None:
                record.violate(f"{name}: the warm-up shuffle failed: {err}")
                return
            cluster.settled(30.0)
            cluster.mark_baseline()
            reaper = _reaper(settings, record, cluster, impl)
            rnd, start = 0, time.perf_counter()
            while rnd < settings.rounds or (
                settings.duration and time.perf_counter() - start < settings.duration
            ):
                progress.start(f"{name}: round {rnd + 1}", None if settings.duration else settings.rounds)
                _round(settings, record, progress, cluster, name, rnd, n_inputs, rows, npartitions, timeout,
                       reaper=reaper)
                progress.advance(1, status=_status(sampler))
                rnd += 1
            figs[f"{name} rounds"] = rnd
            if reaper is not None:
                _judge_kills(record, name, reaper, settings.kill_every)
            sampler.sample_once()
            _final_figures(record, name, sampler)
        left = cluster.settled(30.0) or []
        if reaper is not None:
            left = killed_workers_files(left, reaper.kills)[1]
        if left:
            record.violate(f"{name}: left behind after the last round: {'; '.join(left[:5])}")
    record.timings[f"{name} total"] = time.perf_counter() - t0


def _reaper(settings, record, cluster, impl) -> Reaper | None:
    """The worker killer of ``--kill-every``, where it can run (else a note says why not)."""
    if settings.kill_every is None:
        return None
    if RECOVER not in impl.caps:
        record.note(f"{impl.name}: --kill-every skipped: it does not declare {RECOVER}")
        return None
    if not getattr(cluster, "local_workers", False):
        record.note(f"{impl.name}: --kill-every skipped: the workers do not run on this machine")
        return None
    record.note(f"{impl.name}: a random worker SIGKILLed every {settings.kill_every:g} s while a "
                "shuffle runs; memory bounds are not judged in those rounds (a killed worker's RSS has "
                "no before and after)")
    return Reaper(cluster.client, settings.kill_every, settings.seed, settings.workers)


def _judge_kills(record, name: str, reaper: Reaper, every: float) -> None:
    record.figures[f"{name} workers killed"] = len(reaper.kills)
    if reaper.kills:
        record.figures[f"{name} kills (s: worker)"] = "; ".join(f"{k.at:.1f}: {k.worker}" for k in reaper.kills)
    else:
        record.violate(f"{name}: --kill-every {every:g}: no worker was killed (not exercised: every "
                       "shuffle ended within the interval; lower it or raise --data)")


def _round(settings, record, progress, cluster, name, rnd, n_inputs, rows, npartitions, timeout,
           *, judge: bool = True, reaper: Reaper | None = None) -> str | None:
    """One round (``rnd`` -1: the warm-up, seeded apart); the shuffle's error, if any."""
    seed = settings.seed + rnd if rnd >= 0 else settings.seed + 10**6
    label = f"round {rnd + 1}" if rnd >= 0 else "warm-up"
    if judge:
        record.mark(label)
    if runs.on_workers(cluster):
        res, problems, in_largest = _round_on_workers(
            record, progress, cluster, name, label, seed, n_inputs, rows, npartitions, timeout, reaper
        )
    else:
        res, problems, in_largest = _round_here(
            settings, record, progress, cluster, name, label, seed, n_inputs, rows, npartitions,
            timeout, reaper,
        )
    if res.error is not None:
        err = f"{type(res.error).__name__}: {res.error}"
        if res.kills:
            err += f" ({len(res.kills)} workers killed in the round: {', '.join(k.worker for k in res.kills)})"
        if judge:
            record.violate(f"{name} {label}: the shuffle failed: {err}")
        return err
    for p in problems:
        record.violate(f"{name} {label}: {p}")
    largest = max(_largest_output(res.outputs), in_largest)
    del res.outputs
    if not judge:  # the warm-up: what it installs once is the baseline (mark_baseline)
        return None
    _check_peaks(record, cluster, name, rnd, res, largest)
    while reaper is not None and reaper.problems:
        record.violate(f"{name} {label}: {reaper.problems.pop(0)}")
    left = cluster.settled(30.0) or []
    if reaper is not None:
        theirs, left = killed_workers_files(left, reaper.kills)
        if theirs:
            record.note(f"{name} {label}: {len(theirs)} files of SIGKILLed workers' directories not purged "
                        f"yet (distributed purges them as a worker next starts there): {'; '.join(theirs[:3])}")
    if left:
        record.violate(f"{name} {label}: left behind: {'; '.join(left[:5])}")
    return None


def _largest_output(outputs) -> int:
    """Bytes of the largest output (a summary's rows x ROW_BYTES: the stress tables have
    three 8-byte columns and no nulls, so that is their Arrow size)."""
    return max(
        (o.digest.rows * ROW_BYTES if isinstance(o, data.Summary) else o.nbytes for o in outputs),
        default=0,
    )


def _shuffle(cluster, reaper: Reaper | None, *args, **kwargs) -> runs.Result:
    """One shuffle, the reaper armed (memory not measured then) if there is one."""
    with reaper.armed() if reaper is not None else nullcontext([]) as kills:
        res = runs.shuffle(cluster, *args, measure=reaper is None, **kwargs)
    res.kills = list(kills)
    return res


def _round_on_workers(record, progress, cluster, name, label, seed, n_inputs, rows, npartitions,
                      timeout, reaper):
    """Inputs made on the workers, outputs summarised there: only summaries travel."""
    width = data.bucket_width(n_inputs * rows)
    progress.status("generating and loading inputs on the workers")
    t = time.perf_counter()
    inputs, summaries_in, schema = runs.generate(cluster, seed, n_inputs, rows, width, timeout)
    record.timings[f"{name} {label} generate+load"] = time.perf_counter() - t
    in_largest = rows * ROW_BYTES
    progress.status("shuffling")
    record.mark("shuffle")
    summarize = functools.partial(data.summarize, names=schema.names, width=width)
    res = _shuffle(cluster, reaper, inputs, npartitions, timeout, fn=summarize)
    del inputs
    return _checked(record, progress, f"{name} {label}", res, in_largest,
                    lambda: data.summary_problems(summaries_in, res.outputs, npartitions, schema, width))


def _checked(record, progress, what, res, in_largest, check):
    """The shuffle's time recorded, then ``check()``'s problems (none run after an error)."""
    record.timings[f"{what} shuffle"] = res.seconds
    if res.error is not None:
        return res, [], in_largest
    progress.status("checking")
    t = time.perf_counter()
    problems = check()
    record.timings[f"{what} check"] = time.perf_counter() - t
    return res, problems, in_largest


def _round_here(settings, record, progress, cluster, name, label, seed, n_inputs, rows,
                npartitions, timeout, reaper):
    """Inputs made here and sent through the adapter; outputs returned and checked here."""
    t = time.perf_counter()
    tables = [data.make_table(seed, i, rows) for i in range(n_inputs)]
    schema = tables[0].schema
    in_largest = max(t.nbytes for t in tables)
    digest_in = data.digest_all(tables, schema.names)
    record.timings[f"{name} {label} generate"] = time.perf_counter() - t
    progress.status("loading inputs")
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "large object in task graph": the protocol sends tables
        inputs = runs.load(cluster, tables, timeout)
    record.timings[f"{name} {label} load"] = time.perf_counter() - t
    kept = tables if settings.data <= KEEP_INPUTS else None
    del tables
    progress.status("shuffling")
    record.mark("shuffle")
    res = _shuffle(cluster, reaper, inputs, npartitions, timeout)
    del inputs
    return _checked(record, progress, f"{name} {label}", res, in_largest,
                    lambda: runs.check(kept, digest_in, res.outputs, npartitions, schema))


def _check_peaks(record, cluster, name, rnd, res, largest) -> None:
    bounded = "shuffle.bounded" in cluster.adapter.capabilities
    budget_fn = getattr(cluster.adapter, "memory_budget", None)
    budget = int(budget_fn(cluster.env)) if budget_fn else cluster.env.device_limit
    figs = record.figures
    if res.peaks:
        bound = budget + 2 * largest  # conformance SPEC 14.2
        record.limits[BOUND] = max(bound, record.limits.get(BOUND) or 0)
        for i, (w, peak) in enumerate(sorted(res.peaks.items())):
            key = f"{name} device peak bytes w{i}"
            figs[key] = max(peak, figs.get(key, 0))
            if bounded and peak > bound:
                record.violate(
                    f"{name} round {rnd + 1}: worker {w} device peak {format_bytes(peak)} > "
                    f"budget {format_bytes(budget)} + 2 x the largest partition "
                    f"{format_bytes(largest)} (conformance SPEC 14.2)"
                )
    if res.rss:
        env = cluster.env
        allowance = rss_allowance(cluster.on_device, env.device_kind, budget, env.host_limit)
        bound = rss_bound(allowance, largest)
        top = max(res.rss_before.values(), default=0) + bound
        record.limits[RSS_BOUND] = max(top, record.limits.get(RSS_BOUND) or 0)
        for i, (w, growth) in enumerate(sorted(res.rss.items())):
            key = f"{name} RSS growth bytes w{i}"
            figs[key] = max(growth, figs.get(key, 0))
            if bounded and env.host_limit and growth > bound:
                record.violate(
                    f"{name} round {rnd + 1}: worker {w} RSS growth {format_bytes(growth)} > "
                    f"{format_bytes(allowance)} it may hold in RAM + {RSS_PARTITIONS} x the "
                    f"largest partition {format_bytes(largest)} + "
                    f"{format_bytes(RSS_OVERHEAD)} (conformance SPEC 14.20)"
                )
        figs[f"{name} RSS bound bytes (SPEC 14.20)"] = bound
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
    for field, what in (("untracked", "untracked bytes (RSS - device - host)"), ("arrow", "Arrow pool bytes")):
        values = [getattr(s, field) for s in record.samples if getattr(s, field) is not None]
        if values:
            figs[f"{name} max sampled {what}"] = max(values)
    spilled = sum(r.get("spilled") or 0 for r in sampler.last.values())
    if "shuffle.spill" in sampler_caps(record, name) and not spilled and not any(disks):
        record.note(f"{name}: no spilling observed (data may fit the limits)")


def sampler_caps(record: RunRecord, name: str) -> list[str]:
    return record.impls.get(name, {}).get("capabilities", [])
