"""Values that dask moves between workers land in the receiving worker's store, on the host
tier, and reach the device only through the store, after it made room
(docs/findings/reference.md#shuf-transfers)."""

from __future__ import annotations

import distributed
import numpy as np
import pyarrow as pa
from shuffle_helpers import cluster, worker_addresses

from reference_impl import ProxifyHostFile, Table, get_device
from reference_impl.device import default_device

LIMIT = 2**20
N_TABLES = 48  # 48 x 128,000 bytes: 6x the limit, all fetched by the other worker at once


def make(seed: int) -> Table:
    rng = np.random.default_rng(seed)
    return Table.from_arrow(pa.table({"a": rng.random(16_000)}), get_device("auto"))


def reset_peak() -> int:
    default_device().reset_peak()
    return default_device().bytes_in_use()


def device_peak() -> int:
    return default_device().peak_bytes()


def first_value(t: Table) -> float:
    return float(t.to_arrow().column("a")[0].as_py())


def host_tier_keys(dask_worker) -> int:
    store = dask_worker.data
    assert isinstance(store, ProxifyHostFile)
    return sum(store.tier_of(k) != "device" for k in store)


def test_tables_read_on_another_worker_stay_within_its_limit(tmp_path):
    with (
        cluster(tmp_path, device_memory_limit=LIMIT, memory_limit=None) as c,
        distributed.Client(c) as client,
    ):
        a, b = worker_addresses(client)
        tables = [client.submit(make, i, workers=[a], pure=False) for i in range(N_TABLES)]
        distributed.wait(tables)
        client.run(reset_peak)
        firsts = client.gather(
            [client.submit(first_value, t, workers=[b], allow_other_workers=False, pure=False)
             for t in tables]
        )
        peaks = client.run(device_peak)
        want = [float(np.random.default_rng(i).random(16_000)[0]) for i in range(N_TABLES)]
        assert firsts == want
        # Before the fix, b's device peaked at 4,352,000 bytes: every fetched table was
        # rebuilt on the device before its store saw it.
        assert peaks[b] <= LIMIT, peaks
        assert peaks[a] <= LIMIT, peaks  # sending does not unspill
        assert client.run(host_tier_keys, workers=[b])[b] > 0  # landed on the host tier
        # The client, where no store lives, still gets the Table the task returned.
        got = client.gather(tables[0])
        assert type(got) is Table and first_value(got) == want[0]
