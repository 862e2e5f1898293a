"""Shared by the shuffle tests: tables in, an oracle out (imported by worker processes too).

``worker_addresses`` is re-exported: tests list the workers through it, never through
``client.scheduler_info()``, whose cache can list none (see its docstring)."""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Sequence

import distributed
import numpy as np
import pyarrow as pa

from conformance.shuffle.harness import worker_addresses
from reference_impl import Table, get_device
from reference_impl.shuffle import LocalDeviceCluster
from reference_impl.shuffle.plugin import EXTENSION
from reference_impl.table.partition import partition_ids


def cluster(tmp_path, n_workers: int = 2, **kw) -> LocalDeviceCluster:
    kw.setdefault("device_capacity", "64 MiB")
    kw.setdefault("device_memory_limit", "4 MiB")
    kw.setdefault("memory_limit", "8 MiB")
    return LocalDeviceCluster(n_workers, local_directory=str(tmp_path), **kw)


def to_device(data: pa.Table) -> Table:
    """Task: an Arrow table onto the worker's own device."""
    return Table.from_arrow(data, get_device("auto"))


def scatter_tables(client: distributed.Client, tables: Sequence[pa.Table]) -> list:
    """Inputs as futures of device Tables, spread round-robin over the workers."""
    workers = worker_addresses(client)
    return [
        client.submit(to_device, t, workers=[workers[i % len(workers)]], pure=False)
        for i, t in enumerate(tables)
    ]


def key_token(row: dict, on: Sequence[str]) -> tuple:
    """Equal keys compare equal here: None, one NaN, -0.0 == 0.0; a list or struct by its
    repr (its floats by value: a nested key is exact, -0.0 is not 0.0 there)."""
    out = []
    for k in on:
        v = row[k]
        if isinstance(v, (list, dict)):
            v = repr(v)
        elif isinstance(v, float) and math.isnan(v):
            v = "nan"
        elif isinstance(v, float) and v == 0.0:
            v = 0.0
        out.append(v)
    return tuple(out)


def check_shuffle(inputs: Sequence[pa.Table], outputs: Sequence[Table], on, npartitions) -> None:
    """Every row exactly once, at the output the hash spec says, keys co-located,
    types and nulls kept, rows in input order within an output. Inputs carry a
    unique int64 ``rid``."""
    on = [on] if isinstance(on, str) else list(on)
    assert len(outputs) == npartitions
    schema = inputs[0].schema
    whole = pa.concat_tables(inputs)
    dev = get_device("sim", "256 MiB")
    expected_part = (
        np.asarray(dev.to_host(partition_ids(Table.from_arrow(whole, dev), on, npartitions)))
        if whole.num_rows
        else np.empty(0, np.int32)
    )
    by_rid = {r["rid"]: (i, r) for i, r in enumerate(whole.to_pylist())}
    seen: dict[int, int] = {}
    key_home: dict[tuple, int] = {}
    for p, out in enumerate(outputs):
        assert isinstance(out, Table), type(out)
        arrow = out.to_arrow()
        assert [(f.name, f.type) for f in arrow.schema] == [(f.name, f.type) for f in schema]
        order = []
        for row in arrow.to_pylist():
            rid = row["rid"]
            assert rid not in seen, f"row {rid} twice (outputs {seen.get(rid)} and {p})"
            seen[rid] = p
            i, original = by_rid[rid]
            assert row == original or _same(row, original), (row, original)
            assert expected_part[i] == p, f"row {rid} in output {p}, hash says {expected_part[i]}"
            home = key_home.setdefault(key_token(row, on), p)
            assert home == p, f"key {key_token(row, on)} in outputs {home} and {p}"
            order.append(i)
        assert order == sorted(order), f"output {p} rows not in input order"
    assert len(seen) == whole.num_rows, f"{whole.num_rows - len(seen)} rows missing"


def _same(a: dict, b: dict) -> bool:
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, (list, dict)) and repr(x) == repr(y):  # nested NaNs and -0.0 too
            continue
        if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
            continue
        if x != y or (isinstance(x, float) and math.copysign(1, x) != math.copysign(1, y)):
            return False
    return True


def worker_state(dask_worker) -> dict:
    """client.run probe: what the shuffle left on a worker."""
    ext = dask_worker.extensions.get(EXTENSION)
    stats = dask_worker.data.stats()
    return {
        "runs": sorted(ext.runs) if ext else None,
        "externals": sum(stats[f"{t}_externals"] for t in ("device", "host", "disk")),
        "reserved": ext.reserved if ext else None,
        "in_flight": ext.in_flight if ext else None,
        "peak": dask_worker.data.device.peak_bytes(),
    }


def spill_files(dask_worker) -> list[str]:
    import os

    out = []
    for root, _, files in os.walk(dask_worker.data.spill_dir):
        out.extend(os.path.join(root, f) for f in files)
    return out


def shuffle_keys(dask_scheduler) -> list[str]:
    return [str(k) for k in dask_scheduler.tasks if "devshuffle" in str(k)]


def rows_by_output(outputs) -> dict[int, int]:
    counts: dict[int, int] = defaultdict(int)
    for i, t in enumerate(outputs):
        counts[i] += t.num_rows
    return dict(counts)


def coordinator_state(dask_scheduler) -> dict:
    plugin = dask_scheduler.plugins["device-shuffle-coordinator"]
    return {"active": len(plugin.active), "by_key": len(plugin.by_key)}


def assert_clean(client, timeout: float = 15.0) -> None:
    """Nothing of any shuffle left, polled until ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        workers = client.run(worker_state)
        files = client.run(spill_files)
        coord = client.run_on_scheduler(coordinator_state)
        keys = client.run_on_scheduler(shuffle_keys)
        clean = (
            all(s["runs"] == [] and s["externals"] == 0 and s["in_flight"] == 0 and s["reserved"] == 0
                for s in workers.values())
            and not any(files.values())
            and coord == {"active": 0, "by_key": 0}
            and keys == []
        )
        if clean:
            return
        if time.monotonic() > deadline:
            stored = client.run(lambda dask_worker: {str(k): dask_worker.data.tier_of(k) for k in dask_worker.data})
            raise AssertionError(
                f"left behind: workers {workers}, files {files}, plugin {coord}, keys {keys}, "
                f"stored {stored}, who_has {client.who_has()}"
            )
        time.sleep(0.1)
