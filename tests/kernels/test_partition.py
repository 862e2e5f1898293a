"""The CPU partition kernels against a plain numpy reference: a stable argsort
by partition id.  Also: skew, empty input, views, and the device ledger."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from reference_impl.device import SimDevice
from reference_impl.kernels import hash_numpy, partition, pid_numpy

PAYLOAD_DTYPES = ["int8", "uint16", "int32", "float32", "float64", "bool", "int64",
                  "datetime64[ms]", "uint64"]


def _reference(keys, payload, n, valid=None):
    ids = pid_numpy(hash_numpy(keys, valid), n)
    order = np.argsort(ids, kind="stable")
    counts = np.bincount(ids, minlength=n).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return ids, counts, offsets, [c[order] for c in [*keys, *payload]]


def _check(dev, res, keys, payload, n, valid=None):
    ids, counts, offsets, cols = _reference(keys, payload, n, valid)
    assert np.array_equal(dev.to_host(res.ids), ids)
    assert res.ids.dtype == np.int32
    assert np.array_equal(dev.to_host(res.counts), counts)
    assert np.array_equal(dev.to_host(res.offsets), offsets)
    assert len(res.columns) == len(cols)
    for got, want in zip(res.columns, cols, strict=True):
        assert got.dtype == want.dtype
        # compare bits: NaN payloads must move unchanged
        assert np.array_equal(dev.to_host(got).view(np.uint8), want.view(np.uint8))


@st.composite
def tables(draw):
    nrows = draw(st.integers(0, 300))
    nkeys = draw(st.integers(1, 3))
    key_dtypes = draw(st.lists(st.sampled_from(["int64", "int32", "uint8", "float64", "float32",
                                                "bool", "datetime64[ns]"]),
                               min_size=nkeys, max_size=nkeys))
    # few distinct values, so partitions hold many equal keys (stability matters)
    keys = [draw(hnp.arrays(np.dtype(dt), nrows, elements=hnp.from_dtype(np.dtype(dt))
                            if dt.startswith("float") else None, unique=False))
            for dt in key_dtypes]
    pool = draw(st.integers(1, 5))
    keys = [k[np.arange(nrows) % pool] if nrows and draw(st.booleans()) else k for k in keys]
    payload = [draw(hnp.arrays(np.dtype(dt), nrows))
               for dt in draw(st.lists(st.sampled_from(PAYLOAD_DTYPES), max_size=4))]
    valid = None
    if draw(st.booleans()):
        valid = [draw(st.none() | hnp.arrays(np.bool_, nrows)) for _ in keys]
    n = draw(st.sampled_from([1, 2, 3, 7, 16, 64, 257, 1024, 4096, 5000]))
    return keys, payload, valid, n, draw(st.booleans())


@settings(deadline=None)
@given(tables())
def test_partition_matches_stable_argsort(table):
    keys, payload, valid, n, reuse = table
    dev = SimDevice("64 MiB")
    dkeys = [dev.asarray(k) for k in keys]
    dpay = [dev.asarray(p) for p in payload]
    dvalid = None if valid is None else [None if m is None else dev.asarray(m) for m in valid]
    out = [dev.empty(len(c), c.dtype) for c in dkeys + dpay] if reuse else None
    ids = dev.empty(len(keys[0]), np.int32) if reuse else None
    base = dev.bytes_in_use()
    res = partition(dev, dkeys, dpay, n, valid=dvalid, out=out, ids_out=ids)
    _check(dev, res, keys, payload, n, valid)
    del res  # no reference cycles: the bytes come back at once, without gc
    assert dev.bytes_in_use() == base  # scratch and outputs all came back


def test_skewed_keys_one_key_holds_90_percent(dev):
    rng = np.random.default_rng(3)
    nrows = 200_000
    keys = rng.integers(0, 10_000, nrows)
    keys[rng.random(nrows) < 0.9] = 42
    payload = [np.arange(nrows, dtype=np.int64)]
    for n in (16, 1024, 4096):
        res = partition(dev, [dev.asarray(keys)], [dev.asarray(payload[0])], n)
        _check(dev, res, [keys], payload, n)
        assert dev.to_host(res.counts).max() >= 0.85 * nrows


def test_larger_input_several_chunks(dev):
    rng = np.random.default_rng(4)
    nrows = 100_000  # several chunks per thread
    keys = [rng.integers(-(2**40), 2**40, nrows), rng.standard_normal(nrows)]
    payload = [rng.integers(0, 255, nrows).astype(np.uint8), rng.random(nrows).astype(np.float32)]
    res = partition(dev, [dev.asarray(k) for k in keys], [dev.asarray(p) for p in payload], 999)
    _check(dev, res, keys, payload, 999)


def test_empty_input_gives_empty_partitions_with_dtypes(dev):
    keys = [np.empty(0, np.float32)]
    payload = [np.empty(0, np.int16), np.empty(0, "datetime64[ns]")]
    res = partition(dev, [dev.asarray(keys[0])], [dev.asarray(p) for p in payload], 5)
    assert [c.dtype for c in res.columns] == [np.float32, np.int16, np.dtype("datetime64[ns]")]
    assert all(len(c) == 0 for c in res.columns)
    assert dev.to_host(res.counts).tolist() == [0] * 5
    assert dev.to_host(res.offsets).tolist() == [0] * 6
    assert [len(c) for part in res.split() for c in part] == [0] * 15


def test_split_slice_and_names_give_device_views(dev):
    keys = np.arange(1000)
    res = partition(dev, {"k": dev.asarray(keys)}, {"v": dev.asarray(keys * 2)}, 8)
    assert res.names == ["k", "v"]
    parts = res.split()
    assert sum(len(p[0]) for p in parts) == 1000
    before = dev.bytes_in_use()
    for i, (k, v) in enumerate(parts):
        assert dev.is_device_array(k)
        assert np.array_equal(dev.to_host(v), dev.to_host(k) * 2)
        assert np.array_equal(dev.to_host(res.slice(i, "v")), dev.to_host(v))
        assert (pid_numpy(hash_numpy([dev.to_host(k)]), 8) == i).all()
    assert dev.bytes_in_use() == before  # views, no copies


def test_out_buffers_are_reused_and_match(dev):
    rng = np.random.default_rng(5)
    nrows = 100_000
    keys = rng.integers(0, 2**40, nrows)
    payload = [rng.random(nrows), rng.integers(0, 9, nrows).astype(np.int16)]
    dk, dp = dev.asarray(keys), [dev.asarray(p) for p in payload]
    out = [dev.empty(nrows, np.int64), dev.empty(nrows, np.float64), dev.empty(nrows, np.int16)]
    ids = dev.empty(nrows, np.int32)
    for n in (7, 1024):
        before = dev.bytes_in_use()
        res = partition(dev, [dk], dp, n, out=out, ids_out=ids)
        _check(dev, res, [keys], payload, n)
        assert all(a is b for a, b in zip(res.columns, out, strict=True)) and res.ids is ids
        del res
        assert dev.bytes_in_use() == before


def test_cpu_kernels_run_one_parallel_chunk_per_thread():
    import numba

    from reference_impl.kernels import cpu

    assert len(cpu.chunk_bounds(10**6)) - 1 == numba.get_num_threads()
    for kernel in (cpu.scatter_kernel, cpu.ids_hist):
        assert kernel.targetoptions["parallel"]
