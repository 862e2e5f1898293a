"""P2P fails on a list or struct column held as ``pd.ArrowDtype`` (SHUF-DTYPE-002).

Deterministic. Run: .venv/bin/python docs/findings/distributed-p2p-repro/nested_arrow_columns.py

Expected by the contract (clause 14.22): a column of a type the shuffle cannot carry is refused
with an error naming the column, or shuffled exactly.
Seen with dask/distributed 2026.8.0, pandas 3.1.1, pyarrow 26.0.1:
  tasks -> ok, the list column comes back as list<item: int64>[pyarrow]
  p2p   -> RuntimeError: P2P <id> failed during barrier phase
           caused by TypeError: data type 'list<item: int64>[pyarrow]' not understood
The cause sits below P2P: ``split_by_partition`` (distributed/shuffle/_shuffle.py) calls
``t.select([column]).to_pandas()`` on a table whose pandas metadata names the list column's
dtype as a string, and pyarrow's ``_get_extension_dtypes`` hands that string to
``pandas_dtype``, which cannot parse nested ArrowDtype names (pandas-dev/pandas#53011, open).
The same ``pa.Table.from_pandas(df).to_pandas()`` round trip fails outside dask (last line).
"""

import dask.dataframe as dd
import pandas as pd
import pyarrow as pa
from distributed import Client, LocalCluster

if __name__ == "__main__":
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cl,
        Client(cl),
    ):
        lists = pd.Series([[1, 2], None, [], [3]], dtype=pd.ArrowDtype(pa.list_(pa.int64())))
        ddf = dd.from_pandas(pd.DataFrame({"k": [1, 2, 3, 1], "hard_column": lists}), npartitions=2)
        for method in ("tasks", "p2p"):
            try:
                out = ddf.shuffle("k", npartitions=2, shuffle_method=method, force=True).compute()
                print(f"{method}: ok, hard_column is {out['hard_column'].dtype}")
            except Exception as exc:
                cause = exc.__cause__
                print(f"{method}: {type(exc).__name__}: {exc}")
                print(f"    caused by {type(cause).__name__}: {cause}")
        frame = pd.DataFrame({"k": [1], "hard_column": lists[:1]})
        try:
            pa.Table.from_pandas(frame).to_pandas()
        except TypeError as exc:
            print(f"outside dask: pa.Table.from_pandas(df).to_pandas() -> TypeError: {exc}")
