"""Where a worker's memory goes in an eager shuffle: tracemalloc by line, on the workers.

Run from the repository root:

    .venv/bin/python benchmarks/profile_worker.py --partitions 256 --part-size 64KiB

Two workers of a ``LocalDeviceCluster`` (sim devices) trace Python allocations
(``tracemalloc``, 1 frame per allocation) from before the shuffle. Each worker takes one
snapshot as its first output starts to unpack (``ShuffleRun.get_output``'s ``build``
wrapped): by then every shard of the shuffle has reached it and nothing is built yet, so
the snapshot is what the run holds for ``partitions`` inputs into ``partitions`` outputs.
It prints the top lines by bytes held, per worker, with bytes and blocks per shard
(``partitions**2 / workers`` shards reach a worker) and per output, and the traced peak
(``tracemalloc.get_traced_memory``) over the whole shuffle. What is not a Python
allocation (the sim device's buffers are numpy, so they are traced; Arrow's pool is not)
is left out: ``pyarrow.total_allocated_bytes()`` is printed beside it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = str(Path(__file__).resolve().parent.parent)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from benchmarks._common import load, machine  # noqa: E402
from benchmarks.shuffle import make_table, parse_size, rows_in, table_summary  # noqa: E402

TOP = 12


def start_tracing(dask_worker=None) -> None:
    import tracemalloc

    import reference_impl.shuffle.run as run_module

    tracemalloc.start(1)
    original = run_module.build
    state: dict = {}

    def build(*args, **kwargs):
        if "snapshot" not in state:
            state["snapshot"] = tracemalloc.take_snapshot()
            state["current"] = tracemalloc.get_traced_memory()[0]
        return original(*args, **kwargs)

    run_module.build = build
    dask_worker._profile = (run_module, original, state)


def stop_tracing(dask_worker=None) -> dict:
    import tracemalloc

    import pyarrow as pa

    module, original, state = dask_worker._profile
    module.build = original
    del dask_worker._profile
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    snap = state.get("snapshot")
    lines = []
    if snap is not None:
        for stat in snap.statistics("lineno")[:TOP]:
            frame = stat.traceback[0]
            where = f"{os.path.relpath(frame.filename, os.getcwd()) if REPO in frame.filename else frame.filename}:{frame.lineno}"
            lines.append((where, stat.size, stat.count))
    return {"lines": lines, "held": state.get("current", 0), "peak": peak, "arrow": pa.total_allocated_bytes()}


def main(argv: list[str] | None = None) -> None:
    import distributed

    from reference_impl.shuffle import LocalDeviceCluster, shuffle

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=256)
    ap.add_argument("--part-size", default="64KiB")
    ap.add_argument("--device-limit", default="64MiB")
    ap.add_argument("--host-limit", default="64MiB")
    args = ap.parse_args(argv)
    n = args.partitions
    rows = rows_in(parse_size(args.part_size))
    print(f"machine: {machine()}")
    print(f"load: {load()}")
    print(f"{n} x {n} partitions of {args.part_size} ({rows} rows), 2 workers, "
          f"device limit {args.device_limit}, host limit {args.host_limit}", flush=True)
    with (
        LocalDeviceCluster(
            2, device="sim", device_capacity="4GiB", device_memory_limit=args.device_limit,
            memory_limit=args.host_limit, local_directory=tempfile.mkdtemp(),
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        warm = client.map(make_table, range(4), rows=100, pure=False)
        client.gather(client.map(table_summary, shuffle(client, warm, "key", 4), pure=False))
        del warm
        client.run(start_tracing)
        inputs = client.map(make_table, range(n), rows=rows, pure=False)
        sums = client.map(table_summary, shuffle(client, inputs, "key", n), priority=10, pure=False)
        del inputs
        client.gather(sums)
        del sums
        got = client.run(stop_tracing)
    shards = n * n / len(got)
    outputs = n / len(got)
    for w, r in sorted(got.items()):
        print(f"\n{w}: traced at the first unpack {r['held'] / 2**20:.1f} MiB, traced peak "
              f"{r['peak'] / 2**20:.1f} MiB, Arrow pool {r['arrow'] / 2**20:.1f} MiB")
        print("| line | MiB | blocks | bytes per shard | blocks per shard | bytes per output |")
        print("|---|---|---|---|---|---|")
        for where, size, count in r["lines"]:
            print(f"| {where} | {size / 2**20:.2f} | {count:,} | {size / shards:,.0f} "
                  f"| {count / shards:.2f} | {size / outputs:,.0f} |")
    print(f"\nload after: {load()}")


if __name__ == "__main__":
    main()
