"""partition_table / partition_ids on every column type, string keys and payload included:
the partition properties (hypothesis), the hash spec, zero-copy outputs (string offsets not
rebased, like Arrow slices) and what the Table does with such partitions."""

from __future__ import annotations

import math
import pickle
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from table_asserts import assert_identical
from table_strategies import ALL_TYPES, tables

from reference_impl import SimDevice, Table
from reference_impl.kernels import Strings, hash_numpy, pid_numpy
from reference_impl.table.dtypes import is_varlen, offsets_dtype
from reference_impl.table.partition import partition_grouped, partition_ids, partition_table
from reference_impl.table.spill import TABLE


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


# Keys of four kinds (each key kind and mask combination compiles its own kernel, ~2 s
# each on a busy core, then cached); payload columns of every type, strings included.
KEY_TYPES = [pa.int64(), pa.float64(), pa.string(), pa.large_string(), pa.binary(), pa.large_binary()]


def numpy_keys(data: pa.Table, on: list[str]) -> tuple[list, list]:
    """The key columns as ``hash_numpy`` takes them (numpy values or ``Strings`` of
    numpy offsets and chars, offsets not rebased) and their validity masks."""
    keys, valid = [], []
    for name in on:
        arr = data.column(name).combine_chunks()
        n = len(arr)
        valid.append(~arr.is_null().to_numpy(zero_copy_only=False))
        if is_varlen(arr.type):
            _, off, chars = arr.buffers()
            odt = offsets_dtype(arr.type)
            off = (
                np.frombuffer(off, odt)[arr.offset : arr.offset + n + 1] if n else np.zeros(1, odt)
            )
            chars = np.frombuffer(chars, np.uint8) if chars is not None else np.empty(0, np.uint8)
            keys.append(Strings(off, chars))
        else:
            keys.append(arr.fill_null(0).to_numpy(zero_copy_only=False))
    return keys, valid


@st.composite
def keyed_tables(draw):
    keys = draw(tables(types=KEY_TYPES, max_rows=30, max_cols=2))
    payload = draw(tables(types=ALL_TYPES, max_rows=30, max_cols=2))
    n = min(keys.num_rows, payload.num_rows)
    data = keys.slice(0, n)
    for name, col in zip(payload.column_names, payload.columns, strict=True):
        data = data.append_column(pa.field(f"p{name}", col.type), col.slice(0, n))
    if n:  # repeat some rows, so equal keys (nulls, NaN, "" ...) occur often
        again = draw(st.lists(st.integers(0, n - 1), max_size=20))
        data = pa.concat_tables([data, data.take(pa.array(again, pa.int64()))])
    return data, keys.num_columns


@given(case=keyed_tables(), n=st.integers(1, 9))
def test_partition_properties(case, n):
    data, nkeys = case
    dev = SimDevice("16 MiB")
    t = Table.from_arrow(data, dev)
    on = t.column_names[:nkeys]
    parts = partition_table(t, on, n)
    ids = partition_ids(t, on, n).view(np.ndarray)
    np.testing.assert_array_equal(ids, pid_numpy(hash_numpy(*numpy_keys(data, on)), n))
    assert len(parts) == n  # empty partitions included
    assert sum(p.num_rows for p in parts) == t.num_rows
    assert Counter(r for p in parts for r in rows(p.to_arrow())) == Counter(rows(data))
    for i, p in enumerate(parts):
        # stable: partition i holds exactly the rows with id i, in input order
        assert_identical(p.to_arrow(), data.take(pa.array(np.flatnonzero(ids == i), pa.int64())))
    where: dict[tuple, int] = {}  # equal keys land together
    for key, pid in zip(rows(data.select(on), bits=False), ids.tolist(), strict=True):
        assert where.setdefault(key, pid) == pid
    grouped, offsets = partition_grouped(t, on, n)  # the same rows, back to back
    assert offsets == [0, *np.cumsum([p.num_rows for p in parts]).tolist()]
    assert_identical(grouped.to_arrow(), pa.concat_tables([p.to_arrow() for p in parts]))


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


def test_equal_string_keys_group(dev):
    """Equal strings (empty, non-ASCII, at any place in the chars) share a partition, every
    null with every null, whatever bytes lie under it; utf8 and large_utf8 agree, and so do
    binary and large_binary of the same bytes (bytes are hashed, not text)."""
    values = ["", "héllo", None, "日本", "", "a", "héllo", None, "a\0", "日本", "a"]
    ids = {}
    types = (pa.string(), pa.large_string(), pa.binary(), pa.large_binary())
    for type_ in types:
        arr = pa.array(["pad", *values], type_).slice(1)  # offsets[0] != 0
        t = Table.from_arrow(pa.table({"k": arr}), dev)
        ids[type_] = partition_ids(t, "k", 1 << 20).view(np.ndarray).tolist()
        keys, valid = numpy_keys(pa.table({"k": arr}), ["k"])
        assert ids[type_] == pid_numpy(hash_numpy(keys, valid), 1 << 20).tolist()
    got = ids[pa.string()]
    assert all(ids[t] == got for t in types)
    for v in set(values):
        assert len({got[i] for i, w in enumerate(values) if w == v}) == 1, v
    assert got[5] != got[8]  # "a" and "a\0": the length is hashed


