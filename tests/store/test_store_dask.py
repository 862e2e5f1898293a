"""The store works as a dask worker's data store on a tiny in-process cluster."""

from __future__ import annotations

import distributed  # a hard dependency (pyproject.toml): missing, this must error, not skip
import numpy as np

from reference_impl import ProxifyHostFile, ProxyObject, SimArray, get_device


def make(i):
    dev = distributed.get_worker().data.device  # tasks allocate on the store's device
    a = dev.empty(100)
    a.view(np.ndarray)[:] = i
    return a


def total(parts):
    return float(sum(float(np.sum(p)) for p in parts))


def first_value_type(dask_worker):
    return type(dask_worker.data[next(iter(dask_worker.data))]).__name__


def test_local_cluster_computation(tmp_path):
    dev = get_device("sim", "1 MiB")
    kwargs = {"device": dev, "device_memory_limit": 2000, "local_directory": str(tmp_path)}
    with (
        distributed.LocalCluster(
            n_workers=1,
            processes=False,
            threads_per_worker=1,
            host="127.0.0.1",
            protocol="tcp",
            dashboard_address=None,
            data=(ProxifyHostFile, kwargs),
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        futures = [client.submit(make, i, pure=False) for i in range(6)]
        result = client.submit(total, futures).result(timeout=30)
        assert result == 100.0 * sum(range(6))
        (worker,) = cluster.workers.values()
        store = worker.data
        assert isinstance(store, ProxifyHostFile)
        assert str(tmp_path) in store.spill_dir or store.spill_dir.startswith(str(tmp_path))
        snap = store.snapshot()
        assert snap.device_bytes <= 2000
        assert set(snap.tiers.values()) >= {"device", "host"}  # 6 x 800 B > limit: some spilled
        kinds = client.run(first_value_type)
        assert set(kinds.values()) <= {ProxyObject.__name__}
        gathered = client.gather(futures)  # proxies on the worker, the arrays at the client
        assert {type(a) for a in gathered} == {SimArray}
        assert [float(a.view(np.ndarray)[0]) for a in gathered] == list(range(6))
        del futures
