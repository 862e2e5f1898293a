"""A hash join and a groupby with ``split_out`` through dask's own API, each shuffle method
on the same cluster and the same frames: ours through the switch
(``reference_impl.shuffle.in_dask.device_shuffle``), distributed's P2P and dask's tasks.

Run from the repository root:

    .venv/bin/python benchmarks/dask_ops.py                      # 2M x 1M rows, 16 partitions
    .venv/bin/python benchmarks/dask_ops.py --ops merge --rows 1000000 --repeats 5

``merge`` is ``left.merge(right, on="k")`` (``--rows`` left rows, half as many right rows);
``groupby`` is ``left.groupby("k").agg({"x": "sum", "k": "count"}, split_out=8)``. Each
result is reduced on the workers (row count and column sums, never gathered) and checked
equal across methods: a method that lost or doubled a row fails the benchmark instead of
being timed. One ``LocalDeviceCluster`` of 2 workers (a SimDevice each) serves every method;
the methods alternate round by round after one warm-up each. Printed per operation and
method: the median wall time of ``--repeats`` rounds and the median of the larger worker's
peak RSS growth (psutil on the worker pids every 10 ms, from this process, never the
workers' own word), each with its ratio to P2P's in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = str(Path(__file__).resolve().parent.parent)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from benchmarks._common import load, machine  # noqa: E402
from benchmarks.shuffle import RssSampler, mib  # noqa: E402

METHODS = ("ours", "p2p", "tasks")
OPS = ("merge", "groupby")
SPLIT_OUT = 8


def frames(rows: int, nparts: int):
    import dask.dataframe as dd
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    left = pd.DataFrame({"k": rng.integers(0, rows // 4, rows), "x": rng.random(rows)})
    right = pd.DataFrame({"k": np.arange(rows // 2) % (rows // 4), "y": rng.integers(0, 1000, rows // 2)})
    return dd.from_pandas(left, npartitions=nparts), dd.from_pandas(right, npartitions=nparts)


@contextlib.contextmanager
def cluster():
    """The operations' cluster, ``(cluster, client)``: 2 workers, a SimDevice of 2 GiB each,
    device limit 512 MiB, host 4 GiB (also ``profile_merge.py``'s)."""
    import distributed

    from reference_impl.shuffle import LocalDeviceCluster

    with (
        LocalDeviceCluster(
            2, device="sim", device_capacity="2 GiB", device_memory_limit="512 MiB",
            memory_limit="4 GiB", local_directory=tempfile.mkdtemp(),
        ) as made,
        distributed.Client(made) as client,
    ):  # fmt: skip
        yield made, client


def merge(left, right, method: str | None):
    joined = left.merge(right, on="k", shuffle_method=method, broadcast=False)
    return joined.shape[0], joined.x.sum(), joined.y.sum()


def groupby(left, right, method: str | None):
    grouped = left.groupby("k").agg({"x": "sum", "k": "count"}, split_out=SPLIT_OUT, shuffle_method=method)
    return grouped.shape[0], grouped.x.sum(), grouped.k.sum()


SEEN = None  # the scheduler's DeviceShufflesSeen: proof that "ours" ran our shuffle


def run_once(client, op: str, method: str, left, right) -> tuple[float, tuple]:
    """Seconds for one computation of ``op`` by ``method``, and its reduced answer."""
    import dask

    from reference_impl.shuffle.in_dask import device_shuffle

    switch = device_shuffle(client) if method == "ours" else contextlib.nullcontext()
    seen = len(SEEN.barriers)
    with switch:
        parts = {"merge": merge, "groupby": groupby}[op](left, right, None if method == "ours" else method)
        start = time.perf_counter()
        n, a, b = dask.compute(*parts)
        seconds = time.perf_counter() - start
    if method == "ours" and len(SEEN.barriers) == seen:
        raise SystemExit(f"{op} under device_shuffle reached no device shuffle: not ours, not timed")
    return seconds, (int(n), round(float(a), 3), int(b))


def main(argv: list[str] | None = None) -> None:
    import distributed

    from reference_impl.shuffle.in_dask import DeviceShufflesSeen

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2_000_000, help="rows of the left frame (the right has half)")
    p.add_argument("--partitions", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--ops", default=",".join(OPS))
    args = p.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    ops = [o for o in args.ops.split(",") if o]
    for chosen, known, what in ((methods, METHODS, "methods"), (ops, OPS, "ops")):
        unknown = sorted(set(chosen) - set(known))
        if unknown:
            p.error(f"unknown {what} {', '.join(unknown)}; choose from {', '.join(known)}")
    print(f"{machine()}; {load()}", flush=True)
    with cluster() as (local, client):
        global SEEN
        SEEN = DeviceShufflesSeen()
        local.scheduler.add_plugin(SEEN)
        pids = client.run(os.getpid)
        left, right = frames(args.rows, args.partitions)
        left, right = left.persist(), right.persist()
        distributed.wait([left, right])
        rows: list[tuple[str, str, float, int]] = []
        for op in ops:
            answer = None
            times: dict[str, list[float]] = {m: [] for m in methods}
            growth: dict[str, list[int]] = {m: [] for m in methods}
            for method in methods:
                run_once(client, op, method, left, right)  # warm-up: imports, kernels, plugins
            for rnd in range(args.repeats):
                for method in methods:
                    with RssSampler(pids) as sampler:
                        seconds, got = run_once(client, op, method, left, right)
                    answer = answer or got
                    if got != answer:
                        raise SystemExit(f"{op} by {method} gave {got}, not {answer}: wrong result, not timed")
                    times[method].append(seconds)
                    growth[method].append(max(sampler.growth(w) for w in pids))
                    print(f"  {op} round {rnd + 1} {method}: {seconds:.2f} s, RSS growth "
                          f"+{' / '.join(mib(sampler.growth(w)) for w in pids)} MiB "
                          f"(load {os.getloadavg()[0]:.2f})", flush=True)
            print(f"{op}: result rows {answer[0]:,}", flush=True)
            for method in methods:
                rows.append((op, method, statistics.median(times[method]), int(statistics.median(growth[method]))))
    print(f"\n{args.rows:,} x {args.rows // 2:,} rows, {args.partitions} partitions each, split_out="
          f"{SPLIT_OUT}, 2 workers, medians of {args.repeats}; after: {load()}")
    print("| op | method | median s | x P2P time | median max RSS growth per worker MiB | x P2P growth |")
    print("|---" * 6 + "|")
    for op, method, s, g in rows:
        p2p = next((r for r in rows if r[0] == op and r[1] == "p2p"), None)
        t_ratio = f"{s / p2p[2]:.2f}" if p2p else "n/a"
        g_ratio = f"{g / max(p2p[3], 1):.2f}" if p2p else "n/a"
        print(f"| {op} | {method} | {s:.2f} | {t_ratio} | +{mib(g)} | {g_ratio} |")


if __name__ == "__main__":
    main()
