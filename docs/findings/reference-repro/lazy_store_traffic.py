"""What a worker's store does during SHUF-BOUND-003's shuffle, and what it holds at the
worker's RSS peak: the figures behind "reference-in-dask, SHUF-BOUND-003" in
docs/findings/reference.md.

The suite's own cluster (``ShuffleCluster``: 2 workers, 1 MiB device and 2 MiB host limit
each, the workers' allocators set to give freed memory back), 12 inputs of 2 MiB into 12
outputs, three shuffles in a row (the first warms the cluster up). Per shuffle and worker it
prints the RSS growth, the bytes its store wrote to and read from disk (``stats()``), and, at
its RSS peak, the store's tiers and bytes in memory and the task the worker was running.

Run: .venv/bin/python docs/findings/reference-repro/lazy_store_traffic.py [reference-in-dask]
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from collections import Counter

from conformance.runner.loader import resolve
from conformance.shuffle.harness import RssSampler, ShuffleCluster
from conformance.shuffle.tables import uniform_case

MIB = 2**20


def _watch(dask_worker=None) -> bool:
    """Sample this worker every 3 ms; keep the sample of highest RSS."""
    import psutil

    proc, store = psutil.Process(), dask_worker.data
    state = {"stop": False, "peak": None}

    def loop() -> None:
        while not state["stop"]:
            rss = proc.memory_info().rss
            if state["peak"] is None or rss > state["peak"][0]:
                try:
                    tiers = dict(Counter(store.tier_of(k) for k in list(store.keys())))
                except Exception as exc:  # noqa: BLE001 - a key went between the calls
                    tiers = {"?": repr(exc)}
                running = [str(ts.key)[:60] for ts in dask_worker.state.executing]
                state["peak"] = (rss, tiers, store.device_bytes, store.host_bytes, running)
            time.sleep(0.003)

    threading.Thread(target=loop, daemon=True).start()
    dask_worker._traffic_watch = state
    return True


def _peak(dask_worker=None):
    state = dask_worker._traffic_watch
    state["stop"] = True
    return state["peak"]


def _disk(dask_worker=None) -> tuple[int, int]:
    stats = dask_worker.data.stats()
    return stats["disk_written_bytes"], stats["disk_read_bytes"]


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def main() -> None:
    impl = sys.argv[1] if len(sys.argv) > 1 else "reference-in-dask"
    with tempfile.TemporaryDirectory() as spill:
        cluster = ShuffleCluster(resolve(impl), "sim", spill, device_limit=MIB, host_limit=2 * MIB)
        try:
            client, n_inputs = cluster.client, 12
            rows = 4 * cluster.rss_allowance() * cluster.env.n_workers // n_inputs // 24
            for run in range(3):
                case = uniform_case(n_inputs, rows, n_inputs, seed=run)
                inputs = cluster.load(case.tables)
                base, disk = client.run(_rss), client.run(_disk)
                client.run(_watch)
                sampler = RssSampler(cluster.worker_pids())
                cluster.adapter.shuffle(inputs, list(case.on), case.npartitions, cluster.env)
                grew = sampler.stop()
                peaks, after = client.run(_peak), client.run(_disk)
                print(f"shuffle {run}{' (warm-up)' if run == 0 else ''}: worst RSS growth "
                      f"{max(grew.values()) / MIB:.1f} MiB")
                for w, (rss, tiers, dev, host, running) in peaks.items():
                    wrote = (after[w][0] - disk[w][0]) / MIB
                    read = (after[w][1] - disk[w][1]) / MIB
                    print(f"  {w}: wrote {wrote:.0f} MiB, read {read:.0f} MiB; at its peak "
                          f"(+{(rss - base[w]) / MIB:.1f} MiB) tiers {tiers}, device "
                          f"{dev / MIB:.2f} MiB, host {host / MIB:.2f} MiB, running {running}")
                del inputs
        finally:
            cluster.close()


if __name__ == "__main__":  # the nannies spawn worker processes
    main()
