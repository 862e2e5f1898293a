"""What users shuffle: hypothesis strategies for input partitions as ``pyarrow.Table`` s.

A case is drawn as plain data (column types, Python values, cut points), so hypothesis
can shrink it, and built into Arrow tables only at the end. Every table carries a unique
int64 ``row_id`` so that the oracle can tell every row apart, whatever its key.
"""

from __future__ import annotations

import datetime
import decimal
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
# Clause 14.22 (``shuffle.dtypes``): types users shuffle that no key kernel hashes as such
DTYPE_TYPES: dict[str, pa.DataType] = {
    "dictionary<string, int8>": pa.dictionary(pa.int8(), pa.string()),
    "dictionary<int64, int32>": pa.dictionary(pa.int32(), pa.int64()),
    "decimal128(38, 10)": pa.decimal128(38, 10),
    "decimal256(60, 0)": pa.decimal256(60, 0),
    "decimal32(7, 2)": pa.decimal32(7, 2),
    "date32": pa.date32(),
    "date64": pa.date64(),
    "time32[ms]": pa.time32("ms"),
    "time64[ns]": pa.time64("ns"),
    "halffloat": pa.float16(),
}
ALL_TYPES = {**KEY_TYPES, **DTYPE_TYPES}

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
    if type_name in DTYPE_TYPES:
        return _dtype_values(DTYPE_TYPES[type_name])
    if type_name.startswith(("timestamp", "duration")):
        return st.sampled_from([0, 1, -1, 86_400]) | st.integers(-(2**62), 2**62)
    return st.sampled_from(_TEXT) | st.text(max_size=12)


_DAY_MS = 86_400_000
_EXACT = decimal.Context(prec=100)  # the default context rounds to 28 digits


def _dtype_values(type_: pa.DataType) -> st.SearchStrategy:
    """Values of a 14.22 type, extremes included: every digit of a decimal's precision,
    dates far from the epoch, the last nanosecond of a day, float16's NaN, -0.0 and max."""
    if pa.types.is_dictionary(type_):
        base = "string" if pa.types.is_string(type_.value_type) else "int64"
        return st.sampled_from(
            ["a", "b", "héllo"] if base == "string" else [0, 1, -(2**63)]
        ) | values_of(base)
    if pa.types.is_decimal(type_):
        top = 10**type_.precision - 1
        return st.builds(
            lambda unscaled: decimal.Decimal(unscaled).scaleb(-type_.scale, _EXACT),
            st.sampled_from([0, 1, -1, top, -top]) | st.integers(-top, top),
        )
    if pa.types.is_date32(type_):
        return st.integers(-719_162, 2_932_896).map(
            lambda d: datetime.date(1970, 1, 1) + datetime.timedelta(d)
        )
    if pa.types.is_date64(type_):
        return st.integers(-719_162, 2_932_896).map(lambda d: d * _DAY_MS)
    if pa.types.is_time32(type_):
        return st.sampled_from([0, _DAY_MS - 1]) | st.integers(0, _DAY_MS - 1)
    if pa.types.is_time64(type_):
        day_ns = _DAY_MS * 1_000_000
        return st.sampled_from([0, day_ns - 1]) | st.integers(0, day_ns - 1)
    if pa.types.is_float16(type_):
        return st.sampled_from([0.0, -0.0, 1.5, math.nan, math.inf, 65504.0]) | st.floats(width=16)
    raise ValueError(f"no values for {type_}")


def arrow_array(data: list, type_: pa.DataType) -> pa.Array:
    """``data`` (Python values, None for null) as an array of ``type_``: dates and times
    from their integers where given so, a dictionary encoded with its own index type."""
    if pa.types.is_dictionary(type_):
        encoded = pa.array(data, type=type_.value_type).dictionary_encode()
        return pa.DictionaryArray.from_arrays(
            encoded.indices.cast(type_.index_type), encoded.dictionary
        )
    if pa.types.is_date64(type_) or pa.types.is_time(type_):
        width = pa.int32() if type_.bit_width == 32 else pa.int64()
        return pa.array(data, type=width).cast(type_)
    return pa.array(data, type=type_)


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


CUTS = ("slice", "chunked", "contiguous")


