"""Logical types (``reference_impl.table.logical``): dictionaries, decimals, dates, times
and float16 are held as a Table type and come back exactly, with their schema, through
every path a Table takes: slices, concatenation, pickling (comms and spilling), partitioning."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from table_asserts import assert_identical

from conformance.shuffle.tables import DTYPE_TYPES, KEY_TYPES, shuffle_cases
from reference_impl import Table
from reference_impl.device import SimDevice
from reference_impl.table import SchemaMismatchError
from reference_impl.table.logical import KEY
from reference_impl.table.partition import partition_table

DEV = SimDevice("256 MiB", name="sim:logical-types")
TYPES = tuple(DTYPE_TYPES)
CASES = shuffle_cases(max_rows=60, max_inputs=3, key_types=TYPES, payload_types=TYPES)


def _whole(case) -> pa.Table:
    return pa.concat_tables(case.tables).replace_schema_metadata({b"user": b"kept"})


@settings(max_examples=40, deadline=None)
@given(case=CASES)
def test_round_trip_is_exact(case):
    data = _whole(case)
    table = Table.from_arrow(data, DEV)
    assert KEY in table.schema.metadata and all(
        not pa.types.is_dictionary(f.type) for f in table.schema
    )
    assert_identical(table.to_arrow(), data)
    assert_identical(pickle.loads(pickle.dumps(table)).to_arrow(), data)


@settings(max_examples=30, deadline=None)
@given(case=CASES, cut=st.integers(0, 60))
def test_slices_and_concat_keep_the_types(case, cut):
    data = _whole(case)
    table = Table.from_arrow(data, DEV)
    cut = min(cut, data.num_rows)
    assert_identical(table.slice(0, cut).to_arrow(), data.slice(0, cut))
    parts = [table.slice(0, cut), table.slice(cut)]
    assert_identical(Table.concat(parts).to_arrow(), data)


@settings(max_examples=30, deadline=None)
@given(case=CASES, n=st.integers(1, 7))
def test_partitions_keep_the_types_and_group_equal_keys(case, n):
    data = _whole(case)
    outputs = partition_table(Table.from_arrow(data, DEV), list(case.on), n)
    arrow = [o.to_arrow() for o in outputs]
    seen: dict[tuple, int] = {}
    for i, out in enumerate(arrow):
        assert out.schema.equals(data.schema, check_metadata=True)
        keys = zip(*(out.column(k).cast(pa.string()).to_pylist() for k in case.on), strict=True)
        for key in keys:
            assert seen.setdefault(key, i) == i, f"key {key} in outputs {seen[key]} and {i}"
    back = pa.concat_tables(arrow).sort_by("row_id")
    assert_identical(back, data)


def test_tables_of_held_types_carry_nothing():
    data = pa.table({name: pa.nulls(2, type_) for name, type_ in KEY_TYPES.items()})
    table = Table.from_arrow(data, DEV)
    assert table.schema.metadata is None
    assert_identical(table.to_arrow(), data)


def test_a_logical_column_never_concatenates_with_the_type_it_is_held_as():
    """date32 is held as int32: the types compared are the logical ones, or the ints of the
    second table would come back as dates."""
    dates = Table.from_arrow(pa.table({"d": pa.array([1], pa.int32()).cast(pa.date32())}), DEV)
    ints = Table.from_arrow(pa.table({"d": pa.array([1], pa.int32())}), DEV)
    with pytest.raises(SchemaMismatchError, match=r"table 0 has \(d: date32\[day\]\), table 1 has \(d: int32\)"):
        Table.concat([dates, ints])
    assert not dates.equals(ints)


def test_shuffle_inputs_that_differ_only_in_a_logical_type_are_refused():
    """The shuffle's plan compares the logical schemas too (clause 14.12's differing inputs)."""
    from reference_impl.shuffle.plan import check_schemas

    dates = Table.from_arrow(pa.table({"d": pa.array([1], pa.int32()).cast(pa.date32())}), DEV)
    ints = Table.from_arrow(pa.table({"d": pa.array([1], pa.int32())}), DEV)
    described = [("Table", dates.schema), ("Table", ints.schema)]
    with pytest.raises(SchemaMismatchError, match=r"input 0 has \(d: date32\[day\]\), input 1 has \(d: int32\)"):
        check_schemas(described, ["d"])
    assert check_schemas(described[:1], ["d"]).equals(dates.schema, check_metadata=True)


def test_a_null_typed_column_round_trips_as_key_and_payload():
    """What pyarrow infers for an object column holding only None (issue 26: it was
    'unsupported type null'): held as an all-null int8, restored as null."""
    data = pa.table({"n": pa.nulls(4), "k": pa.array([1, 2, 1, 3], pa.int64())})
    table = Table.from_arrow(data, DEV)
    assert table.to_arrow().equals(data)
    assert table.slice(1, 3).to_arrow().equals(data.slice(1, 2))  # Table.slice: start, stop
    from reference_impl.table.partition import partition_table

    parts = partition_table(table, ["n"], 3)
    assert sum(p.num_rows for p in parts) == 4 and sum(p.num_rows > 0 for p in parts) == 1, (
        "equal (null) keys in one output"
    )
    assert all(p.to_arrow().schema.field("n").type == pa.null() for p in parts)
