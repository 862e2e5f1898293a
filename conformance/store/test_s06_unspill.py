"""Unspilling on access: content, type, room made first, limits kept."""

from __future__ import annotations

import gc

import numpy as np

from conformance import conformance_id, requires
from conformance.api import evict
from conformance.store.harness import LIMIT, files_under, host_bytes, seed_digest, value_digest


def _spill_first(h, n=LIMIT // 3, count=5):
    for i in range(count):
        h.store[f"k{i}"] = h.value(n, seed=i)
    snap = h.check({f"k{i}" for i in range(count)})
    assert snap.tiers["k0"] != "device", f"k0 should have been spilled: {dict(snap.tiers)}"
    return {f"k{i}" for i in range(count)}


@conformance_id("STORE-UNSPILL-001", clause=("6.1", "6.4"))
@requires("store", "store.unspill.on_access")
def test_access_brings_value_back(impl, make_store):
    """Eager unspill: when store[k] returns, a spilled value that fits is on the device (tier
    device, the ledger counting it) before any use of it, and its host or disk copy is gone.
    Checked from the host tier and, with a host limit of 0, from the disk tier."""
    stores = [("host", make_store())]
    if {"store.limit.host", "store.spill.disk"} <= impl.capabilities:
        stores.append(("disk", make_store(host_limit=0)))
    for where, h in stores:
        keys = _spill_first(h)
        del h.store["k4"]  # room for k0: bringing it back evicts nothing else
        keys.discard("k4")
        before = h.check(keys)
        files_before = files_under(h.env.spill_dir)
        v = h.store["k0"]
        snap = h.check(keys)  # before any use of v
        assert snap.tiers["k0"] == "device", (
            f"store['k0'] returned, yet k0 is in tier {snap.tiers['k0']!r} ({where} store): "
            f"unspill is eager, a value that fits is on the device when the get returns"
        )
        moved = {
            k: (before.tiers[k], t)
            for k, t in snap.tiers.items()
            if k != "k0" and t != before.tiers[k]
        }
        assert not moved, f"there was room for k0, yet other keys moved: {moved}"
        lower, now = before.host_bytes + before.disk_bytes, snap.host_bytes + snap.disk_bytes
        assert now < lower, (
            f"k0 came back from {before.tiers['k0']}, yet host + disk bytes went {lower:,} -> "
            f"{now:,}: its lower-tier copy was kept"
        )
        if before.tiers["k0"] == "disk":
            left = files_under(h.env.spill_dir)
            assert len(left) < len(files_before), (
                f"k0 came back from disk, yet its file is still there: {sorted(left)}"
            )
        assert value_digest(h.device, v) == seed_digest(0, LIMIT // 3)
        del v
        h.check(keys)


@conformance_id("STORE-UNSPILL-002", clause="6.2")
@requires("store", "store.unspill.on_access")
def test_unspill_makes_room_before_copying(harness):
    """Room is made before copying back: the device's peak during the get and a first use of
    the value stays at or below the limit (measured by the device)."""
    h = harness
    n = LIMIT // 3
    keys = _spill_first(h, n=n, count=6)
    expected_sum = int(host_bytes(0, n).sum(dtype=np.uint64))
    gc.collect()
    h.device.reset_peak()
    peak0 = h.device.peak_bytes()
    v = h.store["k0"]
    total = int(np.asarray(v).sum(dtype=np.uint64))  # a use; a reduction allocates nothing
    del v
    peak = h.device.peak_bytes() - h.baseline
    assert total == expected_sum, (
        f"k0 came back with the wrong content (sum {total} != {expected_sum})"
    )
    assert peak <= LIMIT, (
        f"unspilling {n:,} bytes peaked at {peak:,} device bytes > limit {LIMIT:,}: the store "
        f"copied the value back before making room (peak before: {peak0 - h.baseline:,})"
    )
    h.check(keys)


@conformance_id("STORE-UNSPILL-003", clause=("6.1", "4.1"))
@requires("store", "store.unspill.on_access")
def test_unspill_keeps_limit_and_ledger(harness):
    h = harness
    keys = _spill_first(h, count=8)
    for i in list(range(8)) * 2:
        assert value_digest(h.device, h.store[f"k{i}"]) == seed_digest(i, LIMIT // 3)
        snap = h.check(keys)
        assert snap.tiers[f"k{i}"] == "device"


@conformance_id("STORE-UNSPILL-004", clause="6.3")
@requires("store", "store.unspill.on_access")
def test_unspilled_value_is_a_device_array(harness):
    """A value comes back as a device array of the same device (not silently as host memory)."""
    h = harness
    original_type = type(h.value(8))
    keys = _spill_first(h)
    v = h.store["k0"]
    assert isinstance(v, original_type), f"got {type(v).__name__}, stored {original_type.__name__}"
    w = v + 1  # device in, device out
    assert h.device.is_device_array(w), f"v + 1 is {type(w).__name__}, not on the device"
    del v, w
    h.check(keys)


def _arrow_table(seed: int):
    import pyarrow as pa

    rows = 500
    return pa.table(
        {
            "k": pa.array([None if i % 5 == 0 else i + seed for i in range(rows)], pa.int64()),
            "s": pa.array([f"v{seed}-{i}" for i in range(rows)]),
        }
    )


@conformance_id("STORE-UNSPILL-005", clause=("6.4", "3.5", "3.3", "9.4"))
@requires("store", "store.table", "store.spill.disk", "store.limit.host", "store.evict.manual")
def test_a_kept_file_goes_with_its_key_after_any_number_of_spills(make_store):
    """Tables (values a store may keep the file of, as a clean copy, when it reads them back)
    go to disk, come back and go to disk again, three times. Then one key is deleted on disk,
    one back on the device, and one back on the device while the caller still holds its value.
    disk_bytes equals the files after every step, a deleted key's file goes with it, and no
    byte or file is left. (Mutants of the reference left one phantom byte of clean copy counted
    for a value that went back to disk on its kept file, kept the copy's bytes of a value that
    died on the device, and kept the file of a deleted key whose value the caller held.)"""
    from reference_impl import Table

    h = make_store(host_limit=0)
    s = h.store
    want = {f"t{i}": _arrow_table(i) for i in range(3)}
    for k, table in want.items():
        s[k] = Table.from_arrow(table, h.device)
    keys = set(want)
    for _round in range(3):
        evict(h.adapter, s, 4 * LIMIT)
        snap = h.check(keys)
        assert set(snap.tiers.values()) == {"disk"}, f"evict(all), host limit 0: {dict(snap.tiers)}"
        for k, table in want.items():
            assert s[k].to_arrow().equals(table), f"{k} came back different"
        h.check(keys)
    evict(h.adapter, s, 4 * LIMIT)
    h.check(keys)
    del s["t0"]  # on disk, on the file it was read back from
    h.check({"t1", "t2"})
    assert s["t1"].to_arrow().equals(want["t1"])
    del s["t1"]  # on the device, its file kept as a clean copy
    h.check({"t2"})
    held = s["t2"]
    del s["t2"]  # the same, while the caller still holds the value: its key's file goes
    left = files_under(h.env.spill_dir)
    h.check(set())
    assert not left, f"t2's key is deleted, yet its kept file remains: {sorted(left)}"
    assert held.to_arrow().equals(want["t2"])
    del held
    gc.collect()
    snap = h.check(set())
    left = files_under(h.env.spill_dir)
    assert (snap.device_bytes, snap.host_bytes, snap.disk_bytes) == (0, 0, 0) and not left, (
        f"every key deleted, yet {snap}, files {sorted(left)}"
    )


@conformance_id("STORE-UNSPILL-006", clause=("6.4", "13.1"))
@requires("store", "store.table", "store.spill.disk", "store.limit.host", "store.evict.manual")
def test_a_table_written_through_an_array_goes_back_to_disk_as_it_is(make_store):
    """A table goes to disk and comes back (a store may keep its file as a clean copy); then
    its column's buffer is stored as an array under another key, and a write through that
    array changes the table in memory. Evicted again and read back, the table must have the
    write: the kept file went stale when a mutable array came to share its memory. (Mutants
    of the reference kept the copy and read back the table as it was before the write.)"""
    import pyarrow as pa

    from reference_impl import Table

    h = make_store(host_limit=0)
    s = h.store
    rows = LIMIT // 32
    s["t"] = Table.from_arrow(pa.table({"x": pa.array(range(rows), pa.int64())}), h.device)
    evict(h.adapter, s, 4 * LIMIT)
    assert h.check({"t"}).tiers["t"] == "disk", "evict(all) with a host limit of 0"
    s["a"] = s["t"].column("x").data  # the table's own buffer: an array sharing its memory
    a = s["a"]
    a[: rows // 2] = -7  # a write through the array, while both are on the device
    del a
    evict(h.adapter, s, 4 * LIMIT)
    tiers = dict(h.check({"t", "a"}).tiers)
    want = [-7] * (rows // 2) + list(range(rows // 2, rows))
    got = s["t"].to_arrow().column("x").to_pylist()
    assert got == want, (
        f"the table read back (tiers after evict(all): {tiers}) lost the write made through "
        f"the array sharing its buffer: {got[:3]} ... where -7 was written"
    )
    h.check({"t", "a"})
