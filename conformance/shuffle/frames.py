"""Small pandas frames of every dtype a pandas or Arrow-backed frame can hold, for the
clauses a dask front end is judged on through dask's own API (14.27, 14.28)."""

from __future__ import annotations

import datetime
import decimal
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

ROWS = 8
KEY = "k"
ROW = "row"
FAILING_INPUT = 1  # the input of flaky_input that fails while its flag file exists


def _ints(dtype: str) -> Callable[[int], Any]:
    return lambda n: pd.array([i % 5 for i in range(n)], dtype=dtype)


def _nullable(values: list, dtype: Any) -> Callable[[int], Any]:
    return lambda n: pd.array([values[i % len(values)] for i in range(n)], dtype=dtype)


_TEXT = ["a", "b", None, "héllo"]
_DAY = datetime.date(2024, 2, 29)

# name -> values of that dtype for n rows (numpy, pandas' nullable, categorical, Arrow-backed)
DTYPES: dict[str, Callable[[int], Any]] = {
    "int8": _ints("int8"),
    "int32": _ints("int32"),
    "uint64": _ints("uint64"),
    "float32": lambda n: np.linspace(-1, 1, n, dtype="float32"),
    "float64": lambda n: np.array([0.5, -0.0, np.nan, np.inf] * n)[:n],
    "bool": lambda n: np.arange(n) % 2 == 0,
    "datetime64[ns]": lambda n: pd.date_range("2024-01-01", periods=n, freq="h").values,
    "datetime64[ns, UTC]": lambda n: pd.date_range("2024-01-01", periods=n, freq="h", tz="UTC"),
    "timedelta64[ns]": lambda n: pd.to_timedelta(np.arange(n), unit="s").values,
    "object": lambda n: np.array([_TEXT[i % 4] or "z" for i in range(n)], dtype=object),
    "category": lambda n: pd.Categorical([_TEXT[i % 4] for i in range(n)]),
    "string[python]": _nullable(_TEXT, "string[python]"),
    "string[pyarrow]": _nullable(_TEXT, "string[pyarrow]"),
    "Int64": _nullable([1, None, -3], "Int64"),
    "boolean": _nullable([True, None, False], "boolean"),
    "Float64": _nullable([1.5, None, -2.0], "Float64"),
    "int32[pyarrow]": _nullable([1, None, 7], pd.ArrowDtype(pa.int32())),
    "string[arrow]": _nullable(_TEXT, pd.ArrowDtype(pa.string())),
    "timestamp[us, tz][pyarrow]": _nullable(
        [datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC), None],
        pd.ArrowDtype(pa.timestamp("us", "Europe/Paris")),
    ),
    "decimal128(10, 2)[pyarrow]": _nullable(
        [decimal.Decimal("1.25"), None, decimal.Decimal("-99999999.99")],
        pd.ArrowDtype(pa.decimal128(10, 2)),
    ),
    "date32[pyarrow]": _nullable([_DAY, None], pd.ArrowDtype(pa.date32())),
    "bool[pyarrow]": _nullable([True, None, False], pd.ArrowDtype(pa.bool_())),
    "double[pyarrow]": _nullable([0.5, None, float("nan")], pd.ArrowDtype(pa.float64())),
}


def frame_of(dtypes: list[str], index: str | None, rows: int = ROWS) -> pd.DataFrame:
    """A key column, the columns of ``dtypes`` (named ``c<i>_<dtype>``), a row id, and an
    int index named ``index`` (or a default RangeIndex when None). Column order is
    deliberately not sorted: the key comes in the middle."""
    columns: dict[str, Any] = {}
    for i, name in enumerate(dtypes):
        columns[f"c{i}_{name}"] = DTYPES[name](rows)
        if i == 0:
            columns[KEY] = np.arange(rows, dtype="int64") % 3
    columns.setdefault(KEY, np.arange(rows, dtype="int64") % 3)
    columns[ROW] = np.arange(rows, dtype="int64")
    frame = pd.DataFrame(columns)
    if index is not None:
        frame.index = pd.Index(np.arange(100, 100 + rows, dtype="int64"), name=index)
    return frame


def meta_problems(part: pd.DataFrame, meta: pd.DataFrame, what: str) -> list[str]:
    """Where ``part`` does not carry ``meta``'s column order, dtypes, index dtype and names."""
    problems = []
    if list(part.columns) != list(meta.columns):
        return [f"{what}: columns {list(part.columns)}, meta's {list(meta.columns)}"]
    for name in meta.columns:
        if part[name].dtype != meta[name].dtype:
            problems.append(f"{what}: column {name!r} is {part[name].dtype}, meta's {meta[name].dtype}")
    if part.index.dtype != meta.index.dtype:
        problems.append(f"{what}: index is {part.index.dtype}, meta's {meta.index.dtype}")
    if list(part.index.names) != list(meta.index.names):
        problems.append(f"{what}: index names {list(part.index.names)}, meta's {list(meta.index.names)}")
    return problems


def rows_of(frame: pd.DataFrame) -> list[tuple]:
    """The frame's rows (index included) as comparable tuples, sorted by row id."""
    if ROW not in frame.columns:
        return []
    out = frame.reset_index().sort_values(ROW)
    return [tuple(repr(v) for v in row) for row in out.astype(object).itertuples(index=False)]


def flaky_input(i: int, flag: str, rows: int = 40) -> pd.DataFrame:
    """Input ``i`` of a collection (``dd.from_map``) whose input ``FAILING_INPUT`` raises while
    the file ``flag`` exists: an input that fails, then succeeds when the user computes the
    same collection again (clause 14.29). Runs on the workers: module-level, importable."""
    if i == FAILING_INPUT and flag and os.path.exists(flag):
        raise ValueError(f"input {i} failed on purpose while {flag} exists")
    rng = np.random.default_rng(i)
    return pd.DataFrame(
        {
            KEY: rng.integers(0, 9, rows),
            "v": rng.random(rows),
            ROW: np.arange(i * rows, (i + 1) * rows),
        }
    )
