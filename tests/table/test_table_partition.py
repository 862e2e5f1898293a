"""partition_table / partition_ids on fixed-width columns (string kernels: issue 10 part B)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from conftest import assert_identical
from hypothesis import given
from hypothesis import strategies as st
from table_strategies import ALL_TYPES, tables

from reference_impl import SimDevice, Table
from reference_impl.kernels import hash_numpy, pid_numpy
from reference_impl.table.partition import partition_ids, partition_table

FIXED = [t for t in ALL_TYPES if not (pa.types.is_string(t) or pa.types.is_large_string(t))]


def _values(col: pa.ChunkedArray, *, bits: bool) -> list:
    """Python values; times as int64; floats as their bits, or (keys) with NaN as a marker
    and -0.0 == 0.0 (Python's float equality, which the hash spec follows)."""
    arr = col.combine_chunks()
    if pa.types.is_timestamp(arr.type) or pa.types.is_duration(arr.type):
        arr = arr.view(pa.int64())
    elif pa.types.is_floating(arr.type) and bits:
        arr = arr.view(pa.int64() if pa.types.is_float64(arr.type) else pa.int32())
    return [NAN if isinstance(v, float) and math.isnan(v) else v for v in arr.to_pylist()]


NAN = ("nan",)


def rows(t: pa.Table, *, bits: bool = True) -> list[tuple]:
    return list(zip(*[_values(c, bits=bits) for c in t.columns], strict=True))


# Keys of two kinds (each key kind and mask combination compiles its own kernel, ~2 s
# each on a busy core); payload columns of every fixed-width type.
KEY_TYPES = [pa.int64(), pa.float64()]


@st.composite
def keyed_tables(draw):
    keys = draw(tables(types=KEY_TYPES, max_rows=30, max_cols=2))
    payload = draw(tables(types=FIXED, max_rows=30, max_cols=2))
    n = min(keys.num_rows, payload.num_rows)
    data = keys.slice(0, n)
    for name, col in zip(payload.column_names, payload.columns, strict=True):
        data = data.append_column(pa.field(f"p{name}", col.type), col.slice(0, n))
    return data, keys.num_columns


@given(case=keyed_tables(), n=st.integers(1, 9))
def test_partition_properties(case, n):
    data, nkeys = case
    dev = SimDevice("16 MiB")
    t = Table.from_arrow(data, dev)
    on = t.column_names[:nkeys]
    parts = partition_table(t, on, n)
    ids = partition_ids(t, on, n).view(np.ndarray)
    assert len(parts) == n  # empty partitions included
    assert sum(p.num_rows for p in parts) == t.num_rows
    assert Counter(r for p in parts for r in rows(p.to_arrow())) == Counter(rows(data))
    for i, p in enumerate(parts):
        # stable: partition i holds exactly the rows with id i, in input order
        assert_identical(p.to_arrow(), data.take(pa.array(np.flatnonzero(ids == i), pa.int64())))
    where: dict[tuple, int] = {}  # equal keys land together
    for key, pid in zip(rows(data.select(on), bits=False), ids.tolist(), strict=True):
        assert where.setdefault(key, pid) == pid


def test_null_nan_and_signed_zero_keys_group(dev):
    k = pa.array([0.0, -0.0, math.nan, None, float("nan"), None, 1.0, -0.0])
    t = Table.from_arrow(pa.table({"k": k, "v": pa.array(np.arange(8))}), dev)
    ids = partition_ids(t, "k", 1024).view(np.ndarray).tolist()
    assert ids[0] == ids[1] == ids[7]  # -0.0 with 0.0
    assert ids[2] == ids[4]  # every NaN together
    assert ids[3] == ids[5]  # nulls together, whatever value lies under them


def test_ids_follow_the_kernels_hash_spec(dev):
    data = np.array([5, -1, 7, 5, 0], dtype=np.int64)
    mask = np.array([True, True, False, True, True])
    t = Table.from_arrow(pa.table({"k": pa.array(data, mask=~mask)}), dev)
    expected = pid_numpy(hash_numpy([data], [mask]), 16)
    np.testing.assert_array_equal(partition_ids(t, "k", 16).view(np.ndarray), expected)


def test_outputs_are_views_of_one_buffer_per_input_buffer(dev):
    n = 1000
    data = pa.table(
        {
            "k": pa.array(np.arange(n) % 13, mask=np.arange(n) % 9 == 0),
            "v": pa.array(np.arange(n, dtype=np.float32)),
            "b": pa.array(np.arange(n) % 2 == 0),
        }
    )
    t = Table.from_arrow(data, dev)
    before = dev.bytes_in_use()
    parts = partition_table(t, ["k"], 8)
    assert dev.bytes_in_use() - before == t.nbytes  # one new buffer per buffer, scratch freed
    allocs = {aid for p in parts for aid, _ in p.allocations()}
    assert len(allocs) == 4  # k, k's mask, v, b
    assert not allocs & {aid for aid, _ in t.allocations()}
    assert sum(p.nbytes for p in parts) == t.nbytes
    assert Table.concat(parts).take(dev.asarray(np.arange(0))).num_rows == 0


def test_empty_table_gives_npartitions_empty_tables(dev):
    t = Table.from_arrow(pa.table({"k": pa.array([], pa.int64())}), dev)
    parts = partition_table(t, "k", 5)
    assert [p.num_rows for p in parts] == [0] * 5


@pytest.mark.parametrize("column", ["k", "v"])
def test_string_columns_are_pending(dev, column):
    t = Table.from_arrow(pa.table({"k": ["a", "b"], "v": [1, 2]}), dev)
    with pytest.raises(NotImplementedError, match="^string columns: pending kernels$"):
        partition_table(t, "v" if column == "k" else "k", 2)
