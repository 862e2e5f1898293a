"""The numba.cuda kernels under numba's CUDA simulator give output identical to
the CPU kernels: ids, counts, offsets and the order of every column, for int,
float32 and float64 keys (NaN of three bit patterns, -0.0, inf), bool keys and
datetime64 keys (NaT), alone and combined, with and without validity masks; and
equal keys (every NaN; -0.0 and 0.0) share a partition on the simulator too.
String keys and payload (``Strings``: int32 and int64 offsets, sliced, empty and
non-ASCII rows, nulls) come out bit for bit the same: offsets and chars; and so do the
Tables ``partition_table(..., backend=...)`` builds from string keys, string payload and
validity masks. Destination mode (``partition_by_ids``: given ids of several widths, the
shared and global-memory paths, strings and masks as payload, ``out=``, empty input) gives
the CPU twin's counts, offsets and columns, and the CUDA range check finds the first bad id.

The simulator is selected by ``NUMBA_ENABLE_CUDASIM=1``, which numba reads at
import time, so the check runs in a fresh subprocess.  It uses numba's own
``numba.cuda`` (numba 0.68.1 still ships the simulator; no ``numba-cuda``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import warnings
    warnings.simplefilter("ignore", RuntimeWarning)  # uint64 wraparound in numpy scalars
    import numpy as np
    from numba import config, cuda
    # The kernels must really run on the simulator, not on a GPU or not at all.
    assert config.ENABLE_CUDASIM, "NUMBA_ENABLE_CUDASIM=1 was not honoured"
    assert cuda.jit.__module__ == "numba.cuda.simulator.api", cuda.jit.__module__
    from reference_impl.device import SimDevice
    from reference_impl.kernels import hash_columns, partition, partition_ids
    from reference_impl.kernels import cuda as kc

    kc.ROWS_PER_THREAD = 1  # 128 rows per block: several blocks at small sizes
    dev = SimDevice("256 MiB")
    rng = np.random.default_rng(7)
    N = 160  # two blocks of 128 threads: the cross-block paths at the least simulator time

    def same(a, b):
        return a.dtype == b.dtype and np.array_equal(
            dev.to_host(a).view(np.uint8), dev.to_host(b).view(np.uint8))

    def check(keys, payload, n, valid=None, tag=""):
        a = partition(dev, keys, payload, n, valid=valid, backend="cpu")
        b = partition(dev, keys, payload, n, valid=valid, backend="cuda")
        for name in ("ids", "counts", "offsets"):
            assert same(getattr(a, name), getattr(b, name)), (tag, n, name)
        for i, (x, y) in enumerate(zip(a.columns, b.columns)):
            assert same(x, y), (tag, n, "column", i)
        print("ok", tag, n)

    k = dev.asarray(rng.integers(-20, 20, N))
    f = dev.asarray(np.where(rng.random(N) < 0.2, -0.0, rng.standard_normal(N)).astype(np.float32))
    pl = dev.asarray(rng.random(N))
    b8 = dev.asarray(rng.integers(0, 255, N).astype(np.uint8))
    m = dev.asarray(rng.random(N) > 0.3)
    for n in (1, 7, 64):
        check([k], [pl, b8], n, tag="one key")
    check([k, f], [pl], 13, valid=[m, None], tag="two keys + nulls")
    skew = rng.integers(0, 1000, N); skew[rng.random(N) < 0.9] = 5
    check([dev.asarray(skew)], [pl], 64, tag="skew")
    check([dev.asarray(np.empty(0, np.int32))], [dev.asarray(np.empty(0, np.float64))], 4,
          tag="empty")
    outs = [dev.empty(N, k.dtype), dev.empty(N, pl.dtype), dev.empty(N, b8.dtype)]
    ids_buf = dev.empty(N, np.int32)
    a = partition(dev, [k], [pl, b8], 64, backend="cpu")
    b = partition(dev, [k], [pl, b8], 64, backend="cuda", out=outs, ids_out=ids_buf)
    assert b.ids is ids_buf and all(x is y for x, y in zip(b.columns, outs))
    assert same(a.ids, b.ids) and all(same(x, y) for x, y in zip(a.columns, b.columns))
    print("ok out=")
    kc.SHARED_PARTITIONS_LIMIT = 16  # global-memory histogram / cursor path
    check([k], [pl], 64, tag="global path")
    kc.SHARED_PARTITIONS_LIMIT = kc.SHARED_MAX
    h_cpu = hash_columns(dev, [k, f], [m, None], backend="cpu")
    h_gpu = hash_columns(dev, [k, f], [m, None], backend="cuda")
    assert same(h_cpu, h_gpu)
    assert same(partition_ids(dev, [f], 5, backend="cpu"), partition_ids(dev, [f], 5, backend="cuda"))

    # float64 with NaN (three payloads), -0.0 and inf; bool; datetime64 with NaT.
    M = 100  # one block of the simulator's 128 threads
    f8 = rng.standard_normal(M)
    f8[rng.random(M) < 0.1] = -0.0
    f8[::17] = np.inf
    bits = f8.view(np.uint64)
    bits[1::9] = 0x7FF8000000000000  # the canonical quiet NaN
    bits[4::9] = 0xFFF8000000000000  # negative quiet NaN
    bits[7::9] = 0x7FF0000000000001  # signalling NaN
    kf8 = dev.asarray(f8)
    kb = dev.asarray(rng.random(M) < 0.5)
    days = rng.integers(0, 1000, M).astype("timedelta64[D]")
    dt = (np.datetime64("2020-01-01") + days).astype("datetime64[ns]")
    dt[::11] = np.datetime64("NaT")
    kdt = dev.asarray(dt)
    pm = dev.asarray(rng.random(M))
    bm = dev.asarray(rng.random(M) > 0.2)
    check([kf8], [pm], 13, tag="float64 + NaN")
    check([kb], [pm], 3, tag="bool")
    check([kdt], [pm, kf8], 13, tag="datetime64 + NaT")
    check([kb, kf8, kdt], [pm], 7, valid=[None, bm, None], tag="bool + float64 + datetime64")
    for keys in ([kf8], [kb, kf8, kdt]):
        assert same(hash_columns(dev, keys, backend="cpu"), hash_columns(dev, keys, backend="cuda"))
    # Equal keys land together on the simulator too: every NaN, and -0.0 with 0.0.
    ids = dev.to_host(partition_ids(dev, [kf8], 64, backend="cuda"))
    nan = np.isnan(f8)
    assert nan.sum() >= 30 and len(set(ids[nan].tolist())) == 1, ids[nan]
    zero = f8 == 0
    zero_ids = set(dev.to_host(partition_ids(
        dev, [dev.asarray(np.array([0.0, -0.0]))], 64, backend="cuda")).tolist())
    assert len(zero_ids) == 1, zero_ids
    print("ok", "NaN rows", int(nan.sum()), "zero rows", int(zero.sum()))

    # Strings: keys and payload, int32 and int64 offsets, a sliced column (offsets[0] != 0),
    # empty and non-ASCII rows, rows longer than one 8-byte word, nulls, two blocks.
    import pyarrow as pa
    from reference_impl.kernels import Strings

    def strings(values, large):
        arr = pa.array(values, pa.large_string() if large else pa.string())
        _, off, data = arr.buffers()
        off = np.frombuffer(off, np.int64 if large else np.int32)[arr.offset:]
        return Strings(dev.asarray(off), dev.asarray(np.frombuffer(data, np.uint8)))

    def same_col(x, y):
        if isinstance(x, Strings):
            return same(x.offsets, y.offsets) and same(x.chars, y.chars)
        return same(x, y)

    words = ["", "a", "a\\0", "héllo", "日本語テキスト", "abcdefgh", "abcdefghi", "x" * 40]
    S = 140
    vals = [words[i] for i in rng.integers(0, len(words), S + 5)]
    s_key = strings(vals, large=True).slice(5, S + 5)  # sliced: offsets[0] != 0
    s_pay = strings(vals[:S], large=False)
    sm = dev.asarray(rng.random(S) > 0.2)
    k2 = dev.asarray(rng.integers(0, 5, S))
    # hashes alone: no syncthreads, cheap on the simulator
    assert same(hash_columns(dev, [s_key, k2], [sm, None], backend="cpu"),
                hash_columns(dev, [s_key, k2], [sm, None], backend="cuda"))
    assert same(partition_ids(dev, [s_pay], 9, backend="cpu"),
                partition_ids(dev, [s_pay], 9, backend="cuda"))
    a = partition(dev, {"s": s_key, "k": k2}, {"t": s_pay, "v": pl[:S]}, 13, valid=[sm, None],
                  backend="cpu")
    b = partition(dev, {"s": s_key, "k": k2}, {"t": s_pay, "v": pl[:S]}, 13, valid=[sm, None],
                  backend="cuda")
    for name in ("ids", "counts", "offsets"):
        assert same(getattr(a, name), getattr(b, name)), ("strings", name)
    assert all(same_col(x, y) for x, y in zip(a.columns, b.columns)), "string columns differ"
    assert int(dev.to_host(b.columns[0].offsets)[0]) == 0  # rebased, compact
    empty = strings([], large=False)
    e = partition(dev, [empty], [empty], 4, backend="cuda")
    assert dev.to_host(e.columns[1].offsets).tolist() == [0] and len(e.columns[1].chars) == 0
    # the offsets check used on a CUDA device, run here on the simulator
    assert kc.first_bad_offset(dev, s_key.offsets) == -1
    assert kc.first_bad_offset(dev, dev.asarray(np.array([0, 3, 5, 4, 2], np.int32))) == 2
    assert kc.first_bad_offset(dev, dev.asarray(np.array([-1, 3], np.int64))) == -2
    print("ok strings")

    # Table level: what partition_table hands the kernels (string keys, string payload of
    # both offset dtypes, validity masks as payload) gives the same partitions on both twins.
    from reference_impl import Table
    from reference_impl.table.partition import partition_table

    T = 150
    tt = Table.from_arrow(pa.table({
        "s": pa.array([None if i % 9 == 0 else words[i % len(words)] for i in range(T + 3)]),
        "v": pa.array(np.arange(T + 3), mask=np.arange(T + 3) % 7 == 0),
        "t": pa.array([words[(5 * i) % len(words)] for i in range(T + 3)], pa.large_string()),
    }), dev).slice(3)  # string offsets not starting at 0
    for on in (["s"], ["t", "v"]):
        pc = partition_table(tt, on, 5, backend="cpu")
        pg = partition_table(tt, on, 5, backend="cuda")
        assert len(pc) == len(pg) == 5
        for x, y in zip(pc, pg):
            assert x.num_rows == y.num_rows and x.equals(y), on
            for cx, cy in zip(x.columns, y.columns):
                assert all(same(bx, by) for bx, by in zip(cx.buffers(), cy.buffers())), on
    print("ok table")

    # Destination mode (partition_by_ids): given ids of every width, the CUDA twin's count
    # (int32 ids used as they are, others copied to int32 on the way) + the shared rank and
    # scatter give the CPU twin's counts, offsets and columns; result.ids is the input.
    from reference_impl.kernels import partition_by_ids

    def check_ids(ids, payload, n, tag, **kw):
        a = partition_by_ids(dev, ids, payload, n, backend="cpu")
        b = partition_by_ids(dev, ids, payload, n, backend="cuda", **kw)
        assert a.ids is ids and b.ids is ids, tag
        for name in ("counts", "offsets"):
            assert same(getattr(a, name), getattr(b, name)), (tag, n, name)
        assert len(a.columns) == len(b.columns) == len(payload), tag
        for i, (x, y) in enumerate(zip(a.columns, b.columns)):
            assert same_col(x, y), (tag, n, "column", i)
        print("ok ids", tag, n)
        return b

    d64 = rng.integers(0, 64, N); d64[rng.random(N) < 0.5] = 3  # skewed
    check_ids(dev.asarray(d64.astype(np.int32)), [pl, b8], 64, "int32")
    check_ids(dev.asarray(d64.astype(np.uint8)), [pl], 64, "uint8")
    check_ids(dev.asarray(d64.astype(np.uint64)), [b8], 64, "uint64")
    check_ids(dev.asarray((d64 % 7).astype(np.int16)), [pl], 7, "int16")
    check_ids(dev.asarray(np.zeros(N, np.int64)), [pl], 1, "npartitions=1")
    kc.SHARED_PARTITIONS_LIMIT = 16  # global-memory histogram / cursor path
    check_ids(dev.asarray(d64), [pl], 64, "int64, global path")
    kc.SHARED_PARTITIONS_LIMIT = kc.SHARED_MAX
    # strings (both offset dtypes, one sliced) and a validity mask as payload, out= reused
    dS = dev.asarray(rng.integers(0, 5, S).astype(np.uint16))
    def strings_out(col):
        nbytes = int(col.offsets[len(col)]) - int(col.offsets[0])
        return Strings(dev.empty(len(col) + 1, col.offsets.dtype), dev.empty(nbytes, np.uint8))

    outs = [strings_out(s_key), dev.empty(S, np.bool_), strings_out(s_pay),
            dev.empty(S, np.float64)]
    b = check_ids(dS, {"s": s_key, "m": sm, "t": s_pay, "v": pl[:S]}, 5, "strings + mask",
                  out=outs)
    assert b.columns[0] is outs[0] and b.names == ["s", "m", "t", "v"]
    e = check_ids(dev.asarray(np.empty(0, np.uint8)), [empty, dev.asarray(np.empty(0))], 4,
                  "empty")
    assert dev.to_host(e.counts).tolist() == [0] * 4 and dev.to_host(e.offsets).tolist() == [0] * 5
    # the range check used on a CUDA device, run here on the simulator
    # (on the unsigned view, where -1 reads as 2**64 - 1)
    bad = dev.asarray(np.array([0, 4, 2, -1, 9], np.int64)).view(np.uint64)
    assert kc.first_bad_id(dev, bad, np.uint64(4)) == 3
    assert kc.first_bad_id(dev, bad[:3], np.uint64(4)) == -1
    u = dev.asarray(np.array([3, 200, 255], np.uint8))
    assert kc.first_bad_id(dev, u, np.uint8(199)) == 1
    assert kc.first_bad_id(dev, dev.asarray(np.empty(0, np.uint32)), np.uint32(3)) == -1
    print("ok destination mode")

    from numba.cuda.simulator.kernel import FakeCUDAKernel
    assert isinstance(kc._scatter(), FakeCUDAKernel), type(kc._scatter())
    print("ALL-OK")
    """
)


@pytest.mark.cudasim
def test_cuda_kernels_match_cpu_under_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=600)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0 and "ModuleNotFoundError: No module named 'numba.cuda'" in out:
        pytest.skip("numba.cuda is not importable (numba without its CUDA target; "
                    "install numba-cuda for the simulator)")
    assert proc.returncode == 0, out[-4000:]
    assert "ALL-OK" in proc.stdout
