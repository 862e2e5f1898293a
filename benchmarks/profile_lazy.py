"""Where a worker's RSS growth goes in a shuffle through dask's API (``ddf.shuffle``).

Run from the repository root:

    .venv/bin/python benchmarks/profile_lazy.py --partitions 256 --part-size 256KiB --rounds 3

One ``LocalDeviceCluster`` (2 workers x 1 thread, sim devices, 128 MiB device and host
limits: ``benchmarks/shuffle.py``'s spec). Each round shuffles ``partitions`` inputs of
``part-size`` into as many outputs through ``ddf.shuffle`` under ``device_shuffle`` (or
``--method p2p``), then reduces each output. Per worker and round it prints, from the
worker's own process but never from the shuffle's word alone:

- the RSS before, its peak (sampled every 10 ms from this process with psutil), and at
  the first unpack (every shard has arrived, nothing is built);
- at the first unpack: the shard bytes the run's buffers hold in memory and in files
  (``RunBuffers``), glibc's heap (``mallinfo2``: in use, free but kept, mmapped), Arrow's
  pool, and (``--trace``) Python's traced bytes with the top lines;
- at the worker's RSS peak (sampled every 10 ms in the worker): its bytes in flight and
  its shards' bytes in memory;
- after the round: the RSS, and the RSS after ``malloc_trim(0)``.

``--trace`` slows the run; without it the RSS figures are those of an untraced worker.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = str(Path(__file__).resolve().parent.parent)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from benchmarks._common import load, machine  # noqa: E402
from benchmarks.shuffle import RssSampler, frame_summary, frames, parse_size, rows_in  # noqa: E402

MIB = 2**20
TOP = 8


def heap() -> dict:
    """glibc's view of the C heap in this process (``mallinfo2``), bytes."""

    class _Mallinfo2(ctypes.Structure):  # here: a class of __main__ would be pickled by value
        _fields_ = [(n, ctypes.c_size_t) for n in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost",
        )]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _Mallinfo2
    m = libc.mallinfo2()
    return {"in_use": m.uordblks, "free_kept": m.fordblks, "mmapped": m.hblkhd, "arena": m.arena}


def rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def arm(trace: bool, at: int = 1, dask_worker=None) -> None:
    """Wrap ``run.build`` so the first unpack of the round takes the measurements."""
    import tracemalloc

    import pyarrow as pa

    import reference_impl.shuffle.run as run_module
    from reference_impl.shuffle.plugin import get_extension

    if trace:
        tracemalloc.start(1)
    original = getattr(run_module, "_profile_original", run_module.build)
    run_module._profile_original = original
    state: dict = {"rss_before": rss(), "heap_before": heap()}

    def build(*args, **kwargs):
        state["builds"] = state.get("builds", 0) + 1
        if "rss" not in state and state["builds"] >= at:
            ext = get_extension(dask_worker)
            runs = list(ext.runs.values())
            bufs = [b for r in runs for b in r.output_buffers().values()]
            state.update(
                builds_at=state["builds"],
                rss=rss(),
                heap=heap(),
                arrow=pa.total_allocated_bytes(),
                shards_memory=sum(len(b.memory) for b in bufs),
                shards_index=sum(len(b.index) * b.index.itemsize for b in bufs),
                shards_file=sum(b.file_bytes for b in bufs),
                budget=ext.budget.buffered,
                allowance=ext.budget.allowance(),
                in_flight=ext.in_flight,
                store_host=getattr(ext.store, "host_bytes", 0),
                store_device=getattr(ext.store, "device_bytes", 0),
            )
            if tracemalloc.is_tracing():
                state["traced"] = tracemalloc.get_traced_memory()[0]
                snap = tracemalloc.take_snapshot()
                state["lines"] = [
                    (f"{s.traceback[0].filename.replace(REPO + '/', '')}:{s.traceback[0].lineno}", s.size, s.count)
                    for s in snap.statistics("lineno")[:TOP]
                ]
        return original(*args, **kwargs)

    run_module.build = build
    dask_worker._profile_lazy = state
    ext = get_extension(dask_worker)
    stop = state["stop"] = threading.Event()

    def sample() -> None:  # what the shuffle held when this process's RSS peaked
        while not stop.wait(0.01):
            now = rss()
            if now > state.get("peak", (0,))[0]:
                state["peak"] = (now, ext.in_flight, ext.budget.buffered)

    state["sampler"] = threading.Thread(target=sample, daemon=True)
    state["sampler"].start()


