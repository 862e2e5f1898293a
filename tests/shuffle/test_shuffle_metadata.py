"""What a worker keeps per received shard: O(outputs), not O(inputs x outputs).

Each kept shard used to be one store external and, spilled, one spill file with its
metadata: ~9 KiB of RSS per shard, inputs x outputs of them. Now the shards of one
output share one buffer (one bytearray, one array of index rows) and one file. The
probe runs on each worker when its first output is built, the moment the most shards
are held: 8 and 64 inputs of the same total size give 8x the shards but the same
number of objects and files.
"""

from __future__ import annotations

import os

import distributed
import numpy as np
import pyarrow as pa
import pytest
from shuffle_helpers import check_shuffle, cluster, scatter_tables

from reference_impl.shuffle import shuffle

TOTAL_ROWS = 96_000  # 2.25 MiB in three int64 columns: over the 1 MiB host tier of each worker
NPARTITIONS = 12


def tables(n_inputs: int) -> list[pa.Table]:
    rng = np.random.default_rng(n_inputs)
    rows = TOTAL_ROWS // n_inputs
    return [
        pa.table({
            "k": rng.integers(0, 1 << 30, rows),
            "rid": np.arange(i * rows, (i + 1) * rows),
            "v": rng.random(rows),
        })
        for i in range(n_inputs)
    ]


def probe_first_build(dask_worker) -> None:
    """Wrap the unpack's ``build``: on its first call, record what the worker holds."""
    import reference_impl.shuffle.run as unpack_module
    from reference_impl.shuffle.plugin import EXTENSION

    original = unpack_module.build
    seen: dict = {}

    def build(*args, **kwargs):
        if not seen:
            ext = dask_worker.extensions[EXTENSION]
            stats = dask_worker.data.stats()
            (run,) = ext.runs.values()
            outputs = run.output_buffers()
            files = os.listdir(run.directory) if os.path.isdir(run.directory) else []
            seen.update(
                shards=run.n_shards(),
                buffers=len(outputs),
                chunks=sum(len(b.chunks) for b in outputs.values()),
                files=len(files),
                externals=sum(stats[f"{t}_externals"] for t in ("device", "host", "disk")),
            )
        return original(*args, **kwargs)

    unpack_module.build = build
    dask_worker._metadata_probe = (unpack_module, original, seen)


def unprobe(dask_worker) -> dict:
    module, original, seen = dask_worker._metadata_probe
    module.build = original
    del dask_worker._metadata_probe
    return seen


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    with (
        cluster(tmp_path_factory.mktemp("meta"), device_memory_limit="1 MiB", memory_limit="1 MiB") as c,
        distributed.Client(c) as client,
    ):
        yield client


def held_after(client, n_inputs: int) -> dict[str, dict]:
    data = tables(n_inputs)
    inputs = scatter_tables(client, data)
    distributed.wait(inputs)
    client.run(probe_first_build)
    try:
        outputs = client.gather(shuffle(client, inputs, "k", NPARTITIONS))
    finally:
        seen = client.run(unprobe)
    check_shuffle(data, outputs, "k", NPARTITIONS)
    return seen


def test_kept_shards_cost_objects_per_output_not_per_shard(client):
    few, many = held_after(client, 8), held_after(client, 64)
    per_worker = NPARTITIONS // 2
    for w in few:
        a, b = few[w], many[w]
        assert b["shards"] >= 3 * a["shards"] > 0, (
            f"{w}: 64 inputs made {b['shards']} shards, 8 made {a['shards']}: the probe did not see "
            "the shards (not exercised)"
        )
        assert a["chunks"] and b["chunks"], f"{w}: no shard reached a file: {a}, {b}"
        for seen in (a, b):
            assert seen["externals"] == 0, f"{w}: shards held as store entries: {seen}"
            assert seen["buffers"] <= per_worker and seen["files"] <= per_worker, (
                f"{w}: more than one buffer or file per output ({per_worker} outputs): {seen}"
            )
        # chunks: one per write of a buffer, set by the bytes written, not the shard count
        assert b["chunks"] <= 2 * a["chunks"] + per_worker, (
            f"{w}: writes grew with the inputs: {a['chunks']} chunks for 8 inputs, "
            f"{b['chunks']} for 64"
        )
