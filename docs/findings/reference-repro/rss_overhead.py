"""The figures behind SPEC 14.20's fixed overhead (SHUF-BOUND-003): each worker's RSS growth
after a warm-up shuffle of the same size, for shuffles of 200 rows (the part that does not
grow with the data) and of 4x what the workers may hold in RAM (the part that does).

Uses the suite's own cluster (``conformance.shuffle.harness.ShuffleCluster``: 2 workers under
nannies, 1 MiB device and 2 MiB host limit each, the workers' allocators set to give freed
memory back) and its RSS sampler (psutil, every 5 ms), so that it measures what the suite
measures.

Run (any implementation the suite loads; dask-cuda-explicit-comms from .venv-daskcuda):
  .venv/bin/python docs/findings/reference-repro/rss_overhead.py reference [inputs] [repeats]
Prints, per shuffle: the worst worker's growth, the largest partition, and the growth above
what a worker may hold in RAM in units of that partition. 2026-12-02 (load 5-8 on 2 cores),
12 inputs: reference 200-row shuffles <= 0.01 MiB, 24 MiB shuffles 6.4-8.9 MiB (RAM 3 MiB +
1.7-2.9 x 2 MiB); distributed-p2p <= 0.29 and 69-78 MiB (its 8 MiB budget + 11-13 x 5.35 MiB);
dask-tasks <= 0.01 and 29-37 MiB; dask-cuda-explicit-comms <= 3.6 and 23-33 MiB.
"""

from __future__ import annotations

import sys
import tempfile
import time

from conformance.runner.loader import resolve
from conformance.shuffle.harness import RssSampler, ShuffleCluster
from conformance.shuffle.tables import uniform_case

MIB = 2**20


def growth(cluster, case) -> tuple[int, int, float]:
    """The worst worker's RSS growth during one shuffle of ``case``, its largest partition and
    the seconds it took."""
    inputs = cluster.load(case.tables)
    sampler = RssSampler(cluster.worker_pids())
    start = time.perf_counter()
    outputs = cluster.adapter.shuffle(inputs, list(case.on), case.npartitions, cluster.env)
    grew = sampler.stop()
    largest = max(max(t.nbytes for t in case.tables), max(o.nbytes for o in outputs))
    return max(grew.values()), largest, time.perf_counter() - start


def main() -> None:
    impl = sys.argv[1] if len(sys.argv) > 1 else "reference"
    n_inputs = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    adapter = resolve(impl)
    with tempfile.TemporaryDirectory() as spill:
        cluster = ShuffleCluster(adapter, "sim", spill, device_limit=MIB, host_limit=2 * MIB)
        try:
            ram = cluster.rss_allowance()
            rows = 4 * ram * cluster.env.n_workers // n_inputs // 24
            print(f"{impl}: a worker may hold {ram / MIB:.1f} MiB in RAM; data "
                  f"{4 * ram * cluster.env.n_workers / MIB:.0f} MiB in {n_inputs} inputs")

            def full(seed):
                return uniform_case(n_inputs, rows, n_inputs, seed=seed)

            def tiny(seed):
                return uniform_case(2, 100, 2, seed=seed)

            for what, make in (("warm-up, 200 rows", tiny), ("first full-size", full)):
                g, _largest, secs = growth(cluster, make(0))
                print(f"  {what}: {g / MIB:.2f} MiB ({secs:.1f} s)")
            for r in range(repeats):
                g, _largest, secs = growth(cluster, tiny(r + 1))
                print(f"  200 rows #{r + 1}: {g / MIB:.2f} MiB ({secs:.1f} s)")
            for r in range(repeats):
                g, largest, secs = growth(cluster, full(r + 1))
                print(f"  full-size #{r + 1}: {g / MIB:.2f} MiB, largest partition "
                      f"{largest / MIB:.2f} MiB: RAM + {(g - ram) / largest:.2f} x it ({secs:.1f} s)")
        finally:
            cluster.close()


if __name__ == "__main__":  # the nannies spawn worker processes
    main()