def string_table() -> pa.Table:
    n = 300
    words = ["", "a", "héllo", "日本語テキスト", "abcdefghi", None, "x" * 30]
    return pa.table(
        {
            "k": pa.array([words[i % 7] for i in range(n)]),
            "v": pa.array(np.arange(n, dtype=np.int64), mask=np.arange(n) % 11 == 0),
            "s": pa.array([words[(3 * i) % 7] for i in range(n)], pa.large_string()),
        }
    )


@pytest.mark.parametrize("on", [["k"], ["v"], ["s", "v"]], ids=["str-key", "int-key", "both"])
def test_string_columns_partition(dev, on):
    """String keys and payload: the rows with id i, in order, as views of one offsets and
    one chars buffer per string column (offsets not rebased: each partition's start where
    the previous one ended), and one buffer per mask and value column."""
    data = string_table()
    t = Table.from_arrow(data, dev)
    before = dev.bytes_in_use()
    parts = partition_table(t, on, 8)
    assert dev.bytes_in_use() - before == t.nbytes  # one new buffer per buffer, scratch freed
    ids = partition_ids(t, on, 8).view(np.ndarray)
    keys, valid = numpy_keys(data, on)
    np.testing.assert_array_equal(ids, pid_numpy(hash_numpy(keys, valid), 8))
    for i, p in enumerate(parts):
        assert_identical(p.to_arrow(), data.take(pa.array(np.flatnonzero(ids == i), pa.int64())))
    allocs = {aid for p in parts for aid, _ in p.allocations()}
    assert len(allocs) == 8  # chars, offsets and mask of k and s; v and its mask
    assert not allocs & {aid for aid, _ in t.allocations()}
    for name in ("k", "s"):
        cols = [p.column(name) for p in parts]
        assert len({dev.allocation_of(c.data) for c in cols}) == 1  # the whole chars buffer
        ends = [(int(c.offsets[0]), int(c.offsets[-1])) for c in cols]
        assert ends[0][0] == 0 and ends[-1][1] == len(cols[0].data)
        assert all(a[1] == b[0] for a, b in zip(ends, ends[1:], strict=False))


def test_string_partitions_work_as_tables(dev):
    """A partition's string offsets start past 0, like a sliced Arrow array: equals,
    take, concat, slice, pickling and the store's spill frames all read only its rows."""
    data = string_table()
    t = Table.from_arrow(data, dev)
    parts = partition_table(t, ["k"], 5)
    ids = partition_ids(t, ["k"], 5).view(np.ndarray)
    p = max(parts[1:], key=lambda x: x.num_rows)  # not the first: offsets[0] > 0
    assert int(p.column("k").offsets[0]) > 0
    expect = data.take(pa.array(np.flatnonzero(ids == parts.index(p)), pa.int64()))
    assert p.equals(Table.from_arrow(expect, dev))
    assert not p.equals(parts[0]) and p.equals(p.slice(0))
    idx = dev.asarray(np.array([2, 0, 2], np.int64))
    assert_identical(p.take(idx).to_arrow(), expect.take(pa.array([2, 0, 2])))
    assert_identical(p.slice(1, 4).to_arrow(), expect.slice(1, 3))
    assert_identical(
        Table.concat([parts[0], p]).to_arrow(),
        pa.concat_tables([parts[0].to_arrow(), expect]).combine_chunks(),
    )
    back = pickle.loads(pickle.dumps(p, protocol=5))
    assert back.equals(p) and int(back.column("k").offsets[0]) == 0
    assert back.nbytes == p.nbytes  # only the partition's chars travel
    spilled = TABLE.to_device(TABLE.to_host(p, dev), dev)
    assert spilled.equals(p) and spilled.nbytes == p.nbytes
    del back, spilled


def test_the_partition_functions_take_their_arguments_by_name_and_backend_only_by_name():
    """The reference's own API (outside the contract): ``on`` and ``npartitions`` by keyword,
    ``backend`` keyword-only, so that a call cannot pass a backend for a count by position."""
    t = Table.from_arrow(pa.table({"k": [1, 2, 3, 4], "v": [5.0, 6.0, 7.0, 8.0]}), SimDevice("1 MiB"))
    grouped, offsets = partition_grouped(t, on="k", npartitions=3, backend="cpu")
    parts = partition_table(t, on=["k"], npartitions=3, backend="cpu")
    ids = partition_ids(t, on="k", npartitions=3, backend="cpu")
    assert sorted(Counter(np.asarray(t.device.to_host(ids)).tolist()).values()) == sorted(
        p.num_rows for p in parts if p.num_rows
    )
    assert [p.num_rows for p in parts] == [b - a for a, b in zip(offsets, offsets[1:], strict=False)]
    assert grouped.num_rows == 4
    for fn in (partition_grouped, partition_table, partition_ids):
        with pytest.raises(TypeError, match="positional argument"):
            fn(t, "k", 3, "cpu")