def cut(table: pa.Table, how: str, pieces: int) -> pa.Table:
    """One input as users hand it over: a slice of a bigger table, several chunks (each a
    slice), or one chunk."""
    if how == "contiguous":
        return table.combine_chunks()
    if how == "chunked" and table.num_rows > 1:
        step = max(1, table.num_rows // pieces)
        parts = [table.slice(i, step) for i in range(0, table.num_rows, step)]
        return pa.concat_tables(parts)
    return table


def draw_inputs(draw, whole: pa.Table, max_inputs: int, max_pieces: int = 4) -> tuple:
    """``whole`` cut into 1..``max_inputs`` uneven inputs (empty ones included), each a
    slice, chunked or one chunk (:func:`cut`)."""
    n = whole.num_rows
    n_inputs = draw(st.integers(1, max_inputs))
    cuts = sorted(draw(st.lists(st.integers(0, n), min_size=n_inputs - 1, max_size=n_inputs - 1)))
    bounds = [0, *cuts, n]
    return tuple(
        cut(whole.slice(a, b - a), draw(st.sampled_from(CUTS)), draw(st.integers(2, max_pieces)))
        for a, b in zip(bounds, bounds[1:], strict=False)
    )


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
    payload_types: tuple[str, ...] = tuple(PAYLOAD_TYPES),
    nulls: bool = True,
) -> ShuffleCase:
    """1-3 key columns of mixed types, 0-2 payload columns, uneven input partitions (empty
    ones included; slices, chunked or one chunk: ``cut``), sometimes one key holding most rows, and ``npartitions`` both above
    and below the row count. ``nulls=False`` draws no null keys (for peers without
    ``shuffle.nulls``); payload columns get nulls either way."""
    n = draw(st.integers(0, max_rows))
    n_keys = draw(st.integers(1, 3))
    key_names = [draw(st.sampled_from(key_types)) for _ in range(n_keys)]
    pay_names = draw(st.lists(st.sampled_from(payload_types), max_size=2))
    skew = draw(st.booleans())
    columns: dict[str, pa.Array] = {}
    on = []
    for i, t in enumerate(key_names):
        name = f"k{i}"
        on.append(name)
        data = _column(draw, t, n, nulls and draw(st.booleans()), skew)
        columns[name] = arrow_array(data, ALL_TYPES[t])
    for i, t in enumerate(pay_names):
        data = _column(draw, t, n, draw(st.booleans()), False)
        columns[f"p{i}"] = arrow_array(data, ALL_TYPES[t])
    columns[ROW_ID] = pa.array(range(n), type=pa.int64())
    whole = pa.table(columns)
    tables = draw_inputs(draw, whole, max_inputs)
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


def _sliced(whole: pa.Table, n_inputs: int, rows_per_input: int) -> tuple[pa.Table, ...]:
    """``whole`` as ``n_inputs`` consecutive slices (arrays at non-zero offsets, as 14.1 asks)."""
    return tuple(whole.slice(i * rows_per_input, rows_per_input) for i in range(n_inputs))


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
    return ShuffleCase(_sliced(whole, n_inputs, rows_per_input), ("k0", "k1", "k2"), npartitions)


