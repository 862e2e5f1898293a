"""Hash-partition throughput, side by side with memcpy, numpy and dask/pandas.

Measures, in one run on one box: the reference kernels (1 int64 key + 2
int64 payload columns) at several fanouts, the copy bandwidth of the same
bytes, a numpy argsort-based partitioning, and dask's pandas partitioning as
a dask task shuffle runs it (``AssignPartitioningIndex``: the key cast to
float64, ``hash_object_dispatch`` % n, assigned as ``_partitions``; then
``shuffle_group``: pandas' ``groupsort_indexer`` + ``take`` + split).

The kernels are timed two ways:

- **api**: ``partition(...)`` as a caller uses it, allocating fresh outputs
  (and first-touching them) on every call.  Its fair baseline is
  ``memcpy+alloc``: allocate a fresh destination, then copy.
- **reuse**: ``partition(..., out=..., ids_out=...)`` writing into buffers
  allocated and touched once; its baseline is ``memcpy`` between two warm
  buffers.

Throughput is input bytes per second; ratios are to the copy's payload rate
(bytes copied per second, as ``B_copy`` in the perf anchors) and to the
pandas path.

    python benchmarks/partition.py --rows 1e7 --fanouts 16,256,1024,4096 --repeat 3
    python benchmarks/partition.py --device cuda      # vs device-to-device copy
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import best_of  # noqa: E402

from reference_impl.device import get_device  # noqa: E402
from reference_impl.kernels import partition  # noqa: E402


def time_copy(xp, nbytes: int, repeat: int, sync: Callable[[], None]) -> tuple[float, float]:
    """Best times to copy ``nbytes`` (numpy or cupy): into a warm, pre-touched
    destination, and into a freshly allocated one (allocation included)."""
    src = xp.ones(nbytes, dtype=xp.uint8)
    dst = xp.zeros_like(src)
    warm = best_of(repeat, lambda: xp.copyto(dst, src), sync)
    dst = None  # release before the fresh-allocation timing

    def fresh():
        out = xp.empty_like(src)
        xp.copyto(out, src)
        return out

    return warm, best_of(repeat, fresh, sync)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def numpy_partition(key: np.ndarray, cols: list[np.ndarray], n: int):
    """Baseline: the same hash ids, then a stable argsort and a gather per column."""
    from reference_impl.kernels import hash_numpy, pid_numpy

    ids = pid_numpy(hash_numpy([key]), n)
    order = np.argsort(ids, kind="stable")
    counts = np.bincount(ids, minlength=n)
    return [c[order] for c in [key, *cols]], counts


def pandas_partition(df, n: int):
    """dask's task-shuffle split of one input partition, as dask-expr runs it:
    ``AssignPartitioningIndex`` (hash % n into ``_partitions``), then
    ``shuffle_group(df, "_partitions", stage=0, k=n, npartitions=n, nfinal=n)``."""
    from dask.dataframe.dask_expr._shuffle import AssignPartitioningIndex
    from dask.dataframe.shuffle import shuffle_group

    df = AssignPartitioningIndex.operation(df, ["k"], "_partitions", n, df.iloc[:0], False)
    return shuffle_group(df, ["_partitions"], 0, n, n, False, n)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=float, default=1e7, help="rows (default 1e7)")
    ap.add_argument("--fanouts", default="16,256,1024,4096")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", choices=["sim", "cuda"], default="sim")
    ap.add_argument("--no-baselines", action="store_true", help="skip numpy and pandas paths")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skew", type=float, default=0.0,
                    help="fraction of rows that share one key value (e.g. 0.9)")
    args = ap.parse_args(argv)
    if not 0.0 <= args.skew <= 1.0:
        ap.error(f"--skew must be between 0 and 1, got {args.skew}")
    nrows = int(args.rows)
    fanouts = [int(f) for f in args.fanouts.split(",")]

    rng = np.random.default_rng(args.seed)
    host = [rng.integers(0, 2**62, nrows, dtype=np.int64) for _ in range(3)]
    if args.skew:  # one hot key: the partition it lands in gets that share of the rows
        host[0][rng.random(nrows) < args.skew] = 42
    in_bytes = sum(c.nbytes for c in host)
    dev = get_device(args.device, capacity=max(16 << 30, 8 * in_bytes))
    key, *payload = (dev.asarray(c) for c in host)

    if dev.kind == "cuda":
        import cupy

        def sync() -> None:
            cupy.cuda.runtime.deviceSynchronize()

        t_copy, t_copy_fresh = time_copy(cupy, in_bytes, args.repeat, sync)
        copy_name = "device-to-device copy (cupy.copyto)"
    else:
        def sync() -> None:
            return None

        t_copy, t_copy_fresh = time_copy(np, in_bytes, args.repeat, sync)
        copy_name = "memcpy (np.copyto, 1 thread)"
    b_copy = in_bytes / t_copy
    b_fresh = in_bytes / t_copy_fresh

    import numba

    print(f"# rows={nrows:,} input={in_bytes / 2**20:,.0f} MiB (1 int64 key + 2 int64 payload)"
          f" skew={args.skew:g}")
    print(f"# device={dev.kind} nproc={os.cpu_count()} numba_threads={numba.get_num_threads()} "
          f"cpu={cpu_model()!r} loadavg={os.getloadavg()[0]:.2f}")
    print(f"# {copy_name}: warm dst {b_copy / 1e9:.2f} GB/s payload "
          f"({2 * b_copy / 1e9:.2f} GB/s read+write); fresh dst (alloc included) "
          f"{b_fresh / 1e9:.2f} GB/s payload")

    t_pandas: dict[int, float] = {}
    t_numpy: dict[int, float] = {}
    if not args.no_baselines:
        import pandas as pd

        df = pd.DataFrame({"k": host[0], "a": host[1], "b": host[2]})
        for n in fanouts:
            t_numpy[n] = best_of(args.repeat, lambda n=n: numpy_partition(host[0], host[1:], n))
            t_pandas[n] = best_of(max(1, args.repeat - 1), lambda n=n: pandas_partition(df, n))
        del df

    out = [dev.empty(nrows, c.dtype) for c in (key, *payload)]
    ids = dev.empty(nrows, np.int32)
    for o in (*out, ids):
        o[...] = 0  # touch once, like the warm memcpy destination
    copy = "D2D" if dev.kind == "cuda" else "memcpy"
    print(f"| fanout | api GB/s | api vs {copy}+alloc | reuse GB/s | reuse vs {copy} "
          "| numpy argsort GB/s | dask/pandas GB/s | api vs pandas | reuse vs pandas |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in fanouts:
        t_api = best_of(args.repeat, lambda n=n: partition(dev, [key], payload, n), sync)
        t_re = best_of(args.repeat, lambda n=n: partition(dev, [key], payload, n, out=out,
                                                          ids_out=ids), sync)
        np_rate = f"{in_bytes / t_numpy[n] / 1e9:.3f}" if n in t_numpy else "-"
        pd_rate = f"{in_bytes / t_pandas[n] / 1e9:.3f}" if n in t_pandas else "-"
        vs_pd = f"{t_pandas[n] / t_api:.1f}x" if n in t_pandas else "-"
        vs_pd_re = f"{t_pandas[n] / t_re:.1f}x" if n in t_pandas else "-"
        print(f"| {n} | {in_bytes / t_api / 1e9:.3f} | {t_copy_fresh / t_api:.2f}x "
              f"| {in_bytes / t_re / 1e9:.3f} | {t_copy / t_re:.2f}x | {np_rate} | {pd_rate} "
              f"| {vs_pd} | {vs_pd_re} |", flush=True)


if __name__ == "__main__":
    main()
