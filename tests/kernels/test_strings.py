"""String keys and payload (``Strings``: Arrow offsets + chars) through the CPU
kernels: the hash against its numpy and pure-Python twins and the documented
example; partition properties (rows kept, equal keys together, stable, exactly
``npartitions`` views); bad offsets rejected before any allocation."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference_impl.device import SimDevice
from reference_impl.kernels import (
    Strings,
    hash_bytes,
    hash_columns,
    hash_numpy,
    partition,
    partition_ids,
    pid_numpy,
)
from reference_impl.kernels import hashing as H


def host_strings(values: list[str | None], large: bool = False,
                 skip: int = 0) -> Strings:
    """numpy ``Strings`` built by pyarrow; ``skip`` leading rows sliced off
    (so ``offsets[0] != 0`` and the chars buffer holds bytes no row uses)."""
    arr = pa.array(values, pa.large_string() if large else pa.string())[skip:]
    _, off, data = arr.buffers()
    off = np.frombuffer(off, np.int64 if large else np.int32)[arr.offset:arr.offset + len(arr) + 1]
    chars = np.frombuffer(data, np.uint8) if data is not None else np.empty(0, np.uint8)
    return Strings(off.copy(), chars.copy())


def on(dev, s: Strings) -> Strings:
    return Strings(dev.asarray(s.offsets), dev.asarray(s.chars))


def rows(dev, s: Strings) -> list[bytes]:
    off = dev.to_host(s.offsets) if dev.is_device_array(s.offsets) else s.offsets
    chars = dev.to_host(s.chars) if dev.is_device_array(s.chars) else s.chars
    return [chars[off[i]:off[i + 1]].tobytes() for i in range(len(off) - 1)]


DEV = SimDevice("256 MiB")


# --- the hash -------------------------------------------------------------------------
def test_documented_example():
    """The worked example in kernels/README.md, digit for digit."""
    assert hash_bytes(b"") == 0xE220A8397B1DCDAF  # mix64(0)
    assert "héllo".encode() == bytes.fromhex("68c3a96c6c6f")
    e = hash_bytes("héllo".encode())  # 6 bytes: one zero-padded word
    assert e == 0x0DDF4F6C7DEC068B
    h = H.hash_numpy([host_strings(["héllo"])])[0]
    assert int(h) == (e + 0x9E3779B97F4A7C15) % 2**64 == 0xAC16C925FD3682A0
    assert int(pid_numpy(np.array([h]), 16)[0]) == 10
    g = "Grüße, Jürgen".encode()  # 16 bytes: two full words
    assert g.hex() == "4772c3bcc39f652c204ac3bc7267656e"
    assert hash_bytes(g) == 0xDE04C4943358B4DE
    assert int(H.hash_numpy([host_strings(["Grüße, Jürgen"])])[0]) == 0x7C3C3E4DB2A330F3
    both = host_strings(["héllo", "Grüße, Jürgen"])
    got = DEV.to_host(partition_ids(DEV, [on(DEV, both)], 16)).tolist()
    assert got == [10, 7]
    assert DEV.to_host(partition_ids(DEV, [on(DEV, both)], 1000)).tolist()[1] == 485
    seven = np.array([7, 7], np.int64)
    assert int(H.hash_numpy([seven, both])[0]) == 0x2F6DDC1E4A04A9F7


texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)


@settings(deadline=None)
@given(st.lists(texts, max_size=60), st.booleans(), st.integers(0, 3))
def test_kernel_numpy_and_python_hashes_agree(values, large, skip):
    skip = min(skip, len(values))
    s = host_strings(values, large, skip)
    want = [hash_bytes(v.encode()) for v in values[skip:]]
    assert hash_numpy([s]).tolist() == [
        (e + 0x9E3779B97F4A7C15) % 2**64 for e in want]
    assert H.hash_strings_numpy(s.offsets, s.chars).tolist() == want
    assert np.array_equal(DEV.to_host(hash_columns(DEV, [on(DEV, s)])), hash_numpy([s]))


def test_hash_depends_on_bytes_only():
    """Length goes in first ("a" != "a\\0"); where the row sits in chars does not matter;
    int32 and int64 offsets agree."""
    vals = ["a", "a\0", "", "\0", "abcdefgh", "abcdefgh\0"]
    h = hash_numpy([host_strings(vals)])
    assert len(set(h.tolist())) == len(vals)
    assert np.array_equal(hash_numpy([host_strings(["zz", *vals], large=True, skip=1)]), h)
    assert np.array_equal(DEV.to_host(hash_columns(DEV, [on(DEV, host_strings(vals, True))])), h)


def test_null_strings_hash_to_the_null_constant():
    s = host_strings(["x", "", "yyyyyyyyyy"])
    valid = np.zeros(3, bool)
    h = DEV.to_host(hash_columns(DEV, [on(DEV, s)], [DEV.asarray(valid)]))
    assert (h == H.NULL_HASH + H.GOLDEN).all()
    assert np.array_equal(h, hash_numpy([s], [valid]))


# --- partitioning -------------------------------------------------------------------
@st.composite
def string_tables(draw):
    pool = draw(st.lists(texts, min_size=1, max_size=6))  # few values: many equal keys
    nrows = draw(st.integers(0, 200))
    skip = draw(st.integers(0, 3))
    picks = draw(st.lists(st.integers(0, len(pool) - 1), min_size=nrows + skip,
                          max_size=nrows + skip))
    values = [pool[i] for i in picks]
    large = draw(st.booleans())
    mask = draw(st.none() | st.lists(st.booleans(), min_size=nrows, max_size=nrows))
    int_key = draw(st.booleans())
    n = draw(st.sampled_from([1, 2, 3, 7, 64, 257]))
    return values, skip, large, mask, int_key, n


@settings(deadline=None, max_examples=60)
@given(string_tables())
def test_partition_properties(table):
    values, skip, large, mask, int_key, n = table
    dev = SimDevice("64 MiB")
    key = host_strings(values, large, skip)
    nrows = len(key)
    payload = host_strings([v[::-1] for v in values[skip:]], not large)  # other offset dtype
    rowid = np.arange(nrows, dtype=np.int64)
    k2 = (rowid % 3).astype(np.int16)
    keys = [key, k2] if int_key else [key]
    valid = None if mask is None else [np.array(mask, bool)] + ([None] if int_key else [])
    base = dev.bytes_in_use()
    dkeys = [on(dev, k) if isinstance(k, Strings) else dev.asarray(k) for k in keys]
    dvalid = None if valid is None else [None if m is None else dev.asarray(m) for m in valid]
    res = partition(dev, dkeys, [on(dev, payload), dev.asarray(rowid)], n, valid=dvalid)

    ids = pid_numpy(hash_numpy(keys, valid), n)
    order = np.argsort(ids, kind="stable")
    assert np.array_equal(dev.to_host(res.ids), ids)
    counts = np.bincount(ids, minlength=n)
    assert np.array_equal(dev.to_host(res.counts), counts)
    out_key, out_pay, out_rowid = res.columns[0], res.columns[-2], dev.to_host(res.columns[-1])
    for s, d in ((out_key, key), (out_pay, payload)):
        assert s.offsets.dtype == d.offsets.dtype and s.chars.dtype == np.uint8
        off = dev.to_host(s.offsets)
        assert off[0] == 0 and len(s.chars) == off[-1]  # one compact buffer
    key_rows, pay_rows = rows(dev, key), rows(dev, payload)
    # the documented order: a stable argsort by partition id (so rows are stable) ...
    assert np.array_equal(out_rowid, order)
    assert rows(dev, out_key) == [key_rows[i] for i in order]
    assert rows(dev, out_pay) == [pay_rows[i] for i in order]
    # ... so the multiset of rows is kept, and equal keys share a partition
    assert sorted(zip(rows(dev, out_key), out_rowid.tolist(), strict=True)) == sorted(
        zip(key_rows, range(nrows), strict=True))
    by_key: dict[object, set[int]] = {}
    for i in range(nrows):
        null = valid is not None and not valid[0][i]
        ident = (None if null else key_rows[i], int(k2[i]) if int_key else 0)
        by_key.setdefault(ident, set()).add(int(ids[i]))
    assert all(len(p) == 1 for p in by_key.values())
    # exactly n partitions, empty ones included, as zero-copy views
    parts = res.split()
    assert len(parts) == n
    before = dev.bytes_in_use()
    for p, part in enumerate(parts):
        sk, sp, r = part[0], part[-2], part[-1]
        assert len(sk) == len(sp) == len(r) == counts[p]
        assert len(sk.offsets) == counts[p] + 1
        assert sk.chars is out_key.chars  # whole chars buffer; offsets not rebased
        got = dev.to_host(r)
        assert (ids[got] == p).all() and (np.diff(got) > 0).all()  # stable
        assert rows(dev, sk) == [key_rows[i] for i in got]
        assert rows(dev, res.slice(p, len(res.columns) - 2)) == [pay_rows[i] for i in got]
    assert dev.bytes_in_use() == before
    del res, parts, part, sk, sp, r, out_key, out_pay, s, dkeys, dvalid
    assert dev.bytes_in_use() == base  # outputs and scratch all came back


def test_many_rows_several_chunks_and_string_out_buffers(dev):
    rng = np.random.default_rng(11)
    nrows = 150_000  # parallel path: one chunk per thread
    vals = [("ü" * int(rng.integers(0, 3))) + "k" * int(rng.integers(0, 30)) + str(i % 5000)
            for i in range(nrows)]
    key = host_strings(vals, large=False)
    dkey = on(dev, key)
    rowid = dev.asarray(np.arange(nrows))
    ids = pid_numpy(hash_numpy([key]), 256)
    order = np.argsort(ids, kind="stable")
    nbytes = int(key.offsets[-1])
    out = [Strings(dev.empty(nrows + 1, np.int32), dev.empty(nbytes, np.uint8)),
           dev.empty(nrows, np.int64)]
    before = dev.bytes_in_use()
    res = partition(dev, [dkey], [rowid], 256, out=out)
    assert res.columns[0] is out[0] and res.columns[1] is out[1]
    assert np.array_equal(dev.to_host(res.columns[1]), order)
    want = host_strings([vals[i] for i in order])
    assert np.array_equal(dev.to_host(out[0].offsets), want.offsets)
    assert np.array_equal(dev.to_host(out[0].chars), want.chars)
    del res
    assert dev.bytes_in_use() == before


def test_empty_string_column(dev):
    s = on(dev, host_strings([]))
    res = partition(dev, [s], [s], 5)
    assert [len(p[0]) for p in res.split()] == [0] * 5
    assert dev.to_host(res.columns[1].offsets).tolist() == [0]
    assert len(res.columns[1].chars) == 0


# --- bad input ----------------------------------------------------------------------
def _raises(dev, exc, match, fn, *args, **kwargs):
    before = dev.bytes_in_use()
    with pytest.raises(exc, match=match):
        fn(dev, *args, **kwargs)
    assert dev.bytes_in_use() == before


@pytest.mark.parametrize("fn", [hash_columns, partition_ids, partition])
def test_offsets_not_monotonic(dev, fn):
    bad = Strings(dev.asarray(np.array([0, 2, 5, 3, 6], np.int32)), dev.asarray(np.zeros(6, np.uint8)))
    args = {hash_columns: ([bad],), partition_ids: ([bad], 4), partition: ([bad], [], 4)}[fn]
    _raises(dev, ValueError, r"^key column 0 has offsets that are not monotonic: offsets\[2\] = 5 > "
            r"offsets\[3\] = 3$", fn, *args)


def test_offsets_past_chars_names_the_payload_column(dev):
    k = dev.asarray(np.arange(2))
    bad = Strings(dev.asarray(np.array([0, 2, 9], np.int64)), dev.asarray(np.zeros(8, np.uint8)))
    _raises(dev, ValueError, r"^payload column 'name' has offsets that run past its chars buffer: "
            r"offsets\[2\] = 9 > 8 bytes$", partition, [k], {"name": bad}, 4)


def test_negative_first_offset(dev):
    bad = Strings(dev.asarray(np.array([-1, 2], np.int32)), dev.asarray(np.zeros(8, np.uint8)))
    _raises(dev, ValueError, r"^key column 's' has a negative first offset \(-1\)$",
            partition, {"s": bad}, [], 4)


@pytest.mark.parametrize("what, exc, match", [
    ("host offsets", TypeError, r"^offsets of key column 0 is a ndarray, not an array of device "
     r".*asarray"),
    ("host chars", TypeError, r"^chars of key column 0 is a ndarray, not an array of device"),
    ("uint32 offsets", TypeError, r"^offsets of key column 0 must be int32 or int64, got uint32$"),
    ("int8 chars", TypeError, r"^chars of key column 0 must be uint8, got int8$"),
    ("no offsets", ValueError, r"^offsets of key column 0 must have rows \+ 1 entries, got none$"),
    ("2-D chars", ValueError, r"^chars of key column 0 must be 1-D, got shape \(2, 2\)$"),
    ("strided chars", ValueError, r"^chars of key column 0 must be contiguous"),
])
def test_bad_string_buffers(dev, what, exc, match):
    off = np.array([0, 1, 4], np.int32)
    chars = np.zeros(4, np.uint8)
    s = {
        "host offsets": lambda: Strings(off, dev.asarray(chars)),
        "host chars": lambda: Strings(dev.asarray(off), chars),
        "uint32 offsets": lambda: Strings(dev.asarray(off.astype(np.uint32)), dev.asarray(chars)),
        "int8 chars": lambda: Strings(dev.asarray(off), dev.asarray(chars.view(np.int8))),
        "no offsets": lambda: Strings(dev.asarray(off[:0]), dev.asarray(chars)),
        "2-D chars": lambda: Strings(dev.asarray(off), dev.asarray(chars.reshape(2, 2))),
        "strided chars": lambda: Strings(dev.asarray(off), dev.asarray(np.zeros(8, np.uint8))[::2]),
    }[what]()
    _raises(dev, exc, match, partition, [s], [], 4)


def test_string_column_of_different_length(dev):
    k = dev.asarray(np.arange(3))
    s = on(dev, host_strings(["a", "b"]))
    _raises(dev, ValueError, r"^payload column 0 has 2 rows, expected 3", partition, [k], [s], 4)


@pytest.mark.parametrize("bad, match", [
    ("array", r"^out for payload column 0 must be Strings\(offsets, chars\), got SimArray$"),
    ("offsets", r"^offsets out for payload column 0 must be 1-D with 4 entries, got shape \(3,\)$"),
    ("chars", r"^chars out for payload column 0 must be 1-D with 6 bytes, got shape \(7,\)$"),
    ("dtype", r"^offsets out for payload column 0 has dtype int64, expected int32$"),
    ("alias", r"^chars out for payload column 0 shares memory with an input column$"),
])
def test_bad_string_out_buffers(dev, bad, match):
    k = dev.asarray(np.arange(3))
    s = on(dev, host_strings(["ab", "", "cdef"]))
    good_off, good_chars = dev.empty(4, np.int32), dev.empty(6, np.uint8)
    buf = {"array": dev.empty(3, np.int64),
           "offsets": Strings(dev.empty(3, np.int32), good_chars),
           "chars": Strings(good_off, dev.empty(7, np.uint8)),
           "dtype": Strings(dev.empty(4, np.int64), good_chars),
           "alias": Strings(good_off, s.chars)}[bad]
    _raises(dev, ValueError, match, partition, [k], [s], 4, out=[dev.empty(3, np.int64), buf])
