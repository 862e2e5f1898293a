"""A P2P shuffle's outputs that hold rows lose meta's Arrow-backed string and decimal dtypes
(SHUF-META-001).

Deterministic. Run: .venv/bin/python docs/findings/distributed-p2p-repro/empty_output_dtypes.py

Expected by the contract (clause 14.27): every output carries meta's dtypes. Seen with
dask/distributed 2026.8.0: the empty outputs (built from meta) have ``string[pyarrow]``
(``pd.ArrowDtype(pa.string())``) and ``decimal128(10, 2)[pyarrow]``; the output that holds
the rows has ``object`` for both. ``shuffle_method="tasks"`` keeps them in every output.
"""

import decimal

import dask.dataframe as dd
import pandas as pd
import pyarrow as pa
from distributed import Client, LocalCluster

if __name__ == "__main__":
    frame = pd.DataFrame(
        {
            "k": [0, 0, 0, 0],
            "s": pd.array(["a", "b", None, "c"], dtype=pd.ArrowDtype(pa.string())),
            "d": pd.array([decimal.Decimal("1.25")] * 4, dtype=pd.ArrowDtype(pa.decimal128(10, 2))),
        }
    )
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cl,
        Client(cl) as client,
    ):
        for method in ("p2p", "tasks"):
            out = dd.from_pandas(frame, npartitions=2).shuffle("k", npartitions=3, shuffle_method=method)
            for i, part in enumerate(client.gather(client.compute(out.to_delayed()))):
                print(method, f"output {i}: {len(part)} rows,", dict(part.dtypes.astype(str)))
