"""A device Table that dask moves between workers lands on the receiving worker's device
outside its store's room, so the device peaks above the store's limit.

Run: .venv/bin/python docs/findings/reference-repro/device_table_moved_by_dask.py
Prints the limit and each worker's device peak while 48 tables are read on the worker that
does NOT hold them (what work stealing does to a task placed away from its data), then the
same read on the holder. Before the fix (reference_impl/store/comms.py, 2026-12-01) the
first peaked at 4.2x the limit; now both stay at or below it.
"""

from __future__ import annotations

import os
import tempfile

import distributed
import numpy as np
import pyarrow as pa

from reference_impl import Table, get_device
from reference_impl.device import default_device
from reference_impl.shuffle import LocalDeviceCluster

LIMIT = 2**20


def make(seed: int) -> Table:
    rng = np.random.default_rng(seed)
    return Table.from_arrow(pa.table({"a": rng.random(16_000)}), get_device("auto"))  # 128 KiB


def reset() -> int:
    default_device().reset_peak()
    return default_device().bytes_in_use()


def peak() -> int:
    return default_device().peak_bytes()


def nbytes(table: Table) -> int:
    return table.to_arrow().nbytes


def main() -> None:
    with tempfile.TemporaryDirectory() as d, LocalDeviceCluster(
        2, device_capacity=64 * LIMIT, device_memory_limit=LIMIT, local_directory=d
    ) as cluster, distributed.Client(cluster) as client:
        a, b = sorted(client.run(os.getpid))  # the workers, asked of them (not a cache)
        tables = [client.submit(make, i, workers=[a], pure=False) for i in range(48)]
        distributed.wait(tables)  # 6 MiB on worker a: its store spills all but 1 MiB
        for reader, what in ((b, "on the other worker"), (a, "on the holder")):
            client.run(reset)
            client.gather(
                [client.submit(nbytes, t, workers=[reader], pure=False) for t in tables]
            )
            print(f"read {what}: limit {LIMIT:,}, device peaks {client.run(peak)}")


if __name__ == "__main__":
    main()
