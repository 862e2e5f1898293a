"""Arrow -> Table -> Arrow is exact for every supported type, and pandas goes through Arrow."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from table_asserts import assert_identical
from table_strategies import ALL_TYPES, UNITS, tables

from reference_impl import Column, SimDevice, Table


@given(data=tables())
def test_round_trip_every_type_with_nulls_chunks_and_slices(data):
    dev = SimDevice("64 MiB")  # one per example: hypothesis does not reset fixtures
    t = Table.from_arrow(data, dev)
    assert dev.bytes_in_use() == t.nbytes  # a fresh table: nbytes is what the ledger counts
    assert t.num_rows == data.num_rows and t.column_names == data.column_names
    assert t.schema.equals(data.schema, check_metadata=True)
    assert_identical(t.to_arrow(), data)


@given(data=tables(max_rows=12, max_cols=3))
def test_record_batches_round_trip(data):
    dev = SimDevice("64 MiB")
    batch = (
        data.combine_chunks().to_batches()[0]
        if data.num_rows
        else pa.RecordBatch.from_pylist([], schema=data.schema)
    )
    assert_identical(Table.from_arrow(batch, dev).to_arrow(), pa.Table.from_batches([batch]))


def test_edge_values_survive_bit_for_bit(dev):
    floats = pa.array([-0.0, math.nan, None, math.inf, -math.inf, 5e-324])
    data = pa.table(
        {
            "f64": floats,
            "f32": floats.cast(pa.float32()),
            "s": pa.array(["", None, "héllo", "日本語", "🙂", ""]),
            "ls": pa.array(["", "a", None, "Ω", "", "z"], pa.large_string()),
            "b": pa.array([True, False, None, True, False, True]),
            "i8": pa.array([-128, 127, None, 0, -1, 1], pa.int8()),
            "u64": pa.array([0, 2**64 - 1, None, 1, 2, 3], pa.uint64()),
        }
    )
    t = Table.from_arrow(data, dev)
    back = t.to_arrow()
    assert_identical(back, data)
    got = back.column("f64").to_numpy(zero_copy_only=False)
    assert np.signbit(got[0]) and math.isnan(got[1])  # -0.0 kept its sign, NaN stayed NaN


@pytest.mark.parametrize("unit", UNITS)
def test_every_arrow_time_unit(dev, unit):
    vals = np.array([-(2**62), -1, 0, 1, 2**62], dtype=np.int64)
    data = pa.table(
        {
            "ts": pa.array(vals).view(pa.timestamp(unit)),
            "tz": pa.array(vals).view(pa.timestamp(unit, tz="UTC")),
            "td": pa.array(vals, mask=vals == 0).view(pa.duration(unit)),
        }
    )
    t = Table.from_arrow(data, dev)
    assert t.column("ts").dtype == np.dtype(f"datetime64[{unit}]")
    assert t.column("td").dtype == np.dtype(f"timedelta64[{unit}]")
    assert_identical(t.to_arrow(), data)


def test_zero_rows_and_zero_chunks(dev):
    data = pa.table({f"c{i}": pa.chunked_array([], t) for i, t in enumerate(ALL_TYPES)})
    t = Table.from_arrow(data, dev)
    assert t.num_rows == 0 and t.nbytes == dev.bytes_in_use()
    assert_identical(t.to_arrow(), data)


def test_sliced_strings_keep_only_their_chars(dev):
    base = pa.array(["aaaa", "bb", None, "cccccc", "d"])
    data = pa.table({"s": base.slice(1, 3)})  # offsets start at 4 in the shared buffer
    t = Table.from_arrow(data, dev)
    col = t.column("s")
    assert col.chars_range() == (0, 8)  # rebased: only "bb" + "cccccc" were copied
    assert t.nbytes == dev.bytes_in_use() == 4 * 4 + 8 + 3
    assert_identical(t.to_arrow(), data)


def test_metadata_and_nullability_are_kept(dev):
    schema = pa.schema([pa.field("a", pa.int32(), nullable=False)], metadata={b"k": b"v"})
    data = pa.table({"a": pa.array([1, 2], pa.int32())}, schema=schema)
    t = Table.from_arrow(data, dev)
    assert t.schema.field("a").nullable is False and t.metadata == {b"k": b"v"}
    assert_identical(t.to_arrow(), data)


def test_pandas_round_trip_with_index_and_missing_values(dev):
    pd = pytest.importorskip("pandas", reason="pandas is a dev extra")
    df = pd.DataFrame(
        {
            "i": pd.array([1, None, 3], dtype="Int64"),
            "f": [1.5, np.nan, -0.0],
            "s": ["x", None, "ünï"],
            "t": pd.to_datetime(
                ["2024-01-01 00:00:00", None, "1969-12-31 23:59:59.5"], format="ISO8601"
            ),
            "d": pd.to_timedelta([1, 2, None], unit="s"),
        },
        index=pd.Index([10, 20, 30], name="key"),
    )
    t = Table.from_pandas(df, dev)
    assert t.column_names == ["i", "f", "s", "t", "d", "key"]
    back = t.to_pandas()
    pd.testing.assert_frame_equal(back, df)


def test_pandas_range_index_is_metadata_only(dev):
    pd = pytest.importorskip("pandas", reason="pandas is a dev extra")
    df = pd.DataFrame({"a": np.arange(5, dtype=np.int16)})
    t = Table.from_pandas(df, dev)
    assert t.column_names == ["a"] and t.nbytes == 10
    pd.testing.assert_frame_equal(t.to_pandas(), df)


def test_cudf_interchange():
    cudf = pytest.importorskip("cudf", reason="cuDF is not installed (needs a GPU and RAPIDS)")
    from reference_impl.device import get_device

    dev = get_device("cuda")
    df = cudf.DataFrame({"a": [1, None, 3], "b": [0.5, 1.5, None], "s": ["x", None, "zz"]})
    t = Table.from_cudf(df, dev)
    assert t.column("a").null_count == 1
    assert t.to_arrow().equals(df.to_arrow())
    assert t.to_cudf().to_arrow().equals(df.to_arrow())


def test_binary_columns_are_held_in_the_string_layout(dev):
    """binary and large_binary: any bytes (NUL, invalid UTF-8), int32 and int64 offsets;
    built from device buffers when named."""
    raw = [b"\x00", None, b"", b"\xff\xfe", b"abc"]
    data = pa.table({"b": pa.array(raw, pa.binary()), "lb": pa.array(raw, pa.large_binary())})
    table = Table.from_arrow(data.slice(1), dev)
    assert table.column("b").offsets.dtype == np.int32 and table.column("lb").offsets.dtype == np.int64
    assert_identical(table.to_arrow(), data.slice(1))
    chars = dev.asarray(np.frombuffer(b"\xff\x00ab", np.uint8))
    col = Column(chars, offsets=dev.asarray(np.array([0, 2, 4], np.int64)), type=pa.large_binary())
    assert Table({"c": col}).to_arrow().column("c").to_pylist() == [b"\xff\x00", b"ab"]