def collect(dask_worker=None) -> dict:
    import tracemalloc

    import reference_impl.shuffle.run as run_module

    run_module.build = run_module._profile_original
    state = dask_worker._profile_lazy
    del dask_worker._profile_lazy
    state.pop("stop").set()
    state.pop("sampler").join()
    if tracemalloc.is_tracing():
        state["traced_peak"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    time.sleep(0.5)  # the close's collection and trim (a thread of the extension) land
    state["rss_after"] = rss()
    state["heap_after"] = heap()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    state["rss_trimmed"] = rss()
    return state


def run_once(client, method: str, n: int, rows: int) -> None:
    from reference_impl.shuffle.in_dask import device_shuffle

    def go(**kw) -> None:
        out = frames(n, rows).shuffle("key", npartitions=n, force=True, **kw)
        got = out.map_partitions(frame_summary, meta={"rows": "i8", "psum": "i8"}).compute()
        assert int(got["rows"].sum()) == n * rows

    if method == "ours-lazy":
        with device_shuffle(client):
            go()
    else:
        go(shuffle_method=method)


def main(argv: list[str] | None = None) -> None:
    import distributed

    from reference_impl.shuffle import LocalDeviceCluster

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=256)
    ap.add_argument("--part-size", default="256KiB")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--method", default="ours-lazy", choices=("ours-lazy", "p2p"))
    ap.add_argument("--device-limit", default="128MiB")
    ap.add_argument("--host-limit", default="128MiB")
    ap.add_argument("--trace", action="store_true", help="tracemalloc by line (slower)")
    ap.add_argument("--at", type=int, default=1, help="measure at this unpack of the worker, not the first")
    args = ap.parse_args(argv)
    n = args.partitions
    rows = rows_in(parse_size(args.part_size))
    print(f"machine: {machine()}")
    print(f"load: {load()}")
    print(f"{args.method}: {n} x {n} partitions of {args.part_size} ({rows} rows), 2 workers, "
          f"device limit {args.device_limit}, host limit {args.host_limit}", flush=True)
    with (
        LocalDeviceCluster(
            2, device="sim", device_capacity="8GiB", device_memory_limit=args.device_limit,
            memory_limit=args.host_limit, local_directory=tempfile.mkdtemp(),
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        run_once(client, args.method, 4, 500)  # warm-up
        pids = client.run(os.getpid)
        for rnd in range(args.rounds):
            client.run(arm, args.trace, args.at)
            time.sleep(0.2)
            with RssSampler(pids) as sampler:
                t0 = time.perf_counter()
                run_once(client, args.method, n, rows)
                wall = time.perf_counter() - t0
            got = client.run(collect)
            print(f"\nround {rnd + 1}: {wall:.1f} s, load {os.getloadavg()[0]:.1f}")
            for w, s in sorted(got.items()):
                peak = sampler.peak(w) - s["rss_before"]
                hb = s["heap_before"]
                line = (f"  {w}: RSS before {s['rss_before'] / MIB:.0f} MiB (glibc in use {hb['in_use'] / MIB:.1f}, "
                        f"free kept {hb['free_kept'] / MIB:.1f}, mmapped {hb['mmapped'] / MIB:.1f}), "
                        f"peak growth +{peak / MIB:.0f}")
                if "peak" in s:
                    at, flight, held = s["peak"]
                    line += (f" (sampled in the worker: +{(at - s['rss_before']) / MIB:.0f}, with "
                             f"{flight / MIB:.1f} in flight from it and {held / MIB:.1f} of shards in memory)")
                if "rss" in s:
                    h = s["heap"]
                    line += (
                        f"; at unpack {s['builds_at']} +{(s['rss'] - s['rss_before']) / MIB:.1f}: shards in memory "
                        f"{s['shards_memory'] / MIB:.1f} + index {s['shards_index'] / MIB:.2f}, in files "
                        f"{s['shards_file'] / MIB:.1f} (allowance {s['allowance'] / MIB:.0f}), in flight "
                        f"{s['in_flight'] / MIB:.1f}, store host {s['store_host'] / MIB:.1f} device "
                        f"{s['store_device'] / MIB:.1f}; glibc in use {h['in_use'] / MIB:.1f} free kept "
                        f"{h['free_kept'] / MIB:.1f} mmapped {h['mmapped'] / MIB:.1f}; Arrow pool "
                        f"{s['arrow'] / MIB:.1f}"
                    )
                    if "traced" in s:
                        line += f"; traced {s['traced'] / MIB:.1f} (peak {s['traced_peak'] / MIB:.1f})"
                ha = s["heap_after"]
                line += (
                    f"; after: RSS +{(s['rss_after'] - s['rss_before']) / MIB:.1f} (glibc in use "
                    f"{ha['in_use'] / MIB:.1f}, free kept {ha['free_kept'] / MIB:.1f}, mmapped "
                    f"{ha['mmapped'] / MIB:.1f}), trimmed "
                    f"+{(s['rss_trimmed'] - s['rss_before']) / MIB:.1f}"
                )
                print(line)
                for where, size, count in s.get("lines", []):
                    print(f"    {where}: {size / MIB:.2f} MiB in {count:,} blocks")
    print(f"\nload after: {load()}")


if __name__ == "__main__":
    main()
