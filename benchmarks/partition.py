"""Hash-partition throughput, side by side with memcpy, numpy and dask/pandas.

Measures, in one run on one box: the reference kernels (1 int64 key + 2
int64 payload columns by default, ``--payload-columns``) at several fanouts, the copy bandwidth of the same
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

With ``--strings`` it measures string columns instead: 1 string key (Arrow
layout, lengths uniform in ``0..2*mean``, random lowercase bytes) + 1 int64
payload, against a fresh-destination memcpy of the same bytes and against
the same dask/pandas path on pandas' default string dtype (``str``,
pyarrow-backed, what dask hands its shuffle) and on ``object`` strings.

    python benchmarks/partition.py --rows 1e7 --fanouts 16,256,1024,4096 --repeat 3
    python benchmarks/partition.py --rows 1e7 --payload-columns 3 --fanouts 256   # issue 10 (a)
    python benchmarks/partition.py --strings --rows 1e6 --fanouts 256              # issue 10 (b)
    python benchmarks/partition.py --strings --rows 1e4 --repeat 1                 # smoke run
    python benchmarks/partition.py --table --rows 1e7 --payload-columns 3 --fanouts 256
    python benchmarks/partition.py --table --strings --rows 1e6 --fanouts 256

With ``--table`` the same inputs are also wrapped in a ``reference_impl.Table``
(zero-copy ``Column`` objects over the device arrays) and
``partition_table(table, "k", n)`` is timed too: the kernels' ``api`` call
plus building ``n`` output Tables of zero-copy views, what a shuffle calls.
Its columns: ``table`` rate, its ratio to the fresh-destination copy
(``table vs memcpy+alloc``), and to the pandas path.
With ``--destination`` (fixed-width columns only) ``partition_by_ids`` is timed too: the
kernels' destination mode given int32 ids (``partition_ids`` of the key, computed once,
outside the timing), scattering the same key + payload columns. Its columns: ``dest`` rate,
its ratio to the fresh-destination copy, and ``api / dest``, what not hashing saves.
    python benchmarks/partition.py --rows 1e7 --fanouts 256 --destination
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
from reference_impl.kernels import Strings, partition, partition_by_ids, partition_ids  # noqa: E402
from reference_impl.table import Column, Table  # noqa: E402
from reference_impl.table.partition import partition_table  # noqa: E402


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


def random_strings(rng: np.random.Generator, nrows: int, mean: int) -> tuple[np.ndarray, np.ndarray]:
    """Arrow ``(int32 offsets, uint8 chars)``: lengths uniform in 0..2*mean, bytes a-z."""
    lengths = rng.integers(0, 2 * mean + 1, nrows)
    offsets = np.zeros(nrows + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    chars = rng.integers(ord("a"), ord("z") + 1, int(offsets[-1]), dtype=np.uint8)
    return offsets, chars


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
    ap.add_argument("--payload-columns", type=int, default=2,
                    help="int64 payload columns next to the int64 key (default 2)")
    ap.add_argument("--strings", action="store_true",
                    help="1 string key + 1 int64 payload instead of int64 columns")
    ap.add_argument("--mean-bytes", type=int, default=16,
                    help="mean string length with --strings (default 16)")
    ap.add_argument("--table", action="store_true",
                    help="also time partition_table on a Table of the same columns")
    ap.add_argument("--destination", action="store_true",
                    help="also time partition_by_ids (given int32 ids) on the same columns")
    args = ap.parse_args(argv)
    if not 0.0 <= args.skew <= 1.0:
        ap.error(f"--skew must be between 0 and 1, got {args.skew}")
    if args.payload_columns < 0:
        ap.error("--payload-columns must be >= 0")
    if args.strings:
        if args.destination:
            ap.error("--destination times fixed-width columns only (not with --strings)")
        bench_strings(args)
    else:
        bench_fixed(args)


def _copy_baseline(dev, in_bytes: int, repeat: int):
    """``(sync, warm copy s, fresh-destination copy s, name)`` for ``dev``."""
    if dev.kind == "cuda":
        import cupy

        def sync() -> None:
            cupy.cuda.runtime.deviceSynchronize()

        t_copy, t_copy_fresh = time_copy(cupy, in_bytes, repeat, sync)
        return sync, t_copy, t_copy_fresh, "device-to-device copy (cupy.copyto)"

    def sync() -> None:
        return None

    t_copy, t_copy_fresh = time_copy(np, in_bytes, repeat, sync)
    return sync, t_copy, t_copy_fresh, "memcpy (np.copyto, 1 thread)"


def bench_fixed(args: argparse.Namespace) -> None:
    nrows = int(args.rows)
    fanouts = [int(f) for f in args.fanouts.split(",")]
    ncols = 1 + args.payload_columns

    rng = np.random.default_rng(args.seed)
    host = [rng.integers(0, 2**62, nrows, dtype=np.int64) for _ in range(ncols)]
    if args.skew:  # one hot key: the partition it lands in gets that share of the rows
        host[0][rng.random(nrows) < args.skew] = 42
    in_bytes = sum(c.nbytes for c in host)
    dev = get_device(args.device, capacity=max(16 << 30, 8 * in_bytes))
    key, *payload = (dev.asarray(c) for c in host)

    sync, t_copy, t_copy_fresh, copy_name = _copy_baseline(dev, in_bytes, args.repeat)
    b_copy = in_bytes / t_copy
    b_fresh = in_bytes / t_copy_fresh

    import numba

    print(f"# rows={nrows:,} input={in_bytes / 2**20:,.0f} MiB (1 int64 key + "
          f"{args.payload_columns} int64 payload) skew={args.skew:g}")
    print(f"# device={dev.kind} nproc={os.cpu_count()} numba_threads={numba.get_num_threads()} "
          f"cpu={cpu_model()!r} loadavg={os.getloadavg()[0]:.2f}")
    print(f"# {copy_name}: warm dst {b_copy / 1e9:.2f} GB/s payload "
          f"({2 * b_copy / 1e9:.2f} GB/s read+write); fresh dst (alloc included) "
          f"{b_fresh / 1e9:.2f} GB/s payload")

    t_pandas: dict[int, float] = {}
    t_numpy: dict[int, float] = {}
    if not args.no_baselines:
        import pandas as pd

        df = pd.DataFrame({"k": host[0], **{f"p{i}": c for i, c in enumerate(host[1:])}})
        for n in fanouts:
            t_numpy[n] = best_of(args.repeat, lambda n=n: numpy_partition(host[0], host[1:], n))
            t_pandas[n] = best_of(max(1, args.repeat - 1), lambda n=n: pandas_partition(df, n))
        del df

    out = [dev.empty(nrows, c.dtype) for c in (key, *payload)]
    ids = dev.empty(nrows, np.int32)
    for o in (*out, ids):
        o[...] = 0  # touch once, like the warm memcpy destination
    copy = "D2D" if dev.kind == "cuda" else "memcpy"
    table = None
    head, rule = "", ""
    if args.table:
        table = Table({"k": Column(key, device=dev),
                       **{f"p{i}": Column(c, device=dev) for i, c in enumerate(payload)}})
        head = f" table GB/s | table ms | table vs {copy}+alloc | table vs pandas |"
        rule = "---|---|---|---|"
    if args.destination:
        head += f" dest GB/s | dest vs {copy}+alloc | api / dest |"
        rule += "---|---|---|"
    print(f"| fanout | api GB/s | api vs {copy}+alloc | reuse GB/s | reuse vs {copy} "
          f"| numpy argsort GB/s | dask/pandas GB/s | api vs pandas | reuse vs pandas |{head}")
    print(f"|---|---|---|---|---|---|---|---|---|{rule}")
    for n in fanouts:
        t_api = best_of(args.repeat, lambda n=n: partition(dev, [key], payload, n), sync)
        t_re = best_of(args.repeat, lambda n=n: partition(dev, [key], payload, n, out=out,
                                                          ids_out=ids), sync)
        np_rate = f"{in_bytes / t_numpy[n] / 1e9:.3f}" if n in t_numpy else "-"
        pd_rate = f"{in_bytes / t_pandas[n] / 1e9:.3f}" if n in t_pandas else "-"
        vs_pd = f"{t_pandas[n] / t_api:.1f}x" if n in t_pandas else "-"
        vs_pd_re = f"{t_pandas[n] / t_re:.1f}x" if n in t_pandas else "-"
        tab = ""
        if table is not None:
            t_tab = best_of(args.repeat, lambda n=n: partition_table(table, "k", n), sync)
            vs_pd_tab = f"{t_pandas[n] / t_tab:.1f}x" if n in t_pandas else "-"
            tab = (f" {in_bytes / t_tab / 1e9:.3f} | {t_tab * 1e3:.1f} "
                   f"| {t_copy_fresh / t_tab:.2f}x | {vs_pd_tab} |")
        if args.destination:
            given = partition_ids(dev, [key], n)  # outside the timing, as dask computes it
            t_dest = best_of(args.repeat, lambda n=n, given=given: partition_by_ids(
                dev, given, [key, *payload], n), sync)
            del given
            tab += (f" {in_bytes / t_dest / 1e9:.3f} | {t_copy_fresh / t_dest:.2f}x "
                    f"| {t_api / t_dest:.2f}x |")
        print(f"| {n} | {in_bytes / t_api / 1e9:.3f} | {t_copy_fresh / t_api:.2f}x "
              f"| {in_bytes / t_re / 1e9:.3f} | {t_copy / t_re:.2f}x | {np_rate} | {pd_rate} "
              f"| {vs_pd} | {vs_pd_re} |{tab}", flush=True)



def bench_strings(args: argparse.Namespace) -> None:
    """1 string key + 1 int64 payload: the kernels vs a fresh memcpy and vs dask/pandas."""
    import numba
    import pandas as pd
    import pyarrow as pa

    nrows = int(args.rows)
    fanouts = [int(f) for f in args.fanouts.split(",")]
    rng = np.random.default_rng(args.seed)
    offsets, chars = random_strings(rng, nrows, args.mean_bytes)
    if args.skew:
        hot = rng.random(nrows) < args.skew  # one hot key: every hot row is "hot-key"
        lengths = np.where(hot, 7, np.diff(offsets))
        src = offsets[:-1]
        offsets = np.zeros(nrows + 1, np.int32)
        np.cumsum(lengths, out=offsets[1:])
        rows = [b"hot-key" if h else chars[a:a + n].tobytes()
                for h, a, n in zip(hot, src, lengths, strict=True)]
        chars = np.frombuffer(b"".join(rows), np.uint8)
    value = rng.integers(0, 2**62, nrows, dtype=np.int64)
    in_bytes = offsets.nbytes + chars.nbytes + value.nbytes
    dev = get_device(args.device, capacity=max(4 << 30, 8 * in_bytes))
    key = Strings(dev.asarray(offsets), dev.asarray(chars))
    payload = [dev.asarray(value)]
    sync, t_copy, t_copy_fresh, copy_name = _copy_baseline(dev, in_bytes, args.repeat)

    print(f"# strings: rows={nrows:,} mean key length {np.diff(offsets).mean():.2f} B, "
          f"input={in_bytes / 2**20:,.1f} MiB (int32 offsets + chars + 1 int64 payload) "
          f"skew={args.skew:g}")
    print(f"# device={dev.kind} nproc={os.cpu_count()} numba_threads={numba.get_num_threads()} "
          f"cpu={cpu_model()!r} loadavg={os.getloadavg()[0]:.2f}")
    print(f"# {copy_name}: warm dst {in_bytes / t_copy / 1e9:.2f} GB/s; fresh dst "
          f"{in_bytes / t_copy_fresh / 1e9:.2f} GB/s")

    t_pd: dict[tuple[str, int], float] = {}
    if not args.no_baselines:
        arrow = pa.StringArray.from_buffers(nrows, pa.py_buffer(offsets), pa.py_buffer(chars))
        frames = {"str": pd.DataFrame({"k": pd.Series(arrow, dtype="str"), "v": value})}
        frames["object"] = frames["str"].astype({"k": object})
        print(f"# pandas {pd.__version__}: key dtypes {[str(f.dtypes['k']) for f in frames.values()]}")
        for name, df in frames.items():
            for n in fanouts:
                t_pd[name, n] = best_of(max(1, args.repeat - 1),
                                        lambda n=n, df=df: pandas_partition(df, n))
        del frames

    out = [Strings(dev.empty(nrows + 1, np.int32), dev.empty(len(chars), np.uint8)),
           dev.empty(nrows, np.int64)]
    ids = dev.empty(nrows, np.int32)
    for o in (out[0].offsets, out[0].chars, out[1], ids):
        o[...] = 0
    table = None
    head, rule = "", ""
    if args.table:
        table = Table({"k": Column(key.chars, offsets=key.offsets, device=dev),
                       "v": Column(payload[0], device=dev)})
        head = " table ms | table vs memcpy+alloc | table vs pandas str | table vs pandas object |"
        rule = "---|---|---|---|"
    print("| fanout | api GB/s | api ms | api vs memcpy+alloc | reuse ms | dask/pandas str ms "
          f"| api vs pandas str | dask/pandas object ms | api vs pandas object |{head}")
    print(f"|---|---|---|---|---|---|---|---|---|{rule}")
    for n in fanouts:
        t_api = best_of(args.repeat, lambda n=n: partition(dev, [key], payload, n), sync)
        t_re = best_of(args.repeat, lambda n=n: partition(dev, [key], payload, n, out=out,
                                                          ids_out=ids), sync)
        cells = []
        for name in ("str", "object"):
            t = t_pd.get((name, n))
            cells += ["-", "-"] if t is None else [f"{t * 1e3:.1f}", f"{t / t_api:.1f}x"]
        tab = ""
        if table is not None:
            t_tab = best_of(args.repeat, lambda n=n: partition_table(table, "k", n), sync)
            vs = [f"{t_pd[name, n] / t_tab:.1f}x" if (name, n) in t_pd else "-"
                  for name in ("str", "object")]
            tab = f" {t_tab * 1e3:.1f} | {t_copy_fresh / t_tab:.2f}x | {vs[0]} | {vs[1]} |"
        print(f"| {n} | {in_bytes / t_api / 1e9:.3f} | {t_api * 1e3:.1f} "
              f"| {t_copy_fresh / t_api:.2f}x | {t_re * 1e3:.1f} | {' | '.join(cells)} |{tab}",
              flush=True)


if __name__ == "__main__":
    main()
