"""Nested columns (list, large_list, fixed_size_list, struct, map) held as large_binary
(``reference_impl.table.nested``): exact round trips at any depth, with nulls at every
level, slices at any level and chunks; canonical bytes (equal values, equal bytes, however
the arrays were built), so a nested key co-locates; every Table path keeps them; what
cannot be held is refused naming the column and the field."""

from __future__ import annotations

import datetime
import decimal
import pickle
import re

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from table_asserts import assert_identical

from reference_impl import Table
from reference_impl.device import SimDevice
from reference_impl.table import nested
from reference_impl.table.logical import KEY, carry
from reference_impl.table.partition import partition_ids, partition_table

DEV = SimDevice("256 MiB", name="sim:nested-types")

# --- types and values drawn by hypothesis ---------------------------------------------
LEAVES = {
    pa.int8(): st.integers(-128, 127),
    pa.int64(): st.integers(-(2**63), 2**63 - 1),
    pa.uint64(): st.integers(0, 2**64 - 1),
    pa.float32(): st.floats(width=32),
    pa.float64(): st.floats(),
    pa.float16(): st.floats(width=16).map(np.float16),
    pa.bool_(): st.booleans(),
    pa.string(): st.text(max_size=4),
    pa.large_string(): st.text(max_size=4),
    pa.binary(): st.binary(max_size=4),
    pa.timestamp("us", tz="UTC"): st.integers(-(2**62), 2**62),
    pa.duration("ns"): st.integers(-(2**62), 2**62),
    pa.decimal128(5, 2): st.decimals(-999, 999, places=2),
    pa.date32(): st.dates(),
    pa.time64("us"): st.times(),
    pa.null(): st.none(),
}
NAMES = st.sampled_from(["a", "b", "", "é x", "item"])


def nested_types(depth: int = 3) -> st.SearchStrategy[pa.DataType]:
    leaves = st.sampled_from(list(LEAVES))

    def extend(inner: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.DataType]:
        fields = st.lists(st.tuples(NAMES, inner), min_size=1, max_size=3, unique_by=lambda f: f[0])
        return st.one_of(
            inner.map(pa.list_),
            inner.map(pa.large_list),
            st.tuples(inner, st.integers(0, 3)).map(lambda t: pa.list_(t[0], t[1])),
            fields.map(pa.struct),
            inner.map(lambda t: pa.map_(pa.string(), t)),
        )

    return st.recursive(leaves, extend, max_leaves=depth * 2).filter(nested.is_nested)


def values(type_: pa.DataType) -> st.SearchStrategy:
    nulls = st.none()
    if pa.types.is_map(type_):
        entry = st.tuples(st.text(max_size=2), values(type_.item_type))
        return nulls | st.lists(entry, max_size=3)
    if pa.types.is_fixed_size_list(type_):
        k = type_.list_size
        return nulls | st.lists(values(type_.value_type), min_size=k, max_size=k)
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return nulls | st.lists(values(type_.value_type), max_size=3)
    if pa.types.is_struct(type_):
        return nulls | st.fixed_dictionaries({f.name: values(f.type) for f in type_})
    return nulls | LEAVES[type_]


@st.composite
def nested_arrays(draw, max_rows: int = 12) -> pa.Array:
    type_ = draw(nested_types())
    rows = draw(st.lists(values(type_), max_size=max_rows))
    return pa.array(rows, type=type_)


def _round_trip(data: pa.Table) -> pa.Table:
    return Table.from_arrow(data, DEV).to_arrow()


# --- round trips ------------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(arr=nested_arrays(), cut=st.tuples(st.integers(0, 12), st.integers(0, 12)))
def test_any_nested_column_round_trips_exactly_whole_and_sliced(arr, cut):
    data = pa.table({"c": arr, "k": pa.array(range(len(arr)), pa.int64())})
    table = Table.from_arrow(data, DEV)
    assert table.schema.field("c").type == pa.large_binary() and KEY in table.schema.metadata
    assert_identical(table.to_arrow(), data)
    start = min(cut)
    length = max(cut) - start
    assert_identical(_round_trip(data.slice(start, length)), data.slice(start, length))
    assert_identical(table.slice(start, start + length).to_arrow(), data.slice(start, length))
    assert_identical(pickle.loads(pickle.dumps(table)).to_arrow(), data)


