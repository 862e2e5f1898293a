"""Each bad input raises its exact message before anything is allocated: the ledger
reads the same before and after the failed call."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest

from reference_impl import Column, Table, get_device
from reference_impl.table import ColumnNotFoundError
from reference_impl.table.partition import partition_ids, partition_table

SUPPORTED = (
    "supported: bool, int8-int64, uint8-uint64, float32, float64, timestamp/datetime64 and "
    "duration/timedelta64 in s, ms, us or ns, utf8 (string), large_utf8 (large_string), "
    "binary and large_binary; held as one of those: unordered dictionaries, decimals, "
    "date32/64, time32/64, halffloat, null, and lists, large lists, fixed-size lists, structs and "
    "maps of any of these (no dictionary inside)"
)


def raises_exactly(dev, exc, message, call):
    """``call()`` raises ``exc`` with exactly ``message`` and leaves the ledger unchanged."""
    before, allocs = dev.bytes_in_use(), set(dev.live_allocations())
    with pytest.raises(exc, match=f"^{re.escape(message)}$"):
        call()
    assert dev.bytes_in_use() == before
    assert set(dev.live_allocations()) == allocs  # nothing allocated and kept, nothing freed


@pytest.fixture
def table(dev):
    return Table.from_arrow(pa.table({"a": pa.array([1, 2, 3]), "b": ["x", "y", None]}), dev)


@pytest.fixture
def ints(dev):
    return dev.asarray(np.arange(3, dtype=np.int64))


def test_missing_column_lists_the_present_ones(dev, table):
    msg = "column 'zz' not in the table; columns present: 'a', 'b'"
    raises_exactly(dev, ColumnNotFoundError, msg, lambda: table.select(["a", "zz"]))
    raises_exactly(dev, KeyError, msg, lambda: table.column("zz"))
    raises_exactly(dev, KeyError, msg, lambda: partition_table(table, ["a", "zz"], 4))
    raises_exactly(dev, KeyError, msg, lambda: partition_ids(table, "zz", 4))
    raises_exactly(
        dev,
        KeyError,
        "columns 'p', 'q' not in the table; columns present: 'a', 'b'",
        lambda: table.select(["p", "q"]),
    )


def test_unsupported_arrow_type_allocates_nothing(dev):
    data = pa.table({"ok": pa.array(np.arange(1000)), "f": pa.array([b"ab"] * 1000, pa.binary(2))})
    raises_exactly(
        dev,
        TypeError,
        f"column 'f' has unsupported type fixed_size_binary[2]; {SUPPORTED}",
        lambda: Table.from_arrow(data, dev),
    )
    type_ = pa.struct([("x", pa.int64()), ("y", pa.list_(pa.binary(2)))])
    structs = pa.table({"ok": pa.array([1.5]), "s": pa.array([{"x": 1, "y": [b"ab"]}], type_)})
    raises_exactly(
        dev,
        TypeError,
        f"column 's' has unsupported type {type_} (field 'y.item' is fixed_size_binary[2]); "
        f"{SUPPORTED}",
        lambda: Table.from_arrow(structs, dev),
    )


def test_logical_types_that_cannot_travel_allocate_nothing(dev):
    """An ordered dictionary's order lives in a dictionary the outputs rebuild: refused,
    naming the column."""
    ordered = pa.DictionaryArray.from_arrays(
        pa.array([0, 1], pa.int8()), ["lo", "hi"], ordered=True
    )
    raises_exactly(
        dev,
        TypeError,
        "column 'o' is an ordered dictionary (dictionary<values=string, indices=int8, "
        "ordered=1>): its order lives in a dictionary each output rebuilds from the values "
        "it holds; cast it to its values first",
        lambda: Table.from_arrow(pa.table({"ok": pa.array([1, 2]), "o": ordered}), dev),
    )



def test_unsupported_device_dtype(dev):
    for arr, shown in [
        (np.array([1 + 2j]), "complex128"),
        (np.array(["2020-01-02"], "datetime64[D]"), "datetime64[D]"),
    ]:
        data = dev.asarray(arr)
        raises_exactly(
            dev,
            TypeError,
            f"column 'c' has unsupported type dtype {shown}; {SUPPORTED}",
            lambda data=data: Column(data, name="c"),
        )


def test_columns_of_different_lengths(dev):
    a, b = Column(dev.asarray(np.arange(3))), Column(dev.asarray(np.arange(2)))
    raises_exactly(
        dev,
        ValueError,
        "columns have different lengths ('a': 3, 'b': 2); a table's "
        "columns must all have the same number of rows",
        lambda: Table({"a": a, "b": b}),
    )


def test_mask_of_another_length(dev, ints):
    mask = dev.asarray(np.array([True, False]))
    raises_exactly(
        dev,
        ValueError,
        "column 'a' validity mask has 2 rows, the column has 3",
        lambda: Column(ints, mask, name="a"),
    )


def test_npartitions_below_one(dev):
    t = Table.from_arrow(pa.table({"k": pa.array([1, 2, 3])}), dev)
    for n in (0, -3):
        msg = f"npartitions must be between 1 and 2147483647, got {n}"
        raises_exactly(dev, ValueError, msg, lambda n=n: partition_table(t, "k", n))
        raises_exactly(dev, ValueError, msg, lambda n=n: partition_ids(t, "k", n))


def test_npartitions_that_is_not_an_int(dev):
    """2.5 and True pass a range check (1 <= 2.5, True == 1): the type is checked first."""
    t = Table.from_arrow(pa.table({"k": pa.array([1, 2, 3])}), dev)
    for n, kind in ((2.5, "float"), (True, "bool"), ("3", "str")):
        msg = f"npartitions must be an int, got {kind}"
        raises_exactly(dev, TypeError, msg, lambda n=n: partition_table(t, "k", n))
        raises_exactly(dev, TypeError, msg, lambda n=n: partition_ids(t, "k", n))


def test_host_arrays_where_device_arrays_are_required(dev, table, ints):
    name = dev.name
    raises_exactly(
        dev,
        TypeError,
        f"column 'a' data is a numpy.ndarray in host memory, not an "
        f"array of device {name!r}; move it with device.asarray() first",
        lambda: Column(np.arange(3), device=dev, name="a"),
    )
    raises_exactly(
        dev,
        TypeError,
        f"column 'a' validity mask is a numpy.ndarray in host memory, "
        f"not an array of device {name!r}; move it with device.asarray() first",
        lambda: Column(ints, np.ones(3, bool), name="a"),
    )
    raises_exactly(
        dev,
        TypeError,
        f"take indices is a numpy.ndarray in host memory, not an "
        f"array of device {name!r}; move it with device.asarray() first",
        lambda: table.take(np.array([0, 1])),
    )
    raises_exactly(
        dev,
        TypeError,
        "column 'a': pass device= (the data is a ndarray, which does "
        "not name one of this library's devices)",
        lambda: Column(np.arange(3), name="a"),
    )


def test_array_of_another_device(dev):
    other = get_device("sim", "1 MiB")
    arr = other.asarray(np.arange(3))
    raises_exactly(
        dev,
        TypeError,
        f"column 'a' data is an array of another device ({other.name}), "
        f"not an array of device {dev.name!r}; move it with device.asarray() first",
        lambda: Column(arr, device=dev, name="a"),
    )


def test_string_offsets_not_monotonic(dev):
    chars = dev.asarray(np.frombuffer(b"abcd", np.uint8))
    offsets = dev.asarray(np.array([0, 3, 2, 4], np.int32))
    raises_exactly(
        dev,
        ValueError,
        "column 's' offsets are not monotonic: offsets[1] = 3 > offsets[2] = 2",
        lambda: Column(chars, offsets=offsets, name="s"),
    )


def test_string_offsets_past_the_chars_buffer(dev):
    chars = dev.asarray(np.frombuffer(b"abcd", np.uint8))
    offsets = dev.asarray(np.array([0, 2, 9], np.int64))
    raises_exactly(
        dev,
        ValueError,
        "column 's' offsets run past the chars buffer: offsets[-1] = 9 > 4 chars",
        lambda: Column(chars, offsets=offsets, name="s"),
    )
    negative = dev.asarray(np.array([-1, 2], np.int32))
    raises_exactly(
        dev,
        ValueError,
        "column 's' offsets start at -1, below 0",
        lambda: Column(chars, offsets=negative, name="s"),
    )


def test_wrong_mask_and_offset_dtypes(dev, ints):
    raises_exactly(
        dev,
        TypeError,
        "column 'a' validity mask must be bool (True = valid), got dtype uint8",
        lambda: Column(ints, dev.asarray(np.ones(3, np.uint8)), name="a"),
    )
    chars = dev.asarray(np.frombuffer(b"ab", np.uint8))
    raises_exactly(
        dev,
        TypeError,
        "column 's' offsets must be int32 (utf8) or int64 (large_utf8), got dtype uint32",
        lambda: Column(chars, offsets=dev.asarray(np.array([0, 2], np.uint32)), name="s"),
    )
    raises_exactly(
        dev,
        TypeError,
        "column 's' has int32 offsets, which hold string or binary, not large_binary",
        lambda: Column(chars, offsets=dev.asarray(np.array([0, 2], np.int32)), type=pa.large_binary(), name="s"),
    )
    raises_exactly(
        dev,
        TypeError,
        "column 'x' has dtype int64, which cannot hold double (expected float64)",
        lambda: Column(ints, type=pa.float64(), name="x"),
    )


def test_take_out_of_range(dev, table):
    idx = dev.asarray(np.array([0, 3]))
    raises_exactly(
        dev,
        IndexError,
        "take index 3 is out of range for a table of 3 rows",
        lambda: table.take(idx),
    )


def test_partition_bad_input_with_string_keys(dev, table):
    """String keys are checked like any other: a missing key (listing the columns
    present), a repeated key, no key, and a bad partition count allocate nothing."""
    present = "columns present: 'a', 'b'"
    for fn in (partition_table, partition_ids):
        raises_exactly(
            dev,
            KeyError,
            f"column 'c' not in the table; {present}",
            lambda f=fn: f(table, ["b", "c"], 2),
        )
        raises_exactly(
            dev,
            ValueError,
            "key columns repeat in ['b', 'b']",
            lambda f=fn: f(table, ["b", "b"], 2),
        )
        raises_exactly(
            dev, ValueError, "partition needs at least one key column", lambda f=fn: f(table, [], 2)
        )
        for n in (0, -1):
            raises_exactly(
                dev,
                ValueError,
                f"npartitions must be between 1 and 2147483647, got {n}",
                lambda f=fn, n=n: f(table, "b", n),
            )
        raises_exactly(
            dev, TypeError, "npartitions must be an int, got float", lambda f=fn: f(table, "b", 2.0)
        )
