"""Bad input: a clear error, raised before any allocation (the ledger does not grow)."""

from __future__ import annotations

import numpy as np
import pytest

from reference_impl.kernels import hash_columns, partition, partition_ids


@pytest.fixture
def cols(dev):
    return dev.asarray(np.arange(10)), dev.asarray(np.arange(10.0))


def _raises(dev, exc, match, fn, *args, **kwargs):
    before = dev.bytes_in_use()
    with pytest.raises(exc, match=match):
        fn(dev, *args, **kwargs)
    assert dev.bytes_in_use() == before


@pytest.mark.parametrize("n", [0, -3])
def test_npartitions_below_one(dev, cols, n):
    _raises(dev, ValueError, rf"^npartitions must be between 1 and 2147483647, got {n}$",
            partition, [cols[0]], [cols[1]], n)


def test_npartitions_not_int(dev, cols):
    _raises(dev, TypeError, r"^npartitions must be an int, got float$",
            partition, [cols[0]], [cols[1]], 4.0)


def test_columns_of_different_lengths(dev, cols):
    short = dev.asarray(np.arange(7))
    _raises(dev, ValueError, r"^payload column 1 has 7 rows, expected 10 \(all columns and "
            r"masks must have the same length\)$", partition, [cols[0]], [cols[1], short], 4)


def test_mask_of_different_length(dev, cols):
    mask = dev.asarray(np.ones(3, bool))
    _raises(dev, ValueError, r"^validity mask of key column 0 has 3 rows, expected 10",
            partition, [cols[0]], [], 4, valid=[mask])


def test_object_key_names_the_column(dev, cols):
    # a sim device refuses object arrays, so build one that claims to be a device array
    class Obj(np.ndarray):
        pass

    obj = np.array(["a"] * 10, dtype=object).view(Obj)
    dev_is = dev.is_device_array
    dev.is_device_array = lambda a: isinstance(a, Obj) or dev_is(a)
    _raises(dev, TypeError, r"^key column 'name' has unsupported dtype object; keys must be "
            r"bool, int8-64, uint8-64, float32/64, datetime64, timedelta64 or Strings$",
            partition, {"id": cols[0], "name": obj}, [], 4)


def test_string_key_names_the_column_index(dev, cols):
    s = dev.asarray(np.array(["x"] * 10))
    _raises(dev, TypeError, r"^key column 1 has unsupported dtype <U1; keys must be",
            hash_columns, [cols[0], s])


def test_string_payload_names_the_column(dev, cols):
    s = dev.asarray(np.array([b"ab"] * 10))
    _raises(dev, TypeError, r"^payload column 'tag' has unsupported dtype \|S2; payload columns "
            r"must be fixed-width with an itemsize of 1, 2, 4 or 8 bytes, or Strings$",
            partition, [cols[0]], {"v": cols[1], "tag": s}, 4)


def test_float16_key_is_unsupported(dev):
    h = dev.asarray(np.zeros(4, np.float16))
    _raises(dev, TypeError, r"^key column 0 has unsupported dtype float16", partition_ids, [h], 2)


def test_no_key_columns(dev, cols):
    _raises(dev, ValueError, r"^at least one key column is required$", partition, [], [cols[1]], 4)


def test_host_array_is_not_a_device_array(dev, cols):
    _raises(dev, TypeError, r"^key column 0 is a ndarray, not an array of device .*asarray",
            partition, [np.arange(10)], [], 4)


def test_non_bool_mask(dev, cols):
    m = dev.asarray(np.ones(10, np.uint8))
    _raises(dev, TypeError, r"^validity mask of key column 0 must be bool, got uint8$",
            partition, [cols[0]], [], 4, valid=[m])


@pytest.mark.parametrize("bad, match", [
    ("short", r"^out for payload column 0 must be 1-D with 10 rows, got shape \(9,\)$"),
    ("dtype", r"^out for payload column 0 has dtype int64, expected float64$"),
    ("host", r"^out for payload column 0 is a ndarray, not an array of device"),
    ("alias", r"^out for payload column 0 shares memory with an input column$"),
    ("count", r"^out has 1 arrays for 2 columns \(keys then payload\)$"),
])
def test_bad_out_buffers(dev, cols, bad, match):
    key_out = dev.empty(10, np.int64)
    pay = {"short": dev.empty(9, np.float64), "dtype": dev.empty(10, np.int64),
           "host": np.empty(10), "alias": cols[1]}.get(bad)
    out = [key_out] if bad == "count" else [key_out, pay]
    _raises(dev, ValueError, match, partition, [cols[0]], [cols[1]], 4, out=out)


def test_bad_ids_out(dev, cols):
    _raises(dev, ValueError, r"^ids_out has dtype int64, expected int32$",
            partition, [cols[0]], [cols[1]], 4, ids_out=dev.empty(10, np.int64))
