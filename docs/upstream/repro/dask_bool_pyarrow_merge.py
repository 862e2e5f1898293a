import os
import tempfile

import dask
import dask.dataframe as dd
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

d = tempfile.mkdtemp()
pq.write_table(pa.table({"k": [True, None], "x": [0, 1]}), os.path.join(d, "part0.parquet"))
pq.write_table(pa.table({"k": [True, False], "x": [2, 3]}), os.path.join(d, "part1.parquet"))
left = dd.read_parquet(d, dtype_backend="pyarrow")  # k is bool[pyarrow]; only part0 has a null
right = dd.from_pandas(
    pd.DataFrame({"k": pd.array([True, False], dtype="bool[pyarrow]"), "y": ["t", "f"]}),
    npartitions=2,
)
with dask.config.set(scheduler="sync"):
    got = left.merge(right, on="k", shuffle_method="tasks").compute()
    parts = dask.compute(*left.shuffle("k", npartitions=8, shuffle_method="tasks").to_delayed())
expected = left.compute().merge(right.compute(), on="k")
print("rows x of the merge, dask:  ", sorted(got["x"]))
print("rows x of the merge, pandas:", sorted(expected["x"]))
print("outputs holding k=True after shuffle('k'):", [i for i, p in enumerate(parts) if p["k"].eq(True).any()])
