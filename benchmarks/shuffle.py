"""Our shuffle vs distributed's P2P vs dask's tasks shuffle: one run, one cluster, the same data.

Run from the repository root:

    .venv/bin/python benchmarks/shuffle.py                          # 256 MiB smoke run
    .venv/bin/python benchmarks/shuffle.py --size 2GiB              # the issue's size
    .venv/bin/python benchmarks/shuffle.py --scaling 0.5GiB,1GiB,2GiB --methods ours,p2p

The cluster is a ``LocalDeviceCluster`` (2 workers x 1 thread, loopback, a SimDevice
each with ``--device-limit`` and a host tier of ``--host-limit``; beyond that the
store spills to disk). Every method runs on a fresh one of that spec (fresh worker
processes, so one method's allocator leftovers do not count against the next;
``client.restart()`` timed out on this loaded box) after one small warm-up shuffle of
the same method (imports, Numba compilation).

The data: ``--partitions`` (32) input partitions of about ``--size`` in all, each
generated inside the graph from its seed: an int64 key (uniform in 0..2^40), an int64
payload (the row's global number) and one string column (4-12 random lowercase
bytes, pandas' ``str`` dtype, Arrow ``large_string``). Every method shuffles on the
key into as many output partitions as inputs; each output is reduced to (rows,
payload sum) as soon as it is made, so no method keeps its outputs, and the sums are
checked against the input's.

Methods:
- ``ours``: ``reference_impl.shuffle.shuffle`` on device Tables (each input made by
  ``Table.from_pandas`` of the same frame on the worker's device);
- ``ours-df``: ``shuffle_dataframe`` on the pandas dask DataFrame (pandas -> Table
  -> shuffle -> pandas), the like-for-like of the next two;
- ``ours-lazy``: ``ddf.shuffle("key", npartitions=..., force=True)`` inside
  ``reference_impl.shuffle.in_dask.device_shuffle(client)`` (dask's own API, the
  reference's tasks in dask's graph);
- ``p2p``: ``ddf.shuffle("key", npartitions=..., shuffle_method="p2p", force=True)``;
- ``tasks``: the same with ``shuffle_method="tasks"``.

``--lazy 32,256`` compares ``ours-lazy``, ``p2p`` and ``tasks`` on ONE cluster per partition
count (partitions of ``--part-size``), the methods alternating, ``--repeats`` (3) rounds;
it prints the median wall time and the median peak RSS growth per worker of each.
``--methods ours,ours-lazy,p2p`` picks the methods alternating there instead (``ours``: the
eager API on the same cluster).

Per method it prints the wall time (generation included; ``gen`` is a
generation-only pass, for reference) and the throughput (input bytes / wall), the
peak RSS of each worker process (psutil on the worker pids, sampled every 10 ms by a
thread of this process, never the workers' own word), for ``ours`` the device
high-water mark (``SimDevice.peak_bytes``), and the unpack spike measured as in
``../shared/anchors/distributed_p2p.md`` §5C: per worker, the peak RSS after the
barrier task ended minus the RSS when it ended, divided by the mean output
partition (input bytes / partitions). The tasks shuffle has no barrier (n/a).
Ratios are against P2P measured in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = str(Path(__file__).resolve().parent.parent)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from benchmarks._common import load, machine  # noqa: E402

ROW_BYTES = 8 + 8 + 8 + 8  # key, payload, large_string offset, 8 chars on average
METHODS = ("ours", "ours-df", "ours-lazy", "p2p", "tasks")
MIB = 2**20


def parse_size(text: str) -> int:
    from dask.utils import parse_bytes

    return int(parse_bytes(text))


# --- the data (run on the workers) ---------------------------------------------------------
def make_frame(seed: int, rows: int):
    import pandas as pd
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    lengths = rng.integers(4, 13, rows)
    offsets = np.zeros(rows + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    chars = rng.integers(97, 123, int(offsets[-1]), dtype=np.uint8)
    s = pa.LargeStringArray.from_buffers(rows, pa.py_buffer(offsets), pa.py_buffer(chars))
    table = pa.table({
        "key": rng.integers(0, 1 << 40, rows),
        "payload": np.arange(seed * rows, (seed + 1) * rows, dtype=np.int64),
        "s": s,
    })
    df = table.to_pandas()
    df.index = pd.RangeIndex(seed * rows, (seed + 1) * rows)
    return df


def make_table(seed: int, rows: int):
    from reference_impl import Table, get_device

    return Table.from_pandas(make_frame(seed, rows), get_device("auto"), preserve_index=False)


def table_summary(table) -> tuple[int, int]:
    """(rows, payload sum) of one output Table, read on the worker's device."""
    payload = table.select(["payload"]).to_arrow()["payload"]
    return table.num_rows, int(payload.to_numpy().sum()) if table.num_rows else 0


