"""Does dask-cuda 26.4's explicit-comms shuffle run on CPU with pandas? (no GPU, no cuDF,
no project code; run with .venv-daskcuda's python)

Prints CONFIRMED when ``dask_cuda.explicit_comms.dataframe.shuffle.shuffle`` shuffles a
pandas-backed dask DataFrame (Arrow-typed columns, nulls, NaN, -0.0, an empty partition) on
a loopback LocalCluster without a GPU: every row arrives once, equal keys share an output,
and the dtypes are kept. REFUTED otherwise, with the error.
"""

from __future__ import annotations

import collections
import math
import sys


def main() -> int:
    import dask.dataframe as dd
    import distributed
    import pandas as pd
    import pyarrow as pa

    try:
        from dask_cuda.explicit_comms.dataframe.shuffle import shuffle
    except Exception as exc:
        print(f"REFUTED: import failed: {type(exc).__name__}: {exc}")
        return 1
    whole = pa.table(
        {
            "k": pa.array([1, None, 3, 1, 5, None, 3, 7], pa.int64()),
            "f": pa.array([0.0, -0.0, math.nan, None, 2.5, 0.0, math.nan, -0.0]),
            "s": pa.array(["a", None, "c", "a", "", "héllo", None, "a"]),
            "row": pa.array(range(8), pa.int64()),
        }
    )
    cuts = [whole.slice(0, 3), whole.slice(3, 0), whole.slice(3)]
    frames = [t.to_pandas(types_mapper=pd.ArrowDtype) for t in cuts]
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, host="127.0.0.1",
            dashboard_address="127.0.0.1:0", memory_limit=0,
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
        client.as_current(),
    ):
        try:
            futures = [client.scatter(f) for f in frames]
            df = dd.from_delayed(futures, meta=frames[0].iloc[:0], verify_meta=False)
            out = shuffle(df, ["k", "f"], 5)
            parts = client.gather(client.compute(out.to_delayed()))
        except Exception as exc:
            print(f"REFUTED: the shuffle raised {type(exc).__name__}: {exc}")
            return 1
    rows = sorted(r for p in parts for r in p["row"].tolist())
    where = collections.defaultdict(set)
    for i, p in enumerate(parts):
        for k, f in zip(p["k"].tolist(), p["f"].tolist(), strict=True):
            fk = None if f is None or f is pd.NA else ("nan" if math.isnan(f) else f + 0.0)
            where[(None if k is pd.NA else k, fk)].add(i)
    split = {k: v for k, v in where.items() if len(v) > 1}
    dtypes = {str(t) for p in parts for t in p.dtypes}
    ok = rows == list(range(8)) and not split and len(parts) == 5
    ok = ok and all(str(p.dtypes[c]) == str(frames[0].dtypes[c]) for p in parts for c in p)
    print(("CONFIRMED" if ok else "REFUTED") + ": explicit-comms shuffles pandas on CPU")
    print(f"  outputs: {len(parts)}, rows per output: {[len(p) for p in parts]}")
    print(f"  rows back: {rows}; keys split over outputs: {split or 'none'}")
    print(f"  dtypes: {sorted(dtypes)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
