"""``partition_by_ids`` (destination mode) on the CPU kernels against a plain numpy
reference: a stable argsort by the given ids.  Every int and uint dtype of ids; strings
and validity masks as payload; empty input; ``npartitions=1``; ``out=``; and bad ids
refused, naming the label, the first bad value and its row, before anything is allocated."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from reference_impl.device import SimDevice
from reference_impl.kernels import Strings, partition, partition_by_ids

ID_DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
PAYLOAD_DTYPES = ["int8", "uint16", "int32", "float32", "float64", "bool", "int64",
                  "datetime64[ms]", "uint64"]


def _reference(ids, payload, n):
    order = np.argsort(ids, kind="stable")
    counts = np.bincount(ids.astype(np.int64), minlength=n).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return counts, offsets, [c[order] for c in payload]


def _check(dev, res, ids, payload, n):
    counts, offsets, cols = _reference(ids, payload, n)
    assert np.array_equal(dev.to_host(res.counts), counts)
    assert np.array_equal(dev.to_host(res.offsets), offsets)
    assert res.counts.dtype == res.offsets.dtype == np.int64
    assert res.npartitions == n
    assert len(res.columns) == len(cols)
    for got, want in zip(res.columns, cols, strict=True):
        assert got.dtype == want.dtype
        # compare bits: NaN payloads must move unchanged
        assert np.array_equal(dev.to_host(got).view(np.uint8), want.view(np.uint8))


@st.composite
def cases(draw):
    nrows = draw(st.integers(0, 300))
    dtype = np.dtype(draw(st.sampled_from(ID_DTYPES)))
    n = draw(st.sampled_from([1, 2, 3, 7, 16, 64, 100, 127, 255, 256, 1024, 4096, 5000]))
    top = min(n, int(np.iinfo(dtype).max) + 1)
    # few distinct ids among many rows, so partitions hold many rows (stability matters)
    pool = draw(st.integers(1, top))
    ids = draw(hnp.arrays(dtype, nrows, elements=st.integers(0, min(pool, top) - 1)))
    payload = [draw(hnp.arrays(np.dtype(dt), nrows))
               for dt in draw(st.lists(st.sampled_from(PAYLOAD_DTYPES), max_size=4))]
    return ids, payload, n, draw(st.booleans())


@settings(deadline=None)
@given(cases())
def test_matches_a_stable_argsort_by_the_ids(case):
    ids, payload, n, reuse = case
    dev = SimDevice("64 MiB")
    dids = dev.asarray(ids)
    dpay = [dev.asarray(p) for p in payload]
    out = [dev.empty(len(c), c.dtype) for c in dpay] if reuse else None
    base = dev.bytes_in_use()
    res = partition_by_ids(dev, dids, dpay, n, out=out)
    _check(dev, res, ids, payload, n)
    assert res.ids is dids  # the ids are not copied
    if reuse:
        assert all(a is b for a, b in zip(res.columns, out, strict=True))
    del res
    assert dev.bytes_in_use() == base  # scratch and outputs all came back


def test_equals_partition_given_partitions_own_ids(dev):
    """Fed the ids ``partition`` computed, destination mode places every row the same."""
    rng = np.random.default_rng(1)
    keys = dev.asarray(rng.integers(-(2**40), 2**40, 100_000))  # several parallel chunks
    pl = [dev.asarray(rng.random(100_000)), dev.asarray(rng.integers(0, 9, 100_000, np.int16))]
    for n in (7, 1024, 5000):
        hashed = partition(dev, [keys], pl, n)
        given = partition_by_ids(dev, hashed.ids, [keys, *pl], n)
        for name in ("counts", "offsets"):
            assert np.array_equal(dev.to_host(getattr(hashed, name)),
                                  dev.to_host(getattr(given, name)))
        for a, b in zip(hashed.columns, given.columns, strict=True):
            assert np.array_equal(dev.to_host(a), dev.to_host(b))


def test_skewed_large_ids_of_every_width(dev):
    rng = np.random.default_rng(2)
    nrows = 200_000
    base = rng.integers(0, 120, nrows)  # fits int8
    base[rng.random(nrows) < 0.9] = 42
    payload = [np.arange(nrows, dtype=np.int64), rng.random(nrows).astype(np.float32)]
    dpay = [dev.asarray(p) for p in payload]
    for dtype in ID_DTYPES:
        ids = base.astype(dtype)
        res = partition_by_ids(dev, dev.asarray(ids), dpay, 120)
        _check(dev, res, ids, payload, 120)


def test_strings_and_validity_masks_as_payload(dev):
    rng = np.random.default_rng(3)
    words = ["", "a", "héllo", "日本語テキスト", "abcdefghi", "x" * 40, None]
    nrows = 500
    values = [words[i] for i in rng.integers(0, len(words), nrows + 3)]
    ids = rng.integers(0, 6, nrows).astype(np.uint8)
    order = np.argsort(ids, kind="stable")
    for large in (False, True):
        arr = pa.array(values, pa.large_string() if large else pa.string())[3:]  # sliced
        _, off, data = arr.buffers()
        offsets = np.frombuffer(off, np.int64 if large else np.int32)[arr.offset:]
        offsets = offsets[:len(arr) + 1]
        s = Strings(dev.asarray(offsets), dev.asarray(np.frombuffer(data, np.uint8)))
        assert int(s.offsets[0]) != 0
        mask = np.asarray(arr.is_valid())
        res = partition_by_ids(dev, dev.asarray(ids), {"s": s, "valid": dev.asarray(mask)}, 6)
        assert res.names == ["s", "valid"]
        got = res.columns[0]
        assert isinstance(got, Strings) and got.offsets.dtype == offsets.dtype
        goff, gchars = dev.to_host(got.offsets), dev.to_host(got.chars)
        assert goff[0] == 0 and goff[-1] == len(gchars) == offsets[-1] - offsets[0]
        want = [(values[3:][i] or "").encode() for i in order]
        assert [gchars[goff[i]:goff[i + 1]].tobytes() for i in range(nrows)] == want
        assert np.array_equal(dev.to_host(res.columns[1]), mask[order])
        # per-partition views: every row of partition p has id p
        for p, (sv, mv) in enumerate(res.split()):
            rows = order[(ids[order] == p)]
            assert len(sv) == len(mv) == len(rows)
            assert np.array_equal(dev.to_host(mv), mask[rows])


def test_empty_input(dev):
    empty_s = Strings(dev.asarray(np.zeros(1, np.int32)), dev.asarray(np.empty(0, np.uint8)))
    res = partition_by_ids(dev, dev.asarray(np.empty(0, np.int64)),
                           [dev.asarray(np.empty(0, np.int16)), empty_s], 5)
    assert dev.to_host(res.counts).tolist() == [0] * 5
    assert dev.to_host(res.offsets).tolist() == [0] * 6
    assert res.columns[0].dtype == np.int16 and len(res.columns[0]) == 0
    assert dev.to_host(res.columns[1].offsets).tolist() == [0] and len(res.columns[1].chars) == 0
    assert [len(c) for part in res.split() for c in part] == [0] * 10


def test_one_partition_keeps_the_input_order(dev):
    v = np.arange(1000, dtype=np.float64)[::-1].copy()
    res = partition_by_ids(dev, dev.asarray(np.zeros(1000, np.uint16)), [dev.asarray(v)], 1)
    assert dev.to_host(res.offsets).tolist() == [0, 1000]
    assert np.array_equal(dev.to_host(res.columns[0]), v)


def test_no_payload_counts_only(dev):
    ids = np.array([3, 0, 3, 1], np.int32)
    res = partition_by_ids(dev, dev.asarray(ids), (), 4)
    assert res.columns == [] and dev.to_host(res.counts).tolist() == [1, 1, 0, 2]


# --- bad input: raised before anything is allocated ---------------------------------------
def _raises(dev, exc, match, *args, **kwargs):
    before = dev.bytes_in_use()
    dev.reset_peak()
    with pytest.raises(exc, match=match):
        partition_by_ids(dev, *args, **kwargs)
    assert dev.peak_bytes() == before, "something was allocated before the refusal"


@pytest.mark.parametrize("dtype, values, n, bad, row", [
    ("int64", [0, 2, 5, 1, -1], 5, 5, 2),
    ("int8", [0, -1, 9], 5, -1, 1),
    ("int8", [0, 100, -128], 300, -128, 2),  # n beyond the dtype: only negatives are bad
    ("uint8", [0, 1, 250], 200, 250, 2),
    ("uint64", [0, 2**64 - 1], 3, 2**64 - 1, 1),
    ("uint32", [7, 2**31], 8, 2**31, 1),
    ("int32", [4, 4], 4, 4, 0),
])
def test_ids_out_of_range_name_the_first_bad_value_and_its_row(dev, dtype, values, n, bad, row):
    ids = dev.asarray(np.array(values, dtype=dtype))
    pl = dev.asarray(np.arange(len(values), dtype=np.float64))
    _raises(dev, ValueError, rf"^ids holds {bad} at row {row}, outside \[0, {n}\) for {n} "
            r"partitions$", ids, [pl], n)
    _raises(dev, ValueError, rf"^destination 'd' holds {bad} at row {row}, outside",
            ids, [pl], n, label="destination 'd'")


@pytest.mark.parametrize("row", [0, 4095, 4096, 8191, 9999])
def test_the_first_bad_id_is_found_in_any_block(dev, row):
    """The check reduces 4096-row blocks to their maximum; the row reported is still the first."""
    ids = np.zeros(10_000, np.int16)
    ids[row] = -3
    ids[row + 1:] = 7  # later bad rows too, in the same block and after it
    _raises(dev, ValueError, rf"^ids holds -3 at row {row}, outside \[0, 7\)",
            dev.asarray(ids), [], 7)


def test_every_value_of_a_narrow_dtype_is_valid_with_enough_partitions(dev):
    ids = np.array([255, 0, 128], np.uint8)
    res = partition_by_ids(dev, dev.asarray(ids), [dev.asarray(ids)], 256)
    assert dev.to_host(res.columns[0]).tolist() == [0, 128, 255]


@pytest.mark.parametrize("ids, exc, match", [
    (np.zeros(4), TypeError, r"^ids must be an integer array \(any int or uint dtype\), got "
                             r"dtype float64$"),
    (np.zeros(4, bool), TypeError, r"^ids must be an integer array .* got dtype bool$"),
    (np.zeros((2, 2), np.int32), ValueError, r"^ids must be 1-D, got shape \(2, 2\)$"),
    (np.zeros(3, np.int32), ValueError, r"^payload column 0 has 4 rows, expected 3"),
])
def test_bad_ids_arrays(dev, ids, exc, match):
    _raises(dev, exc, match, dev.asarray(ids), [dev.asarray(np.zeros(4))], 2)


def test_host_ids_and_strings_ids_are_refused(dev):
    pl = [dev.asarray(np.zeros(4))]
    _raises(dev, TypeError, r"^ids is a ndarray, not an array of device", np.zeros(4, np.int32),
            pl, 2)
    s = Strings(dev.asarray(np.zeros(5, np.int32)), dev.asarray(np.empty(0, np.uint8)))
    _raises(dev, TypeError, r"^ids must be an integer array, got Strings$", s, pl, 2)


def test_bad_npartitions(dev):
    ids = dev.asarray(np.zeros(4, np.int32))
    _raises(dev, ValueError, r"^npartitions must be between 1 and 2147483647, got 0$", ids, [], 0)
    _raises(dev, TypeError, r"^npartitions must be an int, got float$", ids, [], 2.0)


@pytest.mark.parametrize("bad, match", [
    ("ids", r"^out for payload column 0 shares memory with an input column$"),
    ("input", r"^out for payload column 0 shares memory with an input column$"),
    ("dtype", r"^out for payload column 0 has dtype float64, expected int32$"),
    ("count", r"^out has 2 arrays for 1 columns \(payload\)$"),
])
def test_bad_out_buffers(dev, bad, match):
    ids = dev.asarray(np.zeros(4, np.int32))
    pl = dev.asarray(np.arange(4, dtype=np.int32))
    out = {"ids": [ids], "input": [pl], "dtype": [dev.empty(4, np.float64)],
           "count": [dev.empty(4, np.int32), dev.empty(4, np.int32)]}[bad]
    _raises(dev, ValueError, match, ids, [pl], 2, out=out)
