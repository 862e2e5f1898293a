"""P2P's peak worker memory, by phase (SHUF-BOUND-001, SHUF-BOUND-002). Standalone: a loopback
LocalCluster (2 workers x 1 thread, no memory limit), P2P's two buffers set to 4 MiB each (the
conformance adapter's budget: 8 MiB), RSS of each worker sampled every 5 ms with psutil, the end
of the barrier task marked on the scheduler.

Run: .venv/bin/python docs/findings/distributed-p2p-repro/memory_phases.py
Deterministic in what it shows (the figures vary by some MiB from run to run):
  * 16 inputs of 4 MiB -> 16 outputs: RSS growth ~20-27x a partition above the 8 MiB budget,
    most of it in the transfer phase (the buffers count only buffered shards).
  * 32 inputs of 2 MiB -> 2 outputs of 32 MiB (one per worker): the unpack phase adds ~5-6x an
    output partition over the level at the barrier's end.
Every output is fetched as soon as it is computed and released (as the conformance adapter does),
so finished outputs do not pile up on the workers.
"""

import threading
import time

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import psutil
from distributed import Client, LocalCluster, as_completed
from distributed.diagnostics.plugin import SchedulerPlugin

MiB = 2**20
BUDGET = 8 * MiB  # comm.buffer + storage.buffer


class BarrierEnd(SchedulerPlugin):
    def __init__(self):
        self.t = None

    def transition(self, key, start, finish, *args, **kwargs):
        if finish == "memory" and "shuffle-barrier-" in str(key):
            self.t = time.monotonic()


class Sampler:
    def __init__(self, pids):
        self.procs = {w: psutil.Process(p) for w, p in pids.items()}
        self.samples = {w: [] for w in pids}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            for w, p in self.procs.items():
                self.samples[w].append((time.monotonic(), p.memory_info().rss))
            time.sleep(0.005)

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.samples


def make(i, rows):
    rng = np.random.default_rng(i)
    return pd.DataFrame(
        {
            "k0": pd.array(rng.integers(0, 1 << 40, rows), dtype="int64[pyarrow]"),
            "p0": pd.array(rng.random(rows), dtype="double[pyarrow]"),
            "row_id": pd.array(np.arange(i * rows, (i + 1) * rows), dtype="int64[pyarrow]"),
        }
    )


def run(client, cluster, n_in, n_out, total):
    rows = total // n_in // 24
    futures = [client.submit(make, i, rows, pure=False) for i in range(n_in)]
    client.gather(futures)  # the inputs are in place before measuring
    ddf = dd.from_delayed(futures, meta=make(0, 0))
    out = ddf.shuffle("k0", npartitions=n_out, shuffle_method="p2p", force=True)
    barrier = BarrierEnd()
    cluster.scheduler.add_plugin(barrier, name=f"barrier-{n_in}-{n_out}")
    sampler = Sampler(client.run(lambda: __import__("os").getpid()))
    sizes = []
    for fut in as_completed(client.compute(out.to_delayed()), loop=client.loop):
        sizes.append(fut.result().memory_usage(index=False, deep=True).sum())
        del fut
    samples = sampler.stop()
    out_max, in_max = max(sizes), rows * 24
    print(f"{n_in} inputs of {in_max / MiB:.1f} MiB -> {n_out} outputs of {out_max / MiB:.1f} MiB")
    for w, xs in samples.items():
        base = xs[0][1]
        before = [r for t, r in xs if t <= barrier.t]
        after = [r for t, r in xs if t > barrier.t]
        peak = max(r for _, r in xs)
        print(
            f"  worker {w[-5:]}: RSS growth {(peak - base) / MiB:.0f} MiB = budget + "
            f"{(peak - base - BUDGET) / max(in_max, out_max):.1f}x the largest partition; "
            f"transfer peak +{(max(before) - base) / MiB:.0f} MiB, at barrier end "
            f"+{(before[-1] - base) / MiB:.0f} MiB, unpack peak +{(max(after) - base) / MiB:.0f} MiB "
            f"= {(max(after) - before[-1]) / out_max:.1f}x an output over the barrier level"
        )


if __name__ == "__main__":
    config = {"distributed.p2p.comm.buffer": 4 * MiB, "distributed.p2p.storage.buffer": 4 * MiB}
    with (
        dask.config.set(config),
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address="127.0.0.1:0", memory_limit=0,
        ) as cluster,
        Client(cluster) as client,
    ):
        run(client, cluster, 2, 2, 2 * MiB)  # warm: imports are not the shuffle's memory
        total = 4 * BUDGET * 2  # four times the aggregate budget, as the suite does
        run(client, cluster, 16, 16, total)
        run(client, cluster, 32, 2, total)