@settings(max_examples=60, deadline=None)
@given(arr=nested_arrays(), cuts=st.lists(st.integers(0, 12), max_size=3))
def test_chunked_columns_round_trip(arr, cuts):
    bounds = sorted({0, len(arr), *(min(c, len(arr)) for c in cuts)})
    chunks = [arr.slice(a, b - a) for a, b in zip(bounds, bounds[1:], strict=False)] or [arr]
    data = pa.table({"c": pa.chunked_array(chunks, arr.type)})
    assert_identical(_round_trip(data), data)


def _sliced_everywhere() -> pa.Table:
    """A list whose child is a slice, of a struct whose fields are slices, itself sliced."""
    a = pa.array([99, 1, None, 3, 4, 5, 6, 7], pa.int64()).slice(1)
    b = pa.array(["zz", "x", "", None, "é", "w", "v", "u"]).slice(1)
    inner = pa.StructArray.from_arrays([a, b], ["a", "b"], mask=pa.array([False, True, False, False, False, False, False]))
    lists = pa.ListArray.from_arrays(pa.array([0, 2, 2, 5, 7], pa.int32()), inner.slice(0, 7))
    fixed = pa.FixedSizeListArray.from_arrays(pa.array([9.0, -0.0, float("nan"), None, 1e308, 2.5, 7.0]).slice(1), 2)
    return pa.table({"l": lists.slice(1), "f": fixed.slice(0, 3)})


def test_offsets_at_every_level_come_through():
    data = _sliced_everywhere()
    assert data.column("l").chunk(0).offset == 1
    assert_identical(_round_trip(data), data)
    for start in range(3):
        assert_identical(_round_trip(data.slice(start)), data.slice(start))


NULLS_AT_EVERY_LEVEL = {
    "list": (pa.list_(pa.int64()), [None, [], [None], [None, None], [1, None, 3]]),
    "list of lists": (pa.list_(pa.list_(pa.string())), [None, [], [None], [[]], [[None, ""], None, ["a"]]]),
    "struct": (pa.struct([("a", pa.int64()), ("b", pa.string())]), [None, {"a": None, "b": None}, {"a": 0, "b": ""}, {"a": -1, "b": None}, {"a": None, "b": "é"}]),
    "struct of lists": (pa.struct([("x", pa.list_(pa.float64()))]), [None, {"x": None}, {"x": []}, {"x": [None]}, {"x": [-0.0, float("nan")]}]),
    "fixed of structs": (pa.list_(pa.struct([("a", pa.int8())]), 2), [None, [None, None], [{"a": None}, None], [{"a": 1}, {"a": -128}], [None, {"a": 127}]]),
    "map": (pa.map_(pa.string(), pa.list_(pa.int32())), [None, [], [("k", None)], [("k", [])], [("a", [1]), ("a", [None])]]),
    "large list of maps": (pa.large_list(pa.map_(pa.int64(), pa.bool_())), [None, [], [None], [[]], [[(1, None), (2, False)]]]),
}


@pytest.mark.parametrize("kind", sorted(NULLS_AT_EVERY_LEVEL))
def test_nulls_at_every_level_and_empties_round_trip(kind):
    type_, rows = NULLS_AT_EVERY_LEVEL[kind]
    arr = pa.array(rows, type_)
    data = pa.table({"c": arr})
    back = _round_trip(data)
    assert_identical(back, data)
    assert back.column("c").to_pylist() == arr.to_pylist() or "nan" in repr(rows)


def test_extremes_and_float_bits():
    ints = [[-(2**63), 2**63 - 1, 0]]
    floats = [[-0.0, 0.0, float("nan"), float("inf"), -float("inf"), 5e-324, 1.7976931348623157e308]]
    data = pa.table({
        "i": pa.array(ints, pa.list_(pa.int64())),
        "u": pa.array([[0, 2**64 - 1]], pa.list_(pa.uint64())),
        "f": pa.array(floats, pa.list_(pa.float64())),
        "f32": pa.array(floats, pa.list_(pa.float32())),
        "nan": pa.array([[np.frombuffer(b"\x01\x00\x00\x00\x00\x00\xf8\x7f", np.float64)[0]]], pa.list_(pa.float64())),
    })
    back = _round_trip(data)
    assert_identical(back, data)
    assert np.signbit(back.column("f").chunk(0).values.to_numpy()[0])


