"""LocalDeviceCluster and DeviceWorkerPlugin: each worker its own device and store."""

from __future__ import annotations

import distributed
import pyarrow as pa
import pytest

from conformance.shuffle.harness import worker_addresses
from reference_impl import ProxifyHostFile, Table, get_device
from reference_impl.device import set_default_device
from reference_impl.shuffle import DeviceWorkerPlugin, LocalDeviceCluster
from reference_impl.shuffle.plugin import EXTENSION


def device_seen_by_task() -> dict:
    w = distributed.get_worker()
    dev = get_device("auto")
    a = dev.empty(10, "int64")  # made "as a new user would": it lands on the store's device
    return {
        "same": dev is w.data.device,
        "token": dev.token,
        "capacity": dev.capacity,
        "store": type(w.data).__name__,
        "limit": w.data.device_memory_limit,
        "counted": dev.bytes_in_use() >= a.nbytes,
    }


def make_table(n: int) -> Table:
    return Table.from_arrow(pa.table({"x": list(range(n))}), get_device("auto"))


def probe(dask_worker) -> dict:
    return {"ext": EXTENSION in dask_worker.extensions, "store": type(dask_worker.data).__name__}


def test_each_worker_has_its_own_device_and_store(tmp_path):
    with (
        LocalDeviceCluster(
            2, device_capacity="8 MiB", device_memory_limit="1 MiB", memory_limit="2 MiB",
            local_directory=str(tmp_path),
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        workers = worker_addresses(client)
        seen = [
            client.submit(device_seen_by_task, workers=[w], pure=False).result(30)
            for w in workers
        ]
        assert all(s["same"] and s["counted"] for s in seen)
        assert {s["capacity"] for s in seen} == {8 * 2**20}
        assert {s["limit"] for s in seen} == {2**20}
        assert {s["store"] for s in seen} == {"ProxifyHostFile"}
        assert seen[0]["token"] != seen[1]["token"]
        assert all(p["ext"] for p in client.run(probe).values())
        got = client.submit(make_table, 5, pure=False).result(30)
        assert type(got) is Table and got.to_arrow().column("x").to_pylist() == list(range(5))


def test_a_plain_worker_gets_the_set_up_from_the_plugin(tmp_path):
    try:
        _plain_worker(tmp_path)
    finally:  # the worker lived in this process: its device must not stay this process's
        set_default_device(None)


def _plain_worker(tmp_path):
    with (
        distributed.LocalCluster(
            n_workers=1, processes=False, threads_per_worker=1, host="127.0.0.1",
            protocol="tcp", dashboard_address=None, local_directory=str(tmp_path),
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        (before,) = client.run(probe).values()
        assert before == {"ext": False, "store": "SpillBuffer"}
        client.register_plugin(
            DeviceWorkerPlugin("sim", "4 MiB", device_memory_limit=0.5, memory_limit="1 MiB")
        )
        (state,) = client.run(probe).values()
        assert state == {"ext": True, "store": "ProxifyHostFile"}
        seen = client.submit(device_seen_by_task, pure=False).result(30)
        assert seen["same"] and seen["limit"] == 2 * 2**20
        (worker,) = cluster.workers.values()
        assert isinstance(worker.data, ProxifyHostFile) and worker.state.data is worker.data


def test_bad_cluster_arguments():
    with pytest.raises(ValueError, match="device must be 'sim' or 'cuda', got 'tpu'"):
        LocalDeviceCluster(1, device="tpu")
    with pytest.raises(ValueError, match="processes=False supports one worker"):
        LocalDeviceCluster(2, processes=False)


def table_device_matches() -> dict:
    import pandas as pd

    from reference_impl.shuffle.frames import arrow_schema_of, to_table
    from reference_impl.shuffle.worker_device import worker_device

    df = pd.DataFrame({"x": [1, 2, 3]})
    table = to_table(df, df.iloc[:0], arrow_schema_of(df), 0)
    worker = distributed.get_worker()
    device = worker_device(worker)
    return {
        "own": device is worker.data.device,
        "table": table.columns[0].device is device,
        "token": device.token,
    }


def test_in_process_workers_make_tables_on_their_own_devices(tmp_path):
    """Two workers in one process share the process default device (the last set wins):
    a task's Table must land on its own worker's, as the distributed suite's in-process
    clusters run it."""
    try:
        with (
            distributed.LocalCluster(
                n_workers=2, processes=False, threads_per_worker=1, host="127.0.0.1",
                protocol="tcp", dashboard_address=None, local_directory=str(tmp_path),
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            client.register_plugin(DeviceWorkerPlugin("sim", "4 MiB", memory_limit="1 MiB"))
            seen = [
                client.submit(table_device_matches, workers=[w], pure=False).result(30)
                for w in worker_addresses(client)
            ]
            assert [s["own"] and s["table"] for s in seen] == [True, True]
            assert seen[0]["token"] != seen[1]["token"]
    finally:
        set_default_device(None)
