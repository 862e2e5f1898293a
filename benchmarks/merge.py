"""A hash join through dask's own API, ``left.merge(right, on="k")``, with each shuffle
method on the same cluster and the same frames: ours through the switch
(``reference_impl.shuffle.in_dask.device_shuffle``), distributed's P2P and dask's tasks.

Run from the repository root:

    .venv/bin/python benchmarks/merge.py                       # 1M x 500k rows, 16 partitions
    .venv/bin/python benchmarks/merge.py --rows 4000000 --repeats 5

One ``LocalDeviceCluster`` of 2 workers (a SimDevice each) serves every method. Each run
computes the join's row count and the sum of one column of each side on the workers (so no
frame is gathered), checked equal across methods: a method that lost or doubled a match
fails the benchmark instead of being timed. The figure is the median of ``--repeats`` runs
after a warm-up, printed with its ratio to P2P's median (below 1: faster than P2P).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = str(Path(__file__).resolve().parent.parent)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

METHODS = ("ours", "p2p", "tasks")


def frames(rows: int, nparts: int):
    import dask.dataframe as dd
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    left = pd.DataFrame({"k": rng.integers(0, rows // 4, rows), "x": rng.random(rows)})
    right = pd.DataFrame({"k": np.arange(rows // 2) % (rows // 4), "y": rng.integers(0, 1000, rows // 2)})
    return dd.from_pandas(left, npartitions=nparts), dd.from_pandas(right, npartitions=nparts)


def join_once(client, method: str, left, right) -> tuple[float, tuple[int, float, int]]:
    import dask

    from reference_impl.shuffle.in_dask import device_shuffle

    switch = device_shuffle(client) if method == "ours" else contextlib.nullcontext()
    with switch:
        joined = left.merge(right, on="k", shuffle_method=None if method == "ours" else method, broadcast=False)
        start = time.perf_counter()
        n, xs, ys = dask.compute(joined.shape[0], joined.x.sum(), joined.y.sum())
        return time.perf_counter() - start, (int(n), round(float(xs), 3), int(ys))


def main(argv: list[str] | None = None) -> None:
    import distributed

    from reference_impl.shuffle import LocalDeviceCluster

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000, help="rows of the left frame (the right has half)")
    p.add_argument("--partitions", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--methods", default=",".join(METHODS))
    args = p.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        p.error(f"unknown methods {', '.join(unknown)}; choose from {', '.join(METHODS)}")
    with (
        LocalDeviceCluster(
            2, device="sim", device_capacity="2 GiB", device_memory_limit="512 MiB",
            memory_limit="4 GiB", local_directory=tempfile.mkdtemp(),
        ) as cluster,
        distributed.Client(cluster) as client,
    ):  # fmt: skip
        left, right = frames(args.rows, args.partitions)
        left, right = left.persist(), right.persist()
        distributed.wait([left, right])
        medians: dict[str, float] = {}
        answer = None
        for method in methods:
            join_once(client, method, left, right)  # warm-up: imports, kernels, plugins
            times = []
            for _ in range(args.repeats):
                seconds, got = join_once(client, method, left, right)
                if answer is None:
                    answer = got
                if got != answer:
                    raise SystemExit(f"{method} joined to {got}, not {answer}: wrong result, not timed")
                times.append(seconds)
                print(f"  {method}: {seconds:.2f} s", flush=True)
            medians[method] = statistics.median(times)
    print(f"\nmerge of {args.rows:,} x {args.rows // 2:,} rows, {args.partitions} partitions each, "
          f"2 workers, medians of {args.repeats}; result rows {answer[0]:,}")
    print("| method | median s | / P2P |\n|---|---:|---:|")
    for method, s in medians.items():
        ratio = f"{s / medians['p2p']:.2f}" if "p2p" in medians else "n/a"
        print(f"| {method} | {s:.2f} | {ratio} |")


if __name__ == "__main__":
    main()