def test_field_names_nullability_metadata_and_offset_types_are_kept():
    item = pa.field("element", pa.int64(), nullable=False, metadata={b"unit": b"m"})
    struct = pa.struct([pa.field("x", pa.large_list(item), nullable=False), pa.field("y", pa.string(), metadata={b"k": b"v"})])
    type_ = pa.list_(pa.field("rows", struct, metadata={b"row": b"1"}))
    arr = pa.array([[{"x": [1, 2], "y": "a"}], None, []], type_)
    field = pa.field("c", type_, nullable=False, metadata={b"col": b"meta"})
    data = pa.Table.from_arrays([arr], schema=pa.schema([field], metadata={b"user": b"kept"}))
    back = _round_trip(data)
    assert back.schema.equals(data.schema, check_metadata=True)
    assert back.schema.field("c").type.value_type.field("x").type.value_field.metadata == {b"unit": b"m"}
    assert_identical(back, data)


def test_logical_types_inside():
    data = pa.table({
        "d": pa.array([[decimal.Decimal("-1.20"), None], None], pa.list_(pa.decimal128(5, 2))),
        "neg": pa.array([{"v": decimal.Decimal("1.2E+2")}, None], pa.struct([("v", pa.decimal128(3, -1))])),
        "t": pa.array([[datetime.time(1, 2, 3, 4)], [None]], pa.list_(pa.time64("us"))),
        "t32": pa.array([[1000, None], None], pa.list_(pa.time32("ms"))),
        "date64": pa.array([[datetime.date(1970, 1, 2)], []], pa.list_(pa.date64())),
        "h": pa.array([[np.float16(-0.0), np.float16("nan")], []], pa.list_(pa.float16())),
    })
    assert_identical(_round_trip(data), data)


def test_an_empty_table_and_all_null_columns():
    type_ = pa.list_(pa.struct([("a", pa.string())]))
    empty = pa.table({"c": pa.array([], type_)})
    assert_identical(_round_trip(empty), empty)
    nulls = pa.table({"c": pa.nulls(3, type_)})
    assert_identical(_round_trip(nulls), nulls)
    no_chunks = pa.table({"c": pa.chunked_array([], type_)})
    assert_identical(_round_trip(no_chunks), no_chunks)


# --- canonical bytes --------------------------------------------------------------------
def _held(arr: pa.Array | pa.ChunkedArray) -> list:
    return carry(pa.table({"c": arr})).column("c").to_pylist()


def _with_garbage() -> tuple[pa.Array, pa.Array]:
    """The same values twice: built plainly, and built with other bytes under every null
    and outside every slice (values under null ints, children under null lists and
    structs, unused child entries before and after)."""
    plain = pa.array(
        [[{"a": 1, "b": "x"}, None], None, [{"a": None, "b": None}], [], [{"a": 5, "b": ""}]],
        pa.list_(pa.struct([("a", pa.int64()), ("b", pa.string())])),
    )
    bits = pa.py_buffer(np.packbits([1, 1, 1, 1, 0, 1, 1, 1], bitorder="little"))
    values = pa.py_buffer(np.array([7, 1, 7, 7, 7, 5, 7, 7], np.int64))
    a = pa.Array.from_buffers(pa.int64(), 8, [bits, values])  # 7 under its null
    text = pa.array(["junk", "x", "junk", "y", "junk", "", "z", "w"])
    b = pa.Array.from_buffers(pa.string(), 8, [bits, *text.buffers()[1:]])  # "junk" under its null
    # child 0 unused; the lists: [child 1, child 2 (a null struct over garbage)], a null
    # list over child 3, [child 4 (a and b null)], [], [child 5]; children 6, 7 unused
    structs = pa.StructArray.from_arrays([a, b], ["a", "b"], mask=pa.array([False, False, True] + [False] * 5))
    lists = pa.ListArray.from_arrays(
        pa.array([1, 3, 4, 5, 5, 6], pa.int32()), structs, mask=pa.array([False, True, False, False, False])
    )
    return plain, lists


def test_equal_values_give_equal_bytes_however_built():
    plain, built = _with_garbage()
    assert plain.to_pylist() == built.to_pylist()
    assert _held(plain) == _held(built)
    assert _held(plain.slice(1, 3)) == _held(built.slice(1, 3))
    chunked = pa.chunked_array([built.slice(0, 2), built.slice(2)])
    assert _held(chunked) == _held(plain)


