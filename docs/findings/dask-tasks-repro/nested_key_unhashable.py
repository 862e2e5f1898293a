"""A list or struct key column through ddf.shuffle: pandas cannot hash it, and the error names
no column (SHUF-DTYPE-004; shared by the tasks and P2P methods: dask computes every row's
destination before either runs). Deterministic. Run:

    .venv/bin/python docs/findings/dask-tasks-repro/nested_key_unhashable.py

Prints, per method and key type, the error the user gets, and whether it names the column.
"""

import dask.dataframe as dd
import distributed
import pandas as pd
import pyarrow as pa

KEYS = {
    "list<int64>": (pa.list_(pa.int64()), [[1, 2], [3], [1, 2], [3]]),
    "struct<a: int64>": (pa.struct([("a", pa.int64())]), [{"a": 1}, {"a": 2}, {"a": 1}, {"a": 2}]),
}
COLUMN = "hard_column"


def attempt(method: str, type_: pa.DataType, values: list) -> str:
    frame = pd.DataFrame({COLUMN: pd.Series(values, dtype=pd.ArrowDtype(type_)), "x": range(len(values))})
    ddf = dd.from_pandas(frame, npartitions=2)
    try:
        ddf.shuffle(COLUMN, npartitions=2, shuffle_method=method, force=True).compute()
    except Exception as exc:  # noqa: BLE001 - what the user gets is the finding
        named = "names the column" if COLUMN in str(exc) else "NAMES NO COLUMN"
        return f"{type(exc).__name__}: {exc} ({named})"
    return "shuffled"


if __name__ == "__main__":
    with (
        distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster,
        distributed.Client(cluster),
    ):
        for method in ("tasks", "p2p"):
            for name, (type_, values) in KEYS.items():
                print(f"{method} {name}: {attempt(method, type_, values)}")
