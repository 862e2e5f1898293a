"""slice, select, take, equals and concat against pyarrow's own answers."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from table_asserts import assert_identical
from table_strategies import tables

from reference_impl import Column, SimDevice, Table
from reference_impl.table import SchemaMismatchError


def sample(dev):
    data = pa.table(
        {
            "i": pa.array([1, None, 3, 4, 5], pa.int64()),
            "s": pa.array(["a", "", None, "dé", "eee"]),
            "f": pa.array([0.5, math.nan, None, -0.0, 2.0]),
            "b": pa.array([True, False, None, True, True]),
        }
    )
    return data, Table.from_arrow(data, dev)


def test_properties(dev):
    data, t = sample(dev)
    assert (t.num_rows, t.num_columns, len(t)) == (5, 4, 5)
    assert t.column_names == ["i", "s", "f", "b"]
    assert t.schema == data.schema
    # i: 40 + 5 mask; s: 24 offsets + 7 chars ("dé" is 3 bytes) + 5; f: 40 + 5; b: 5 + 5
    assert t.nbytes == dev.bytes_in_use() == 45 + 36 + 45 + 10
    assert (
        t.column("s").null_count == 1 and len(t.allocations()) == 9
    )  # 4 data + 4 masks + 1 offsets


@given(
    data=tables(max_rows=15, max_cols=3),
    start=st.integers(-20, 20),
    stop=st.integers(-20, 20) | st.none(),
)
def test_slice_is_zero_copy_and_matches_python_slicing(data, start, stop):
    dev = SimDevice("16 MiB")
    t = Table.from_arrow(data, dev)
    before, allocs = dev.bytes_in_use(), set(t.allocations())
    part = t.slice(start, stop)
    assert dev.bytes_in_use() == before  # views: nothing allocated
    assert set(part.allocations()) <= allocs
    rows = range(data.num_rows)[start:stop]
    expected = data.slice(rows.start, len(rows)) if len(rows) else data.slice(0, 0)
    assert_identical(part.to_arrow(), expected)


@given(data=tables(max_rows=15, max_cols=3), picks=st.lists(st.integers(0, 14), max_size=20))
def test_take_matches_pyarrow(data, picks):
    dev = SimDevice("16 MiB")
    picks = [p for p in picks if p < data.num_rows]
    t = Table.from_arrow(data, dev)
    taken = t.take(dev.asarray(np.array(picks, dtype=np.int64)))
    assert_identical(taken.to_arrow(), data.take(pa.array(picks, pa.int64())))


@given(data=tables(max_rows=10, max_cols=3), cuts=st.lists(st.integers(0, 10), max_size=3))
def test_concat_of_slices_rebuilds_the_table(data, cuts):
    dev = SimDevice("16 MiB")
    t = Table.from_arrow(data, dev)
    bounds = [0, *sorted(c for c in cuts if c <= t.num_rows), t.num_rows]
    pieces = [t.slice(a, b) for a, b in zip(bounds, bounds[1:], strict=False)]
    joined = Table.concat(pieces)
    assert joined.equals(t)
    assert_identical(joined.to_arrow(), data)


def test_select_is_zero_copy_and_ordered(dev):
    data, t = sample(dev)
    before = dev.bytes_in_use()
    sel = t.select(["f", "i"])
    assert sel.column_names == ["f", "i"] and dev.bytes_in_use() == before
    assert sel.column("i") is t.column("i")
    assert_identical(sel.to_arrow(), data.select(["f", "i"]))


def test_equals_nulls_nan_and_differences(dev):
    data, t = sample(dev)
    other = Table.from_arrow(data, dev)
    assert t.equals(other) and other.equals(t)  # NaN == NaN, null == null
    # the value under a null does not matter
    hidden = pa.Array.from_buffers(
        pa.int64(),
        5,
        [data.column("i").chunk(0).buffers()[0], pa.py_buffer(np.array([1, 99, 3, 4, 5]))],
    )
    assert Table.from_arrow(data.set_column(0, "i", hidden), dev).equals(t)
    changed = data.set_column(1, "s", pa.array(["a", "", None, "dé", "eeE"]))
    assert not t.equals(Table.from_arrow(changed, dev))
    assert not t.equals(t.slice(1))
    assert not t.equals(t.select(["s", "i", "f", "b"]))
    unmasked = Table.from_arrow(pa.table({"x": [1, 2]}), dev)
    masked = Table({"x": Column(unmasked.column("x").data, dev.asarray(np.array([True, True])))})
    assert unmasked.equals(masked) and masked.equals(unmasked)
    one_null = Table({"x": Column(unmasked.column("x").data, dev.asarray(np.array([True, False])))})
    assert not unmasked.equals(one_null)
    assert not t.equals(data)  # not a Table


def test_concat_differing_schemas_name_both(dev):
    a = Table.from_arrow(pa.table({"x": pa.array([1], pa.int64()), "s": ["a"]}), dev)
    b = Table.from_arrow(pa.table({"x": pa.array([1], pa.int32()), "s": ["a"]}), dev)
    before = dev.bytes_in_use()
    with pytest.raises(SchemaMismatchError) as err:
        Table.concat([a, a, b])
    assert str(err.value) == (
        "cannot concat tables with different schemas: table 0 has "
        "(x: int64, s: string), table 2 has (x: int32, s: string)"
    )
    assert dev.bytes_in_use() == before


def test_shared_allocation_counted_once(dev):
    buf = dev.empty(20, np.int64)
    t = Table({"a": Column(buf[:10]), "b": Column(buf[10:])})
    assert t.allocations() == [dev.allocation_of(buf)]
    assert t.nbytes == dev.bytes_in_use() == 160


def test_zero_column_table(dev):
    t = Table({}, device=dev, num_rows=0)
    assert t.num_rows == 0 and t.nbytes == 0 and t.allocations() == []
    assert t.to_arrow().num_columns == 0
