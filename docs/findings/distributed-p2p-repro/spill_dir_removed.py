"""P2P returns empty output partitions, and no error, when its shard files are gone at unpack.

Deterministic: a scheduler plugin removes every worker's P2P shard directory when the first
unpack task is sent to a worker (after the barrier: every shard is on disk by then, and no
output has been read). Run: .venv/bin/python docs/findings/distributed-p2p-repro/spill_dir_removed.py

Expected by the contract (clause 14.5, and 14.1: every row exactly once): a clear error.
Seen with dask/distributed 2026.8.0: the shuffle "succeeds" with 0 of 4,000 rows, e.g.
  removed 2 shard directories at unpack; rows in 4000, rows out 0, no error
The cause: ``DiskShardsBuffer.read`` (``distributed/shuffle/_disk.py``) turns a
FileNotFoundError into ``DataUnavailable``, and ``_get_output_partition``
(``distributed/shuffle/_shuffle.py``) answers ``DataUnavailable`` with an empty partition
(``self.meta.copy()``), the same as for an output that received no shards.
"""

import os
import shutil
import tempfile

import dask.dataframe as dd
import numpy as np
import pandas as pd
from distributed import Client, LocalCluster
from distributed.diagnostics.plugin import SchedulerPlugin


class RemoveAtUnpack(SchedulerPlugin):
    name = "remove-shards-at-unpack"

    def __init__(self, root: str) -> None:
        self.root, self.removed = root, []

    def transition(self, key, start, finish, *args, **kwargs):
        if not self.removed and finish == "processing" and str(key).startswith("('p2pshuffle-"):
            dirs = {d for d, _sub, files in os.walk(self.root) if files and "shuffle-" in d}
            for d in dirs:
                shutil.rmtree(d, ignore_errors=True)
            self.removed.append(len(dirs))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as root, LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
        local_directory=root,
    ) as cluster, Client(cluster) as client:
        df = pd.DataFrame({"k": np.arange(4000) % 97, "v": np.arange(4000)})
        ddf = dd.from_pandas(df, npartitions=8)
        warm = ddf.shuffle("k", npartitions=8, shuffle_method="p2p", force=True).compute()
        assert len(warm) == 4000
        plugin = RemoveAtUnpack(root)
        cluster.scheduler.add_plugin(plugin)
        try:
            out = ddf.shuffle("k", npartitions=8, shuffle_method="p2p", force=True).compute()
            result = f"rows out {len(out)}, no error"
        except Exception as exc:
            result = f"error: {type(exc).__name__}: {exc}"
        print(f"removed {plugin.removed[0] if plugin.removed else 0} shard directories at unpack; "
              f"rows in {len(df)}, {result}")
