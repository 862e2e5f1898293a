import os
import sys
import tempfile

import dask.dataframe as dd
import numpy as np
import pandas as pd
from distributed import Client, LocalCluster
from distributed.diagnostics.plugin import SchedulerPlugin


class DamageShardsAtUnpack(SchedulerPlugin):
    """When the first unpack task is sent (after the barrier: every shard is on disk and no
    output has been read), delete or truncate to zero bytes every P2P shard file."""

    def __init__(self, root, how):
        self.root, self.how, self.files = root, how, 0

    def transition(self, key, start, finish, *args, **kwargs):
        if self.files or finish != "processing" or not str(key).startswith("('p2pshuffle-"):
            return
        for d, _, names in os.walk(self.root):
            for name in names if "shuffle-" in d else ():
                path = os.path.join(d, name)
                os.remove(path) if self.how == "delete" else os.truncate(path, 0)
                self.files += 1


def run(how):
    with tempfile.TemporaryDirectory() as root, LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0",
        local_directory=root,
    ) as cluster, Client(cluster):
        df = pd.DataFrame({"k": np.arange(4000) % 97, "v": np.arange(4000)})
        ddf = dd.from_pandas(df, npartitions=8)
        plugin = DamageShardsAtUnpack(root, how)
        cluster.scheduler.add_plugin(plugin)
        try:
            out = ddf.shuffle("k", npartitions=8, shuffle_method="p2p", force=True).compute()
            result = f"{len(out)} rows out, no error"
        except Exception as exc:
            result = f"{type(exc).__name__}: {exc}"
        return f"{how}: {plugin.files} shard files damaged at unpack; {len(df)} rows in, {result}"


if __name__ == "__main__":
    for how in sys.argv[1:] or ["delete", "truncate"]:
        print(run(how))