def frame_summary(df):
    import pandas as pd

    return pd.DataFrame({"rows": [len(df)], "psum": [int(df["payload"].sum())]})


def arrow_nbytes(rows: int) -> int:
    import pyarrow as pa

    return pa.Table.from_pandas(make_frame(0, rows), preserve_index=False).nbytes


def rows_in(nbytes: int) -> int:
    """How many rows of ``make_frame`` hold about ``nbytes`` as Arrow (at least one)."""
    return max(int(nbytes / (arrow_nbytes(100_000) / 100_000)), 1)


# --- measuring ------------------------------------------------------------------------------
class RssSampler:
    """Peak RSS of each worker pid, sampled every ``interval`` s by a thread of this process."""

    def __init__(self, pids: dict[str, int], interval: float = 0.01) -> None:
        import psutil

        self.procs = {w: psutil.Process(pid) for w, pid in pids.items()}
        self.samples: dict[str, list[tuple[float, int]]] = {w: [] for w in pids}
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.time()
            for w, p in self.procs.items():
                with contextlib.suppress(Exception):
                    self.samples[w].append((now, p.memory_info().rss))
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def peak(self, w: str) -> int:
        return max(r for _, r in self.samples[w])

    def growth(self, w: str) -> int:
        """Peak RSS above the first sample (taken before the shuffle's first task)."""
        return self.peak(w) - self.samples[w][0][1]

    def spike(self, w: str, boundary: float) -> tuple[int, int, int]:
        """(RSS at ``boundary``, peak before it, peak after it) for worker ``w``."""
        s = self.samples[w]
        before = [r for t, r in s if t <= boundary]
        after = [r for t, r in s if t > boundary]
        at = before[-1] if before else s[0][1]
        return at, max(before or [at]), max(after or [at])


@dataclass
class Result:
    method: str
    wall: float
    nbytes: int
    rows: int
    rss_peak: dict[str, int]
    device_peak: dict[str, int] = field(default_factory=dict)
    spike: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # at, pre, post
    part_bytes: int = 0
    rss_growth: dict[str, int] = field(default_factory=dict)  # peak above the RSS before

    @property
    def throughput(self) -> float:
        return self.nbytes / self.wall

    def spike_ratio(self) -> float | None:
        if not self.spike:
            return None
        return max((post - at) / self.part_bytes for at, _, post in self.spike.values())

    def max_rss(self) -> int:
        return max(self.rss_peak.values())

    def max_growth(self) -> int:
        return max(self.rss_growth.values())


def barrier_end(stream: list[dict], marker: str) -> float | None:
    ends = [
        ss["stop"]
        for t in stream
        if marker in str(t["key"])
        for ss in t["startstops"]
        if ss["action"] == "compute"
    ]
    return max(ends) if ends else None


def reset_peak(dask_worker) -> int:
    dask_worker.data.device.reset_peak()
    return dask_worker.data.device.bytes_in_use()


def device_peak(dask_worker) -> int:
    return dask_worker.data.device.peak_bytes()


# --- the methods ----------------------------------------------------------------------------
def frames(nparts: int, rows: int):
    import dask.dataframe as dd

    meta = make_frame(0, 1).iloc[:0]
    return dd.from_map(make_frame, range(nparts), rows=rows, meta=meta, enforce_metadata=False)


