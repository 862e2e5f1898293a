"""Hash properties: the CPU kernels equal the numpy twin, floats are canonical,
nulls hash to a fixed value, and several columns combine as documented."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from reference_impl.device import SimDevice
from reference_impl.kernels import hash_columns, hash_numpy, partition_ids, pid_numpy
from reference_impl.kernels import hashing as H

KEY_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float32", "float64", "bool", "datetime64[ns]", "timedelta64[s]"]

DEV = SimDevice("256 MiB")


def _h(*cols, valid=None):
    return DEV.to_host(hash_columns(DEV, [DEV.asarray(c) for c in cols],
                                    None if valid is None else
                                    [None if m is None else DEV.asarray(m) for m in valid]))


def _mix(x: int) -> int:
    m = 2**64 - 1
    z = (x + 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def _combine(h: int, e: int) -> int:
    m = 2**64 - 1
    return h ^ ((e + 0x9E3779B97F4A7C15 + ((h << 6) & m) + (h >> 2)) & m)


@settings(deadline=None)
@given(st.sampled_from(KEY_DTYPES).flatmap(
    lambda dt: hnp.arrays(np.dtype(dt), st.integers(0, 64))))
def test_kernel_matches_numpy_twin(col):
    assert np.array_equal(_h(col), hash_numpy([col]))


@settings(deadline=None)
@given(hnp.arrays(np.int64, 40), hnp.arrays(np.float64, 40), hnp.arrays(np.bool_, 40),
       hnp.arrays(np.bool_, 40))
def test_multi_column_combine_and_nulls(a, b, ma, mb):
    got = _h(a, b, valid=[ma, mb])
    assert np.array_equal(got, hash_numpy([a, b], [ma, mb]))
    # the documented rule, in pure Python integers
    for i in range(0, 40, 7):
        ea = _mix(int(a[i]) & (2**64 - 1)) if ma[i] else int(H.NULL_HASH)
        bits = int(np.float64(0.0 if b[i] == 0 else b[i]).view(np.uint64))
        if np.isnan(b[i]):
            bits = 0x7FF8000000000000
        eb = _mix(bits) if mb[i] else int(H.NULL_HASH)
        assert int(got[i]) == _combine(_combine(0, ea), eb)


def test_negative_zero_equals_zero():
    for dt in ("float32", "float64"):
        h = _h(np.array([0.0, -0.0], dtype=dt))
        assert h[0] == h[1]


def test_every_nan_is_one_nan():
    nans64 = np.array([0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001,
                       0xFFFFFFFFFFFFFFFF], dtype=np.uint64).view(np.float64)
    nans32 = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF],
                      dtype=np.uint32).view(np.float32)
    for arr in (nans64, nans32):
        assert np.isnan(arr).all()
        assert len(set(_h(arr).tolist())) == 1
    inf = _h(np.array([np.inf, -np.inf, np.nan]))
    assert len(set(inf.tolist())) == 3


@settings(deadline=None)
@given(hnp.arrays(np.int64, st.integers(1, 30)))
def test_null_hashes_to_fixed_value_whatever_is_stored(values):
    mask = np.zeros(len(values), dtype=bool)
    h = _h(values, valid=[mask])
    assert (h == _combine(0, int(H.NULL_HASH))).all()


def test_integer_widths_sign_extend():
    vals = [-128, -1, 0, 1, 127]
    ref = _h(np.array(vals, dtype=np.int64))
    for dt in ("int8", "int16", "int32"):
        assert np.array_equal(_h(np.array(vals, dtype=dt)), ref)
    assert np.array_equal(_h(np.array([0, 1], dtype=bool)), _h(np.array([0, 1], dtype=np.uint8)))


def test_column_order_matters():
    a, b = np.arange(10), np.arange(10)[::-1].copy()
    assert not np.array_equal(_h(a, b), _h(b, a))


@pytest.mark.parametrize("n", [1, 2, 3, 16, 1000, 4096, 2**31 - 1])
def test_partition_ids_in_range_and_match_twin(n):
    keys = np.arange(-500, 500, dtype=np.int64)
    ids = DEV.to_host(partition_ids(DEV, [DEV.asarray(keys)], n))
    assert ids.dtype == np.int32
    assert ids.min() >= 0 and ids.max() < n
    assert np.array_equal(ids, pid_numpy(hash_numpy([keys]), n))
