"""Equal bool keys land in different outputs when some input partitions hold null keys and
others do not (SHUF-CONC-001 found it; clause 14.6). Deterministic.

Run: .venv/bin/python docs/findings/distributed-p2p-repro/bool_key_split.py [p2p|tasks]

Cause: dask hashes the key columns with pandas' ``hash_pandas_object``
(``dask/dataframe/shuffle.py`` ``partitioning_index``); numeric keys are cast to float64 first
(``AssignPartitioningIndex.operation``), but ``bool[pyarrow]`` is not a numeric cast type, so it
is hashed as is, and pandas hashes a ``bool[pyarrow]`` array differently when it holds a null:
the same ``True`` gets another hash, and another output, in a partition with nulls.
"""

import sys

import dask.dataframe as dd
import pandas as pd
import pyarrow as pa
from distributed import Client, LocalCluster

if __name__ == "__main__":
    method = sys.argv[1] if len(sys.argv) > 1 else "p2p"
    a = pa.table({"k": pa.array([True, None]), "row": [0, 1]}).to_pandas(types_mapper=pd.ArrowDtype)
    b = pa.table({"k": pa.array([True, True]), "row": [2, 3]}).to_pandas(types_mapper=pd.ArrowDtype)
    # the root cause, without dask: one value, two hashes
    h = [pd.util.hash_pandas_object(x[["k"]], index=False).iloc[0] for x in (a, b)]
    print(f"pandas hash of True: {h[0]} (array with a null) vs {h[1]} (without)")
    with (
        LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cl,
        Client(cl) as client,
    ):
        ddf = dd.from_delayed([client.scatter(a), client.scatter(b)], meta=a.iloc[:0])
        out = ddf.shuffle(["k"], npartitions=16, shuffle_method=method, force=True)
        parts = client.gather(client.compute(out.to_delayed()))
        where = {
            int(r): i
            for i, p in enumerate(parts)
            for r, k in zip(p["row"], p["k"], strict=True)
            if k is True
        }
        print(f"{method}: rows with k=True (row -> output): {where}")
        print("SPLIT" if len(set(where.values())) > 1 else "together")