def test_static_nulls_hold_zeros_whatever_lies_under_them():
    """Structs and fixed-size lists of fixed-width values have one size; their nulls are
    zeros, not the children Arrow keeps under them."""
    ints = pa.Array.from_buffers(
        pa.int64(), 6, [pa.py_buffer(np.packbits([1, 1, 0, 1, 1, 1], bitorder="little")), pa.py_buffer(np.array([1, 7, 7, 2, 3, 7], np.int64))]
    )
    mask = pa.array([False, True, False, False, False, True])
    structs = pa.StructArray.from_arrays([ints], ["a"], mask=mask)
    plain = pa.array([{"a": 1}, None, {"a": None}, {"a": 2}, {"a": 3}, None], structs.type)
    offsets = pa.array([0, 3, 6], pa.int32())  # inside a list: a row's null hashes as null
    assert _held(pa.ListArray.from_arrays(offsets, structs)) == _held(pa.ListArray.from_arrays(offsets, plain))
    fixed = pa.FixedSizeListArray.from_arrays(ints, 2, mask=pa.array([True, False, False]))
    plain = pa.array([None, [None, 2], [3, 7]], fixed.type)
    offsets = pa.array([0, 3], pa.int32())
    assert _held(pa.ListArray.from_arrays(offsets, fixed)) == _held(pa.ListArray.from_arrays(offsets, plain))


def test_equal_nested_keys_land_in_one_partition():
    plain, built = _with_garbage()
    both = pa.table({"c": pa.chunked_array([plain, built]), "row": pa.array(range(10), pa.int64())})
    table = Table.from_arrow(both, DEV)
    for n in (2, 7, 64):
        ids = DEV.to_host(partition_ids(table, "c", n))
        assert list(ids[:5]) == list(ids[5:]), n
        outputs = partition_table(table, "c", n)
        back = pa.concat_tables([o.to_arrow() for o in outputs]).sort_by("row")
        assert_identical(back, both)


# --- every Table path -------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(arr=nested_arrays(max_rows=20), picks=st.lists(st.integers(0, 19), max_size=30), n=st.integers(1, 5))
def test_take_concat_partition_and_equals_keep_nested_columns(arr, picks, n):
    data = pa.table({"c": arr, "row": pa.array(range(len(arr)), pa.int64())})
    table = Table.from_arrow(data, DEV)
    picks = [p % len(arr) for p in picks] if len(arr) else []
    taken = table.take(DEV.asarray(np.array(picks, np.int64)))
    assert_identical(taken.to_arrow(), data.take(pa.array(picks, pa.int64())))
    cut = len(arr) // 2
    assert_identical(Table.concat([table.slice(0, cut), table.slice(cut)]).to_arrow(), data)
    assert Table.concat([table.slice(0, cut), table.slice(cut)]).equals(table)
    outputs = partition_table(table, "c", n)
    back = pa.concat_tables([o.to_arrow() for o in outputs]).sort_by("row")
    assert_identical(back, data)
    homes: dict[str, int] = {}
    for i, out in enumerate(outputs):
        for key in _held(out.to_arrow().column("c")):
            assert homes.setdefault(repr(key), i) == i


# --- refusals ---------------------------------------------------------------------------
def _refused(dev, data: pa.Table, message: str) -> None:
    before = dev.bytes_in_use()
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        Table.from_arrow(data, dev)
    assert dev.bytes_in_use() == before


def test_a_dictionary_inside_is_refused_naming_the_column_and_field(dev):
    dict_type = pa.dictionary(pa.int8(), pa.string())
    type_ = pa.struct([("a", pa.list_(pa.field("tags", dict_type)))])
    data = pa.table({"ok": pa.array([1]), "s": pa.array([None], type_)})
    _refused(
        dev, data,
        "column 's' holds a dictionary at field 'a.tags' (dictionary<values=string, "
        "indices=int8, ordered=0>): a list or struct cannot hold one; cast it to its values first",
    )


def test_a_dictionary_of_lists_is_refused(dev):
    values = pa.array([[1], [2, 3]])
    data = pa.table({"d": pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int8()), values)})
    _refused(
        dev, data,
        "column 'd' is a dictionary of list<item: int64>: a dictionary of nested values "
        "cannot be held; cast it to its values first",
    )


def test_an_unsupported_leaf_is_refused_naming_the_field(dev):
    from reference_impl.table.dtypes import SUPPORTED

    type_ = pa.list_(pa.struct([("ok", pa.int8()), ("raw", pa.binary(3))]))
    data = pa.table({"l": pa.array([[{"ok": 1, "raw": b"abc"}]], type_)})
    _refused(
        dev, data,
        f"column 'l' has unsupported type {type_} (field 'item.raw' is fixed_size_binary[3]); "
        f"supported: {SUPPORTED}",
    )
    ordered = pa.list_(pa.dictionary(pa.int8(), pa.string(), ordered=True))
    data = pa.table({"o": pa.array([None], ordered)})
    _refused(
        dev, data,
        "column 'o' holds a dictionary at field 'item' (dictionary<values=string, "
        "indices=int8, ordered=1>): a list or struct cannot hold one; cast it to its values first",
    )