def narrow_case(seed: int, n_inputs: int, rows_per_input: int, npartitions: int, *, nulls: bool = True) -> ShuffleCase:
    """Many rows in few bytes (17 a row): an int32 key, a string payload of one or two
    characters, nulls in both when ``nulls``. Narrow, so that an implementation that cuts its
    inputs into chunks of a few MiB still meets each input's rows in one piece."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = n_inputs * rows_per_input
    mask = rng.random((2, n)) < (0.05 if nulls else 0.0)
    whole = pa.table(
        {
            "k": pa.array(rng.integers(-1000, 1000, n).astype(np.int32), mask=mask[0]),
            "s": pa.array(rng.choice(np.array(["a", "é", "xy", ""], dtype=object), n), mask=mask[1]),
            ROW_ID: pa.array(np.arange(n, dtype=np.int64)),
        }
    )
    return ShuffleCase(_sliced(whole, n_inputs, rows_per_input), ("k",), npartitions)


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


def every_dtype_case() -> ShuffleCase:
    """Every 14.22 type at once, with nulls, as payload, keyed by a dictionary and a decimal,
    in two inputs whose dictionaries differ (one is re-encoded from its values)."""
    n = 12
    values = {
        name: [_EXAMPLES[name][i % 3] if i % 4 else None for i in range(n)] for name in DTYPE_TYPES
    }
    columns = {
        f"c{i}": arrow_array(v, DTYPE_TYPES[name]) for i, (name, v) in enumerate(values.items())
    }
    columns[ROW_ID] = pa.array(range(n), type=pa.int64())
    whole = pa.table(columns)
    second = whole.slice(5)
    second = second.set_column(
        0,
        "c0",
        arrow_array(second.column("c0").to_pylist(), DTYPE_TYPES["dictionary<string, int8>"]),
    )
    return ShuffleCase((whole.slice(0, 5), second), ("c0", "c2"), 3)


_EXAMPLES: dict[str, list] = {
    "dictionary<string, int8>": ["b", "a", "héllo"],
    "dictionary<int64, int32>": [7, -(2**63), 0],
    "decimal128(38, 10)": [
        decimal.Decimal("-" + "9" * 28 + "." + "9" * 10),
        decimal.Decimal("0.0000000001"),
        decimal.Decimal(0),
    ],
    "decimal256(60, 0)": [decimal.Decimal("9" * 60), decimal.Decimal(-1), decimal.Decimal(0)],
    "decimal32(7, 2)": [
        decimal.Decimal("99999.99"),
        decimal.Decimal("-0.01"),
        decimal.Decimal("1.50"),
    ],
    "decimal128(10, -3)": [decimal.Decimal("9999999999E+3"), decimal.Decimal("-1E+3"), decimal.Decimal("0E+3")],
    "date32": [datetime.date(1, 1, 1), datetime.date(9999, 12, 31), datetime.date(1970, 1, 1)],
    "date64": [-719_162 * _DAY_MS, 0, 2_932_896 * _DAY_MS],
    "time32[ms]": [0, _DAY_MS - 1, 1],
    "time64[ns]": [0, _DAY_MS * 1_000_000 - 1, 1],
    "halffloat": [math.nan, -0.0, 65504.0],
}


# Clause 14.23: the pandas index a row carries, as ``pa.Table.from_pandas`` writes it
INDEX_KINDS = ("int", "str", "repeated", "category")
CATEGORIES = ("c0", "c1", "c2", "c3", "c4")  # a categorical index's, the same in every input


def _index_labels(kind: str, row_ids: pa.ChunkedArray) -> pa.Array:
    """A row's index label from its ``row_id``: unique ints, unique strings, ints that two
    rows share (pandas allows repeated labels; a label is not a row's identity), or one of
    :data:`CATEGORIES` (a pandas ``CategoricalIndex``: an Arrow dictionary)."""
    ids = row_ids.to_pylist()
    if kind == "int":
        return pa.array([7 * i - 1000 for i in ids], pa.int64())
    if kind == "str":
        return pa.array([f"r{i}" for i in ids], pa.string())
    if kind == "category":
        codes = pa.array([(3 * i) % len(CATEGORIES) for i in ids], pa.int8())
        return pa.DictionaryArray.from_arrays(codes, pa.array(CATEGORIES))
    return pa.array([i // 2 for i in ids], pa.int64())


def with_index(case: ShuffleCase, kind: str, name: str | None) -> ShuffleCase:
    """``case`` with a pandas index (``INDEX_KINDS``) named ``name``: one more column, the
    last, and pandas' metadata naming it the index, as ``pa.Table.from_pandas`` writes them
    (an unnamed index is the column ``__index_level_0__``)."""
    import pandas as pd

    labels = [_index_labels(kind, t.column(ROW_ID)) for t in case.tables]
    empty = case.schema.empty_table().to_pandas(types_mapper=pd.ArrowDtype)
    if kind == "category":
        empty.index = pd.CategoricalIndex([], categories=list(CATEGORIES), name=name)
    else:
        empty.index = pd.Index([], dtype=pd.ArrowDtype(labels[0].type), name=name)
    pandas = pa.Schema.from_pandas(empty, preserve_index=True).metadata
    metadata = {**(case.schema.metadata or {}), **pandas}  # what the inputs held is kept
    column = name if name is not None else "__index_level_0__"
    tables = tuple(
        t.append_column(column, pa.chunked_array([a], a.type)).replace_schema_metadata(metadata)
        for t, a in zip(case.tables, labels, strict=True)
    )
    return ShuffleCase(tables, case.on, case.npartitions)
