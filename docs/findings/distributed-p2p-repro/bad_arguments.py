"""ddf.shuffle does not validate ``npartitions`` or ``on`` (SHUF-INPUT-002, SHUF-INPUT-003).

Deterministic. Run: .venv/bin/python docs/findings/distributed-p2p-repro/bad_arguments.py [p2p|tasks]
(dask-tasks' finding runs the same script with ``tasks``.)

Expected by the contract (clause 14.12): each call raises before data moves, naming the argument.
Seen with dask/distributed 2026.8.0:
  npartitions=0   -> no error; 3 outputs (``npartitions = npartitions or self.npartitions``)
  npartitions=-3  -> OverflowError: Python integer -3 out of bounds for uint64 (from the hashing)
  npartitions=2.5 -> TypeError: can't multiply sequence by non-int of type 'float'
  on=[]           -> no error; every row in one output ([0, 0, 0, 20])
"""

import sys

import dask.dataframe as dd
import pandas as pd
from distributed import Client, LocalCluster

if __name__ == "__main__":
    method = sys.argv[1] if len(sys.argv) > 1 else "p2p"
    with (
        LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cl,
        Client(cl) as client,
    ):
        ddf = dd.from_pandas(pd.DataFrame({"k": range(20), "v": range(20)}), npartitions=3)
        for on, n in ((["k"], 0), (["k"], -3), (["k"], 2.5), ([], 4)):
            try:
                out = ddf.shuffle(on, npartitions=n, shuffle_method=method, force=True)
                parts = client.gather(client.compute(out.to_delayed()))
                print(f"on={on} npartitions={n}: no error, rows per output {[len(p) for p in parts]}")
            except Exception as exc:
                print(f"on={on} npartitions={n}: {type(exc).__name__}: {exc}")
