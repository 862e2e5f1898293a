"""A shuffle by given destinations (dask's ``Shuffle`` expression over ``_partitions``, what
``set_index``, ``sort_values`` and ``merge`` lower to) with one bad destination (SHUF-DEST-002).

Deterministic. Run: .venv/bin/python docs/findings/distributed-p2p-repro/bad_destinations.py [p2p|tasks]
(dask-tasks' finding runs the same script with ``tasks``.)

Expected by the contract (clause 14.26): each call raises naming ``_partitions``. Rows x=0..5,
destinations [2, 0, BAD, 2, 0, 1] for 3 outputs (row x=2 is the bad one), the column as the
conformance adapter holds it (``Int64``; ``float64`` for 1.5). Seen with dask/distributed
2026.8.0 (each output's rows x):
  p2p    range 5 / negative -1 / null -> [[1, 4], [5], [0, 3]]: row 2 silently lost
  p2p    1.5                          -> [[], [], []]: every row lost
  tasks  range 5 / negative -1        -> [[1, 4], [5], [0, 2, 3]]: row 2 in output 2 (5 % 3, -1 % 3)
  tasks  null                         -> ValueError: cannot convert NA to integer (no column named)
  tasks  1.5                          -> [[1, 4], [2, 5], [0, 3]]: 1.5 truncated to 1
"""

import sys

import dask.dataframe as dd
import numpy as np
import pandas as pd
from dask.dataframe.dask_expr._collection import new_collection
from dask.dataframe.dask_expr._shuffle import Shuffle
from distributed import Client, LocalCluster

CASES = {
    "range": pd.array([2, 0, 5, 2, 0, 1], dtype="Int64"),
    "negative": pd.array([2, 0, -1, 2, 0, 1], dtype="Int64"),
    "null": pd.array([2, 0, None, 2, 0, 1], dtype="Int64"),
    "1.5": np.array([2, 0, 1.5, 2, 0, 1]),
}

if __name__ == "__main__":
    method = sys.argv[1] if len(sys.argv) > 1 else "p2p"
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cl,
        Client(cl) as client,
    ):
        for label, dest in CASES.items():
            ddf = dd.from_pandas(pd.DataFrame({"x": range(6), "_partitions": dest}), npartitions=2)
            out = new_collection(Shuffle(ddf.expr, "_partitions", 3, False, method, {}))
            try:
                parts = client.gather(client.compute(out.to_delayed()))
                print(method, label, "->", [list(p["x"]) for p in parts])
            except Exception as exc:
                print(method, label, "->", f"{type(exc).__name__}: {exc}")