def run_ours(client, nparts: int, rows: int) -> tuple[int, int]:
    from reference_impl.shuffle import shuffle

    inputs = client.map(make_table, range(nparts), rows=rows, pure=False)
    outs = shuffle(client, inputs, "key", nparts)
    del inputs
    # priority: each output is reduced (and dropped) as soon as it is made
    sums = client.map(table_summary, outs, priority=10, pure=False)
    del outs
    got = client.gather(sums)
    return sum(r for r, _ in got), sum(s for _, s in got)


def run_ours_df(client, nparts: int, rows: int) -> tuple[int, int]:
    from reference_impl.shuffle import shuffle_dataframe

    out = shuffle_dataframe(frames(nparts, rows), "key", nparts, client=client)
    got = out.map_partitions(frame_summary, meta={"rows": "i8", "psum": "i8"}).compute()
    return int(got["rows"].sum()), int(got["psum"].sum())


def run_dask(method: str):
    def run(client, nparts: int, rows: int) -> tuple[int, int]:
        out = frames(nparts, rows).shuffle(
            "key", npartitions=nparts, shuffle_method=method, force=True
        )
        got = out.map_partitions(frame_summary, meta={"rows": "i8", "psum": "i8"}).compute()
        return int(got["rows"].sum()), int(got["psum"].sum())

    return run


def run_ours_lazy(client, nparts: int, rows: int) -> tuple[int, int]:
    from reference_impl.shuffle.in_dask import device_shuffle

    with device_shuffle(client):
        out = frames(nparts, rows).shuffle("key", npartitions=nparts, force=True)
        got = out.map_partitions(frame_summary, meta={"rows": "i8", "psum": "i8"}).compute()
    return int(got["rows"].sum()), int(got["psum"].sum())


RUNNERS = {
    "ours": run_ours,
    "ours-df": run_ours_df,
    "ours-lazy": run_ours_lazy,
    "p2p": run_dask("p2p"),
    "tasks": run_dask("tasks"),
}
BARRIER = {"ours": "-barrier", "ours-df": "-barrier", "ours-lazy": "-barrier", "p2p": "shuffle-barrier", "tasks": None}


