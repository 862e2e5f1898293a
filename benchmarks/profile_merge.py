"""What a worker holds at its RSS peak during a hash merge through dask's API.

Run from the repository root:

    .venv/bin/python benchmarks/profile_merge.py                      # 2M x 1M rows, 16 partitions
    .venv/bin/python benchmarks/profile_merge.py --methods ours --rounds 3

``benchmarks/dask_ops.py``'s merge (same frames, same cluster spec), each method in turn.
A thread in each worker samples its RSS every 10 ms; when the RSS peaks it records what the
worker's data held then, by task name (``key_split``: the left shuffle's outputs, the
right's, the merge's), the device shuffle's shard bytes in memory and in flight, and the
tasks executing. A second record is the most shuffle output held unmerged: the bytes of
shuffle outputs (``SHUFFLED``) in the worker's data. The question it answers: does one
side's output wait, unpacked, for the other side's barrier (dask lowers a merge under a
non-P2P method to two shuffles and a blockwise merge), where P2P's ``HashJoinP2P`` unpacks
both sides in the task that merges them?
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
from pathlib import Path

REPO = str(Path(__file__).resolve().parent.parent)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from benchmarks._common import load, machine  # noqa: E402
from benchmarks.dask_ops import cluster, frames, merge  # noqa: E402
from benchmarks.profile_lazy import heap  # noqa: E402
from benchmarks.shuffle import mib  # noqa: E402

METHODS = ("ours", "p2p", "tasks")
# key_split of a shuffle's outputs held as results: ours (its unpacks and their aliases) and
# dask's tasks shuffle; P2P's outputs never are (HashJoinP2P unpacks inside the merge task)
SHUFFLED = ("devshuffle", "deviceshuffle", "simpleshuffle", "taskshuffle")


def _held(dask_worker) -> dict[str, int]:
    """Bytes in the worker's data by task name."""
    from dask.utils import key_split

    tasks = dask_worker.state.tasks
    held: dict[str, int] = {}
    for key in list(dask_worker.data.keys()):
        ts = tasks.get(key)
        name = key_split(key)
        held[name] = held.get(name, 0) + ((ts.nbytes or 0) if ts is not None else 0)
    return held


def _shards(dask_worker) -> tuple[int, int]:
    """The device shuffle's shard bytes in memory and in flight on this worker (0 without it)."""
    try:
        from reference_impl.shuffle.plugin import get_extension

        ext = get_extension(dask_worker)
    except Exception:  # noqa: BLE001 - no extension: a P2P or tasks run
        return 0, 0
    return int(ext.budget.buffered), int(ext.in_flight)


def arm(dask_worker=None) -> None:
    """Start the sampler thread in this worker."""
    import psutil
    from dask.utils import key_split

    proc = psutil.Process()
    before = proc.memory_info().rss
    state: dict = {"before": before, "peak": (0,), "unmerged": (0, before, {})}  # P2P holds none
    stop = state["stop"] = threading.Event()

    def sample() -> None:
        while not stop.wait(0.01):
            now = proc.memory_info().rss
            held = _held(dask_worker)
            unmerged = sum(v for k, v in held.items() if k.startswith(SHUFFLED))
            if now > state["peak"][0]:
                executing = sorted({key_split(ts.key) for ts in dask_worker.state.executing})
                state["peak"] = (now, held, _shards(dask_worker), executing, heap())
            if unmerged > state["unmerged"][0]:
                state["unmerged"] = (unmerged, now, held)

    state["thread"] = threading.Thread(target=sample, daemon=True)
    state["thread"].start()
    dask_worker._profile_merge = state


def collect(dask_worker=None) -> dict:
    state = dask_worker._profile_merge
    del dask_worker._profile_merge
    state.pop("stop").set()
    state.pop("thread").join()
    return state


def _breakdown(held: dict[str, int]) -> str:
    top = sorted(held.items(), key=lambda kv: -kv[1])[:6]
    return ", ".join(f"{k} {mib(v)}" for k, v in top if v) or "nothing"


def main(argv: list[str] | None = None) -> None:
    import dask
    import distributed

    from reference_impl.shuffle.in_dask import device_shuffle

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2_000_000, help="rows of the left frame (the right has half)")
    p.add_argument("--partitions", type=int, default=16)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--methods", default="ours,p2p")
    args = p.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        p.error(f"unknown methods {', '.join(unknown)}; choose from {', '.join(METHODS)}")
    print(f"{machine()}; {load()}", flush=True)
    with cluster() as (_, client):
        left, right = frames(args.rows, args.partitions)
        left, right = left.persist(), right.persist()
        distributed.wait([left, right])
        for method in methods:  # warm-up: imports, kernels, plugins
            with device_shuffle(client) if method == "ours" else contextlib.nullcontext():
                dask.compute(*merge(left, right, None if method == "ours" else method))
        for rnd in range(args.rounds):
            for method in methods:
                client.run(arm)
                time.sleep(0.1)
                with device_shuffle(client) if method == "ours" else contextlib.nullcontext():
                    start = time.perf_counter()
                    dask.compute(*merge(left, right, None if method == "ours" else method))
                    seconds = time.perf_counter() - start
                print(f"\nround {rnd + 1} {method}: {seconds:.2f} s (load {os.getloadavg()[0]:.2f})", flush=True)
                for worker, s in sorted(client.run(collect).items()):
                    rss, held, (shards, flight), executing, glibc = s["peak"]
                    print(f"  {worker}: RSS peak +{mib(rss - s['before'])} MiB; data then: {_breakdown(held)} MiB; "
                          f"shards in memory {mib(shards)}, in flight {mib(flight)} MiB; glibc in use "
                          f"{mib(glibc['in_use'])}, free kept {mib(glibc['free_kept'])}, mmapped "
                          f"{mib(glibc['mmapped'])} MiB; executing {', '.join(executing) or 'nothing'}")
                    unmerged, at, held_u = s["unmerged"]
                    print(f"    most shuffle output held unmerged: {mib(unmerged)} MiB (RSS then +{mib(at - s['before'])}): "
                          f"{_breakdown(held_u)} MiB")
    print(f"\nafter: {load()}")


if __name__ == "__main__":
    main()
