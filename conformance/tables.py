"""What users shuffle: hypothesis strategies for input partitions as ``pyarrow.Table`` s.

A case is drawn as plain data (column types, Python values, cut points), so hypothesis
can shrink it, and built into Arrow tables only at the end. Every table carries a unique
int64 ``row_id`` so that the oracle can tell every row apart, whatever its key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pyarrow as pa
from hypothesis import strategies as st

ROW_ID = "row_id"

KEY_TYPES: dict[str, pa.DataType] = {
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
    "timestamp[ns]": pa.timestamp("ns"),
    "timestamp[s]": pa.timestamp("s"),
    "duration[us]": pa.duration("us"),
    "string": pa.string(),
    "large_string": pa.large_string(),
}
PAYLOAD_TYPES = dict(KEY_TYPES)

_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_UINT_BITS = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}
_TEXT = ["", "a", "b", "ab", "héllo", "日本", "\x00", "z" * 40]


def values_of(type_name: str) -> st.SearchStrategy:
    """Values of one column type: a few common ones (so keys collide), extremes, and the
    float values that break hashing (NaN, -0.0, inf)."""
    if type_name in _INT_BITS:
        bits = _INT_BITS[type_name]
        lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        return st.sampled_from([0, 1, -1, 7, lo, hi]) | st.integers(lo, hi)
    if type_name in _UINT_BITS:
        hi = 2 ** _UINT_BITS[type_name] - 1
        return st.sampled_from([0, 1, 7, hi]) | st.integers(0, hi)
    if type_name in ("float32", "float64"):
        width = 32 if type_name == "float32" else 64
        return st.sampled_from([0.0, -0.0, 1.5, math.nan, math.inf, -math.inf]) | st.floats(
            width=width, allow_nan=True
        )
    if type_name == "bool":
        return st.booleans()
    if type_name.startswith(("timestamp", "duration")):
        return st.sampled_from([0, 1, -1, 86_400]) | st.integers(-(2**62), 2**62)
    return st.sampled_from(_TEXT) | st.text(max_size=12)


@dataclass(frozen=True)
class ShuffleCase:
    """Input partitions, the key columns and the number of outputs."""

    tables: tuple[pa.Table, ...]
    on: tuple[str, ...]
    npartitions: int

    @property
    def schema(self) -> pa.Schema:
        return self.tables[0].schema

    @property
    def num_rows(self) -> int:
        return sum(t.num_rows for t in self.tables)

    def describe(self) -> str:
        types = ", ".join(f"{f.name}: {f.type}" for f in self.schema)
        sizes = [t.num_rows for t in self.tables]
        return f"on={list(self.on)} npartitions={self.npartitions} rows per input={sizes} ({types})"


def _column(draw, type_name: str, n: int, nulls: bool, skew: bool) -> list:
    values = values_of(type_name)
    if skew:  # one value holds most rows
        common = draw(values)
        values = st.just(common) | st.just(common) | st.just(common) | values
    elem = (st.none() | values) if nulls else values
    return draw(st.lists(elem, min_size=n, max_size=n))


@st.composite
def shuffle_cases(
    draw,
    *,
    max_rows: int = 120,
    max_inputs: int = 5,
    key_types: tuple[str, ...] = tuple(KEY_TYPES),
    nulls: bool = True,
) -> ShuffleCase:
    """1-3 key columns of mixed types, 0-2 payload columns, uneven input partitions (empty
    ones included), sometimes one key holding most rows, and ``npartitions`` both above
    and below the row count. ``nulls=False`` draws no null keys (for peers without
    ``shuffle.nulls``); payload columns get nulls either way."""
    n = draw(st.integers(0, max_rows))
    n_keys = draw(st.integers(1, 3))
    key_names = [draw(st.sampled_from(key_types)) for _ in range(n_keys)]
    pay_names = draw(st.lists(st.sampled_from(tuple(PAYLOAD_TYPES)), max_size=2))
    skew = draw(st.booleans())
    columns: dict[str, pa.Array] = {}
    on = []
    for i, t in enumerate(key_names):
        name = f"k{i}"
        on.append(name)
        data = _column(draw, t, n, nulls and draw(st.booleans()), skew)
        columns[name] = pa.array(data, type=KEY_TYPES[t])
    for i, t in enumerate(pay_names):
        data = _column(draw, t, n, draw(st.booleans()), False)
        columns[f"p{i}"] = pa.array(data, type=PAYLOAD_TYPES[t])
    columns[ROW_ID] = pa.array(range(n), type=pa.int64())
    whole = pa.table(columns)
    n_inputs = draw(st.integers(1, max_inputs))
    cuts = sorted(draw(st.lists(st.integers(0, n), min_size=n_inputs - 1, max_size=n_inputs - 1)))
    bounds = [0, *cuts, n]
    tables = tuple(whole.slice(a, b - a) for a, b in zip(bounds, bounds[1:], strict=False))
    npartitions = draw(st.integers(1, max(1, n) + 3) | st.sampled_from([1, 2, n + 5]))
    return ShuffleCase(tables, tuple(on), npartitions)


def uniform_case(
    n_inputs: int, rows_per_input: int, npartitions: int, *, seed: int = 0, payload: int = 1
) -> ShuffleCase:
    """A large, plain case for the memory tests: int64 keys spread over many values, float64
    payload columns; 8 * (2 + payload) bytes a row."""
    import numpy as np

    rng = np.random.default_rng(seed)
    tables = []
    for i in range(n_inputs):
        cols = {"k0": rng.integers(0, 1 << 40, rows_per_input)}
        for j in range(payload):
            cols[f"p{j}"] = rng.random(rows_per_input)
        cols[ROW_ID] = np.arange(i * rows_per_input, (i + 1) * rows_per_input, dtype=np.int64)
        tables.append(pa.table(cols))
    return ShuffleCase(tuple(tables), ("k0",), npartitions)


def mixed_case(
    seed: int, n_inputs: int, rows_per_input: int, npartitions: int, *, nulls: bool = True
) -> ShuffleCase:
    """A fixed case without hypothesis: an int64, a float64 (NaN, -0.0) and a string key,
    nulls in each when ``nulls``, and a string payload."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = n_inputs * rows_per_input
    floats = rng.choice(np.array([0.0, -0.0, np.nan, 1.5, np.inf]), n)
    mask = rng.random((3, n)) < (0.1 if nulls else 0.0)
    whole = pa.table(
        {
            "k0": pa.array(rng.integers(-50, 50, n), mask=mask[0]),
            "k1": pa.array(floats, mask=mask[1]),
            "k2": pa.array(rng.choice(np.array(_TEXT, dtype=object), n), mask=mask[2]),
            "p0": pa.array(rng.choice(np.array(_TEXT, dtype=object), n)),
            ROW_ID: pa.array(np.arange(n, dtype=np.int64)),
        }
    )
    tables = tuple(whole.slice(i * rows_per_input, rows_per_input) for i in range(n_inputs))
    return ShuffleCase(tables, ("k0", "k1", "k2"), npartitions)


def bool_keys_with_nulls_in_one_input() -> ShuffleCase:
    """Equal bool keys in two inputs, one of which also holds null keys: a hash that depends
    on the array's type (a nullable array hashed as objects) splits the equal ones."""
    a = pa.table({"k0": pa.array([True, False, None, True], pa.bool_()),
                  ROW_ID: pa.array([0, 1, 2, 3], pa.int64())})
    b = pa.table({"k0": pa.array([True, False, True, False], pa.bool_()),
                  ROW_ID: pa.array([4, 5, 6, 7], pa.int64())})
    return ShuffleCase((a, b), ("k0",), 4)


def float_keys_signed_zero_and_nan() -> ShuffleCase:
    """-0.0 with 0.0 and NaN with NaN, in different inputs."""
    a = pa.table({"k0": pa.array([0.0, float("nan"), 1.0]), ROW_ID: pa.array([0, 1, 2])})
    b = pa.table({"k0": pa.array([-0.0, float("nan"), 1.0]), ROW_ID: pa.array([3, 4, 5])})
    return ShuffleCase((a, b), ("k0",), 5)