@contextlib.contextmanager
def fresh_cluster(args: argparse.Namespace, tmp: str):
    import distributed

    from reference_impl.shuffle import LocalDeviceCluster

    with (
        LocalDeviceCluster(
            2,
            device="sim",
            device_capacity=args.device_capacity,
            device_memory_limit=args.device_limit,
            memory_limit=args.host_limit,
            local_directory=tempfile.mkdtemp(dir=tmp),
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def measure(args, tmp: str, method: str, nparts: int, rows: int, nbytes: int, verbose: bool) -> Result:
    with fresh_cluster(args, tmp) as client:
        return _measure(client, method, nparts, rows, nbytes, verbose)


def _measure(
    client, method: str, nparts: int, rows: int, nbytes: int, verbose: bool, warm: bool = True
) -> Result:
    from distributed import get_task_stream

    runner = RUNNERS[method]
    t_warm = time.perf_counter()
    if warm:
        runner(client, 4, 500)  # warm-up: imports, kernels compiled, plugins registered
    if verbose:
        print(f"  ({method} warm-up {time.perf_counter() - t_warm:.1f} s)", flush=True)
    pids = client.run(os.getpid)
    if method.startswith("ours"):
        client.run(reset_peak)
    time.sleep(0.2)  # the last run's frees and trims land before the baseline sample
    expected_rows = nparts * rows
    expected_sum = expected_rows * (expected_rows - 1) // 2
    with RssSampler(pids) as sampler, get_task_stream(client) as ts:
        t0 = time.perf_counter()
        got_rows, got_sum = runner(client, nparts, rows)
        wall = time.perf_counter() - t0
        time.sleep(0.05)
    if (got_rows, got_sum) != (expected_rows, expected_sum):
        raise AssertionError(
            f"{method}: got {got_rows} rows (payload sum {got_sum}), "
            f"expected {expected_rows} ({expected_sum})"
        )
    res = Result(method, wall, nbytes, expected_rows,
                 {w: sampler.peak(w) for w in pids}, part_bytes=nbytes // nparts,
                 rss_growth={w: sampler.growth(w) for w in pids})
    if method.startswith("ours"):
        res.device_peak = client.run(device_peak)
    marker = BARRIER[method]
    if marker is not None:
        end = barrier_end(ts.data, marker)
        if end is not None:
            res.spike = {w: sampler.spike(w, end) for w in pids}
    if verbose:
        print_result(res)
    return res


def gen_only(client, nparts: int, rows: int) -> float:
    frames(2, 100).map_partitions(len).compute()
    t0 = time.perf_counter()
    frames(nparts, rows).map_partitions(len).compute()
    return time.perf_counter() - t0


# --- report ---------------------------------------------------------------------------------
def mib(n: float) -> str:
    return f"{n / MIB:,.0f}"


def print_result(r: Result) -> None:
    rss = " / ".join(mib(v) for v in r.rss_peak.values())
    grow = " / ".join(mib(v) for v in r.rss_growth.values())
    line = (f"  {r.method:8s} wall {r.wall:6.1f} s  {r.throughput / MIB:7.1f} MiB/s  peak RSS {rss} MiB"
            f" (+{grow})")
    if r.device_peak:
        line += "  device peak " + " / ".join(mib(v) for v in r.device_peak.values()) + " MiB"
    ratio = r.spike_ratio()
    if ratio is not None:
        added = " / ".join(mib(post - at) for at, _, post in r.spike.values())
        line += f"  unpack +{added} MiB = {ratio:.1f}x output partition"
    print(line, flush=True)


def table(results: list[Result]) -> str:
    p2p = next((r for r in results if r.method == "p2p"), None)
    head = ("| method | wall s | MiB/s | x P2P throughput | peak RSS per worker MiB | x P2P peak RSS "
            "| RSS growth per worker MiB | x P2P growth "
            "| device peak per worker MiB | transfer peak RSS MiB | unpack +RSS MiB | spike x output |")
    lines = [head, "|---" * 12 + "|"]
    for r in results:
        tput = f"{r.throughput / p2p.throughput:.2f}" if p2p else "-"
        rss_ratio = f"{r.max_rss() / p2p.max_rss():.2f}" if p2p else "-"
        dev = " / ".join(mib(v) for v in r.device_peak.values()) or "-"
        if r.spike:
            pre = " / ".join(mib(p) for _, p, _ in r.spike.values())
            add = " / ".join(mib(post - at) for at, _, post in r.spike.values())
            ratio = f"{r.spike_ratio():.2f}"
        else:
            pre = add = ratio = "n/a"
        rss = " / ".join(mib(v) for v in r.rss_peak.values())
        grow = " / ".join(mib(v) for v in r.rss_growth.values())
        grow_ratio = f"{r.max_growth() / p2p.max_growth():.2f}" if p2p else "-"
        lines.append(
            f"| {r.method} | {r.wall:.1f} | {r.throughput / MIB:.1f} | {tput} | {rss} | {rss_ratio} "
            f"| {grow} | {grow_ratio} | {dev} | {pre} | {add} | {ratio} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="256MiB", help="input bytes (Arrow), e.g. 256MiB, 2GiB")
    ap.add_argument("--partitions", type=int, default=32)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--scaling", default="", help="sizes for a scaling table, e.g. 0.5GiB,1GiB,2GiB")
    ap.add_argument("--device-limit", default="128MiB", help="per worker device_memory_limit")
    ap.add_argument("--host-limit", default="128MiB", help="per worker host tier before disk")
    ap.add_argument("--device-capacity", default="8GiB")
    ap.add_argument("--no-single", action="store_true", help="only the scaling or sweep table")
    ap.add_argument("--sweep", default="", help="partition counts (in = out) at a fixed "
                    "--part-size, e.g. 32,256,1024")
    ap.add_argument("--part-size", default="3MiB", help="partition size of the --sweep")
    ap.add_argument("--local-directory", default=None, help="spill and P2P shard directory")
    ap.add_argument("--lazy", default="", help="partition counts for the lazy comparison on one "
                    "cluster (ours-lazy, p2p, tasks alternating), e.g. 32,256")
    ap.add_argument("--repeats", type=int, default=3, help="rounds of the --lazy comparison")
    args = ap.parse_args(argv)

    import dask
    import distributed

    methods = [m for m in args.methods.split(",") if m]
    for m in methods:
        if m not in RUNNERS:
            raise SystemExit(f"unknown method {m!r}; choose from {', '.join(METHODS)}")
    nparts = args.partitions
    row_bytes = arrow_nbytes(100_000) / 100_000

    def rows_for(size: int) -> int:
        return max(int(size / row_bytes / nparts), 1)

    print(f"machine: {machine()}")
    print(f"load: {load()}")
    print(f"dask {dask.__version__}, distributed {distributed.__version__}; "
          f"cluster: 2 workers x 1 thread, device limit {args.device_limit}, "
          f"host limit {args.host_limit}, {nparts} partitions", flush=True)
    tmp = tempfile.mkdtemp(prefix="shuffle-bench-", dir=args.local_directory)
    try:
        size = parse_size(args.size)
        rows = rows_for(size)
        nbytes = int(rows * nparts * row_bytes)
        print(f"\n== {nbytes / MIB:,.0f} MiB: {rows * nparts:,} rows, {nparts} x "
              f"{rows * row_bytes / MIB:.1f} MiB partitions", flush=True)
        if not args.no_single:
            with fresh_cluster(args, tmp) as client:
                print(f"  gen-only {gen_only(client, nparts, rows):.1f} s", flush=True)
            results = [measure(args, tmp, m, nparts, rows, nbytes, True) for m in methods]
            print()
            print(table(results), flush=True)
        if args.scaling:
            scaling(args, tmp, methods, [parse_size(s) for s in args.scaling.split(",")],
                    rows_for, nparts, row_bytes)
        if args.sweep:
            sweep(args, tmp, methods, [int(n) for n in args.sweep.split(",")], row_bytes)
        if args.lazy:
            chosen = tuple(methods) if args.methods != ",".join(METHODS) else LAZY_METHODS
            if "p2p" not in chosen:
                raise SystemExit("--lazy compares against p2p: name it in --methods")
            lazy(args, tmp, [int(n) for n in args.lazy.split(",")], row_bytes, chosen)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nload after: {load()}")


def scaling(args, tmp, methods, sizes, rows_for, nparts, row_bytes) -> None:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    rows_out = []
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn()) as progress:
        task = progress.add_task("scaling", total=len(sizes) * len(methods))
        for size in sizes:
            rows = rows_for(size)
            nbytes = int(rows * nparts * row_bytes)
            for m in methods:
                progress.update(task, description=f"{m} at {nbytes / MIB:,.0f} MiB")
                r = measure(args, tmp, m, nparts, rows, nbytes, False)
                rows_out.append(r)
                progress.console.print(
                    f"{nbytes / MIB:,.0f} MiB {m}: {r.wall:.1f} s, {r.throughput / MIB:.1f} MiB/s, "
                    f"peak RSS {' / '.join(mib(v) for v in r.rss_peak.values())} MiB"
                )
                progress.advance(task)
    print("\n| data MiB | method | wall s | MiB/s | peak RSS per worker MiB | device peak MiB | spike x output |")
    print("|---|---|---|---|---|---|---|")
    for r in rows_out:
        ratio = r.spike_ratio()
        print(f"| {r.nbytes / MIB:,.0f} | {r.method} | {r.wall:.1f} | {r.throughput / MIB:.1f} "
              f"| {' / '.join(mib(v) for v in r.rss_peak.values())} "
              f"| {' / '.join(mib(v) for v in r.device_peak.values()) or '-'} "
              f"| {f'{ratio:.2f}' if ratio is not None else 'n/a'} |")


def sweep(args, tmp, methods, counts, row_bytes) -> None:
    """Fixed partition size, more partitions: time per byte and RSS growth should stay flat."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    rows = max(int(parse_size(args.part_size) / row_bytes), 1)
    results: list[tuple[int, Result]] = []
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn()) as progress:
        task = progress.add_task("sweep", total=len(counts) * len(methods))
        for n in counts:
            nbytes = int(rows * n * row_bytes)
            for m in methods:
                progress.update(task, description=f"{m} at {n} x {n}")
                r = measure(args, tmp, m, n, rows, nbytes, False)
                results.append((n, r))
                progress.console.print(
                    f"{n} x {n} ({nbytes / MIB:,.0f} MiB) {m}: {r.wall:.1f} s, "
                    f"RSS growth +{' / '.join(mib(v) for v in r.rss_growth.values())} MiB"
                )
                progress.advance(task)
    print("\n| partitions | data MiB | method | wall s | s per GiB | x P2P time | RSS growth per worker MiB "
          "| x P2P growth |")
    print("|---" * 8 + "|")
    for n, r in results:
        p2p = next((q for k, q in results if k == n and q.method == "p2p"), None)
        per_gib = r.wall / (r.nbytes / 2**30)
        t_ratio = f"{r.wall / p2p.wall:.2f}" if p2p else "-"
        g_ratio = f"{r.max_growth() / p2p.max_growth():.2f}" if p2p else "-"
        print(f"| {n} x {n} | {r.nbytes / MIB:,.0f} | {r.method} | {r.wall:.1f} | {per_gib:.1f} | {t_ratio} "
              f"| +{' / '.join(mib(v) for v in r.rss_growth.values())} | {g_ratio} |")


LAZY_METHODS = ("ours-lazy", "p2p", "tasks")


def lazy(args, tmp, counts, row_bytes, methods: tuple[str, ...] = LAZY_METHODS) -> None:
    """Through dask's API on one cluster per partition count: the methods alternate, each
    warmed once, ``--repeats`` rounds; medians of wall time and of peak RSS growth. With
    ``--methods`` given, those instead (``ours`` for the eager API beside them)."""
    import statistics

    rows = max(int(parse_size(args.part_size) / row_bytes), 1)
    out: list[tuple[int, str, float, float, float]] = []
    for n in counts:
        nbytes = int(rows * n * row_bytes)
        with fresh_cluster(args, tmp) as client:
            for m in methods:
                RUNNERS[m](client, 4, 500)  # warm-up
            got: dict[str, list[Result]] = {m: [] for m in methods}
            for rnd in range(args.repeats):
                for m in methods:
                    r = _measure(client, m, n, rows, nbytes, False, warm=False)
                    got[m].append(r)
                    load = os.getloadavg()[0]
                    print(f"{n} x {n} round {rnd + 1} {m}: {r.wall:.1f} s, RSS growth "
                          f"+{' / '.join(mib(v) for v in r.rss_growth.values())} MiB (load {load:.2f})",
                          flush=True)
        for m in methods:
            wall = statistics.median(r.wall for r in got[m])
            growth = statistics.median(r.max_growth() for r in got[m])
            out.append((n, m, wall, growth, nbytes))
    print("\n| partitions | data MiB | method | median wall s | x P2P time | median max RSS growth per "
          "worker MiB | x P2P growth |")
    print("|---" * 7 + "|")
    for n, m, wall, growth, nbytes in out:
        p2p = next(q for q in out if q[0] == n and q[1] == "p2p")
        print(f"| {n} x {n} | {nbytes / MIB:,.0f} | {m} | {wall:.1f} | {wall / p2p[2]:.2f} "
              f"| +{mib(growth)} | {growth / max(p2p[3], 1):.2f} |")


if __name__ == "__main__":
    main()
