"""The disk tier: files inside spill_dir only, accounted, private, cleaned up,
wide objects (> IOV_MAX frames), short OS transfers and > 2 GiB frames."""

from __future__ import annotations

import contextlib
import gc
import os
import stat

import numpy as np
import pytest

from conformance import conformance_id, not_exercised, requires
from conformance.store.harness import LIMIT, files_under, seed_digest, value_digest
from conformance.store.tiers import cleanup_store, fill


@conformance_id("STORE-DISK-001", clause="9.1")
@requires("store", "store.spill.disk")
def test_disk_round_trip(impl, make_store):
    h = cleanup_store(impl, make_store)
    keys = fill(h)
    for i in range(8):
        assert value_digest(h.device, h.store[f"k{i}"]) == seed_digest(i, LIMIT // 3)
        h.check(keys)


@conformance_id("STORE-DISK-002", clause="9.4")
@requires("store", "store.spill.disk")
def test_files_removed_on_delete(impl, make_store):
    h = cleanup_store(impl, make_store)
    keys = fill(h)
    for k in sorted(keys):
        del h.store[k]
    h.check(set())
    assert not files_under(h.env.spill_dir), (
        f"files left after deleting every key: {files_under(h.env.spill_dir)}"
    )


@conformance_id("STORE-DISK-003", clause=("9.5", "11.3", "11.5"))
@requires("store", "store.spill.disk")
def test_files_removed_on_close(impl, make_store):
    h = cleanup_store(impl, make_store)
    fill(h)
    h.close()  # checks: ledger at baseline, spill_dir empty


@conformance_id("STORE-DISK-004", clause="9.5")
@requires("store", "store.spill.disk")
def test_files_removed_on_garbage_collection(impl, make_store):
    h = cleanup_store(impl, make_store)
    fill(h)
    h.closed = True  # never closed: dropped
    h.store = None
    gc.collect()
    left = files_under(h.env.spill_dir)
    assert not left, f"a store dropped without close() left files behind: {sorted(left)}"
    assert h.ledger() == 0


@conformance_id("STORE-DISK-005", clause="9.3")
@requires("store", "store.spill.disk")
def test_spill_files_are_private(impl, make_store):
    h = cleanup_store(impl, make_store)
    fill(h)
    files = files_under(h.env.spill_dir)
    bad = {
        p: oct(stat.S_IMODE(os.stat(p).st_mode))
        for p in files
        if stat.S_IMODE(os.stat(p).st_mode) != 0o600
    }
    dirs = {os.path.dirname(p) for p in files}
    bad_dirs = {
        d: oct(stat.S_IMODE(os.stat(d).st_mode))
        for d in dirs
        if stat.S_IMODE(os.stat(d).st_mode) != 0o700
    }
    assert not bad and not bad_dirs, (
        f"spill files must be 0600 and their directory 0700: {bad} {bad_dirs}"
    )


@conformance_id("STORE-DISK-008", clause="9.4")
@requires("store", "store.spill.disk")
def test_files_removed_on_overwrite(impl, make_store):
    """Overwriting a disk-resident key with a small value leaves no file of the old one."""
    h = cleanup_store(impl, make_store)
    keys = fill(h)
    for k in sorted(keys):
        h.store[k] = h.value(64, seed=7)
    snap = h.check(keys)
    on_disk = sorted(k for k, t in snap.tiers.items() if t == "disk")
    assert not on_disk, f"64-byte values were spilled to disk: {on_disk}"
    assert not files_under(h.env.spill_dir), (
        f"files left after overwriting every disk-resident key: {sorted(files_under(h.env.spill_dir))}"
    )


WIDE_FRAMES = 1100  # > IOV_MAX (1024): one writev/readv cannot take them all


@conformance_id("STORE-DISK-009", clause="9.8")
@requires("store", "store.spill.disk", "store.limit.host")
def test_many_frames_round_trip_through_disk(make_store):
    """One host-only value whose pickle (protocol 5, out-of-band buffers) has WIDE_FRAMES
    frames, a list of small numpy arrays, is pushed to disk by a host limit of 0: it must be
    ONE file (the value was not split into one file per array) and come back equal. Then one
    key holding a tuple of WIDE_FRAMES small device arrays makes the same round trip."""
    h = make_store(device_limit=0, capacity=4 * LIMIT, host_limit=0, disk_accounting=False)
    n = 16
    wide = [np.full(n, i % 251, dtype=np.uint8) for i in range(WIDE_FRAMES)]
    h.store["wide"] = wide
    snap = h.check({"wide"})
    files = files_under(h.env.spill_dir)
    assert snap.tiers["wide"] == "disk", f"with a host limit of 0 it belongs on disk: {snap}"
    assert len(files) == 1 and sum(files.values()) >= n * WIDE_FRAMES, (
        f"one value of {WIDE_FRAMES} arrays should be one file of at least "
        f"{n * WIDE_FRAMES:,} bytes, spill_dir holds {len(files)} file(s), "
        f"{sum(files.values()):,} bytes"
    )
    back = h.store["wide"]
    assert isinstance(back, list) and len(back) == WIDE_FRAMES, (
        f"{WIDE_FRAMES} arrays stored, {type(back).__name__} of {len(back)} came back"
    )
    wrong = [i for i in range(WIDE_FRAMES) if not np.array_equal(np.asarray(back[i]), wide[i])]
    assert not wrong, f"{len(wrong)} of {WIDE_FRAMES} arrays came back wrong, e.g. #{wrong[:5]}"
    del back, h.store["wide"]
    h.check(set())

    value = tuple(h.value(n, seed=i) for i in range(WIDE_FRAMES))
    h.store["wide"] = value
    del value
    snap = h.check({"wide"}, oversize={"wide": n * WIDE_FRAMES})
    assert snap.tiers["wide"] == "disk", (
        f"a {n * WIDE_FRAMES:,}-byte value over both limits should be on disk: {dict(snap.tiers)}"
    )
    back = h.store["wide"]
    assert len(back) == WIDE_FRAMES, f"{WIDE_FRAMES} arrays stored, {len(back)} came back"
    wrong = [i for i in range(WIDE_FRAMES) if value_digest(h.device, back[i]) != seed_digest(i, n)]
    assert not wrong, f"{len(wrong)} of {WIDE_FRAMES} arrays came back wrong, e.g. #{wrong[:5]}"
    del back
    h.check({"wide"}, oversize={"wide": n * WIDE_FRAMES})


# Linux moves at most MAX_RW_COUNT (2 GiB - 4 KiB) per read/write call and may move
# less at any time; a correct store loops.  Here every call moves at most SHORT_CAP.
SHORT_CAP = 4096
_SHORT_FUNCS = ("write", "writev", "pwrite", "pwritev", "read", "readv", "pread", "preadv")


def _cap_buffers(buffers, cap):
    out, left = [], cap
    for b in buffers:
        m = memoryview(b).cast("B")
        if m.nbytes > left:
            m = m[:left]
        out.append(m)
        left -= m.nbytes
        if left <= 0:
            break
    return out


@contextlib.contextmanager
def short_transfers(cap=SHORT_CAP):
    """Patch the os module (in this process) so each transfer call moves at most ``cap`` bytes.

    Yields a dict counting the calls that were cut short.
    """
    real = {name: getattr(os, name) for name in _SHORT_FUNCS if hasattr(os, name)}
    cut = dict.fromkeys(real, 0)

    def count(name, asked, n):
        if n < asked:
            cut[name] += 1
        return n

    def write(fd, data, *rest):
        m = memoryview(data).cast("B")
        return count("write", m.nbytes, real["write"](fd, m[:cap]))

    def pwrite(fd, data, offset, *rest):
        m = memoryview(data).cast("B")
        return count("pwrite", m.nbytes, real["pwrite"](fd, m[:cap], offset))

    def vectored(name):
        """writev/readv and their positional twins: cap the buffer list, count the cut."""

        def call(fd, buffers, *rest):
            bufs = list(buffers)
            asked = sum(memoryview(b).nbytes for b in bufs)
            return count(name, asked, real[name](fd, _cap_buffers(bufs, cap), *rest))

        return call

    def read(fd, n):
        cut["read"] += n > cap
        return real["read"](fd, min(n, cap))

    def pread(fd, n, offset):
        cut["pread"] += n > cap
        return real["pread"](fd, min(n, cap), offset)

    patches = {
        "write": write, "pwrite": pwrite, "read": read, "pread": pread,
        **{name: vectored(name) for name in ("writev", "pwritev", "readv", "preadv")},
    }  # fmt: skip
    try:
        for name in real:
            setattr(os, name, patches[name])
        yield cut
    finally:
        for name, fn in real.items():
            setattr(os, name, fn)


@conformance_id("STORE-DISK-010", clause="9.7")
@requires("store", "store.spill.disk")
def test_short_writes_and_reads(impl, make_store):
    """The OS may transfer fewer bytes than asked (beyond 2 GiB it always does): values that
    spill and come back while every os-level read/write moves at most 4 KiB are intact."""
    kw = {"capacity": 8 * LIMIT, "disk_accounting": False}
    if "store.limit.host" in impl.capabilities:
        kw["host_limit"] = LIMIT // 4
    h = make_store(**kw)
    sizes = {"big": 100_000 + 157, "big2": 100_000 + 3}  # > device limit: straight out
    with short_transfers() as cut:
        for i, (k, n) in enumerate(sizes.items()):
            h.store[k] = h.value(n, seed=40 + i)
        snap = h.check(set(sizes), oversize=sizes)
        not_on_disk = {k: t for k, t in snap.tiers.items() if t != "disk"}
        assert not not_on_disk, (
            f"values over both limits (device limit 0) should be on disk: {not_on_disk}"
        )
        for i, (k, n) in enumerate(sizes.items()):
            got = h.store[k]
            assert value_digest(h.device, got) == seed_digest(40 + i, n), (
                f"{k} ({n:,} bytes) came back corrupted after short os-level transfers"
            )
            del got
    h.check(set(sizes), oversize=sizes)
    if not any(cut.values()):
        not_exercised(
            "no os-level read or write was cut short: the store never called the patched "
            f"os functions ({', '.join(sorted(cut))}) with more than {SHORT_CAP:,} bytes"
        )


BIG_FRAME = (2 << 30) + 4096 + 123  # one frame over MAX_RW_COUNT (2 GiB - 4 KiB)


@pytest.mark.slow
@conformance_id("STORE-DISK-011", clause="9.9")
@requires("store", "store.spill.disk")
def test_frame_over_2gib_round_trips(impl, make_store):
    """A real > 2 GiB frame through the disk tier (slow: -m slow or the stress profile)."""
    kw = {"device_limit": LIMIT, "capacity": 2 * BIG_FRAME, "disk_accounting": False}
    if "store.limit.host" in impl.capabilities:
        kw["host_limit"] = LIMIT
    h = make_store(**kw)
    h.store["huge"] = h.value(BIG_FRAME, seed=2)
    snap = h.check({"huge"}, oversize={"huge": BIG_FRAME})
    assert snap.tiers["huge"] == "disk", f"the value should be on disk: {dict(snap.tiers)}"
    files = files_under(h.env.spill_dir)
    assert len(files) == 1 and sum(files.values()) >= BIG_FRAME, (
        f"the {BIG_FRAME:,}-byte value should be one file of at least its size; spill_dir "
        f"holds {len(files)} file(s), {sum(files.values()):,} bytes"
    )
    got = h.store["huge"]
    assert value_digest(h.device, got) == seed_digest(2, BIG_FRAME), (
        f"a {BIG_FRAME:,}-byte frame came back corrupted from disk"
    )
    del got
    h.check({"huge"}, oversize={"huge": BIG_FRAME})


@conformance_id("STORE-DISK-013", clause=("9.10", "10.1"))
@requires("store", "store.spill.disk", "store.limit.host")
def test_values_of_several_mib_round_trip_and_are_checked(impl, make_store):
    """Values larger than any chunk a store hashes, buffers or batches by (here 3 and 5 MiB,
    over a device limit of 64 KiB, with host limit 0: each goes to disk whole) read back
    exactly, twice; then one byte changed deep in the larger file is detected, naming the key."""
    h = make_store(host_limit=0, capacity=12 << 20)  # room to read the largest back
    sizes = {"m3": 3 << 20, "m5": 5 << 20}
    for i, (k, n) in enumerate(sizes.items()):
        h.store[k] = h.value(n, seed=40 + i)
    snap = h.check(set(sizes), oversize=sizes)
    if set(snap.tiers.values()) != {"disk"}:
        not_exercised(f"the values did not both go to disk: {dict(snap.tiers)}")
    for _round in range(2):
        for i, (k, n) in enumerate(sizes.items()):
            assert value_digest(h.device, h.store[k]) == seed_digest(40 + i, n), (
                f"{k} ({n:,} bytes) came back wrong from disk"
            )
        h.check(set(sizes), oversize=sizes)
    files = files_under(h.env.spill_dir)
    path = max(files, key=files.get)
    with open(path, "r+b") as f:
        f.seek(files[path] * 3 // 4)
        b = f.read(1)
        f.seek(files[path] * 3 // 4)
        f.write(bytes([b[0] ^ 0x5A]))
    try:
        v = h.store["m5"]
        got = value_digest(h.device, v)
    except Exception as exc:
        assert "m5" in str(exc), f"the error must name the key 'm5': {type(exc).__name__}: {exc}"
    else:
        raise AssertionError(
            f"a byte changed at 3/4 of a {files[path]:,}-byte spill file was not detected "
            f"(read back {'intact' if got == seed_digest(41, 5 << 20) else 'changed'})"
        )
    del h.store["m5"]
    h.check({"m3"}, oversize=sizes)
