"""register_external: counted, spillable, weakly held, never double counted."""

from __future__ import annotations

import gc

from conformance import conformance_id, requires
from conformance.store.harness import LIMIT, files_under, seed_digest, value_digest


@conformance_id("STORE-EXT-001", clause="7.1")
@requires("store", "store.external")
def test_external_counts_toward_device_bytes(harness):
    h = harness
    h.store["k"] = h.value(1000, seed=1)
    p = h.adapter.register_external(h.store, h.value(5000, seed=2))
    snap = h.check({"k"})
    assert snap.device_bytes == 6000, f"device_bytes={snap.device_bytes:,}, expected 6,000"
    assert value_digest(h.device, p) == seed_digest(2, 5000)
    del p


@conformance_id("STORE-EXT-002", clause="7.3")
@requires("store", "store.external")
def test_external_forgotten_when_dropped(harness):
    h = harness
    h.store["k"] = h.value(1000, seed=1)
    p = h.adapter.register_external(h.store, h.value(5000, seed=2))
    q = h.adapter.register_external(h.store, h.value(LIMIT // 3, seed=3))
    h.check({"k"})
    del p, q
    gc.collect()
    snap = h.check({"k"})
    assert snap.device_bytes == 1000, f"dropped externals still counted: {snap.device_bytes:,}"
    assert snap.host_bytes == 0 and snap.disk_bytes == 0, snap


@conformance_id("STORE-EXT-003", clause="7.2")
@requires("store", "store.external", "store.spill.host")
def test_externals_spill_and_stay_correct(harness):
    h = harness
    exts = [h.adapter.register_external(h.store, h.value(LIMIT // 3, seed=i)) for i in range(3)]
    keys = set()
    for i in range(4):
        h.store[f"k{i}"] = h.value(LIMIT // 3, seed=10 + i)
        keys.add(f"k{i}")
        snap = h.check(keys)
    assert snap.host_bytes + snap.disk_bytes >= 3 * (LIMIT // 3), "externals and keys must spill"
    for i, p in enumerate(exts):
        assert value_digest(h.device, p) == seed_digest(i, LIMIT // 3)
        h.check(keys)
    del exts, p
    gc.collect()
    h.check(keys)


@conformance_id("STORE-EXT-004", clause="7.4")
@requires("store", "store.external")
def test_stored_and_external_counted_once(harness):
    h = harness
    v = h.value(4000, seed=1)
    h.store["k"] = v
    p = h.adapter.register_external(h.store, v)
    del v
    snap = h.check({"k"})
    assert snap.device_bytes == 4000, (
        f"an object both stored and external counted {snap.device_bytes:,}"
    )
    del p
    gc.collect()
    h.check({"k"})


@conformance_id("STORE-EXT-005", clause=("7.3", "3.5"))
@requires("store", "store.external", "store.spill.host")
def test_externals_dying_while_spilled_give_every_byte_back(impl, make_store):
    """Externals pushed out to host (and, with a host limit of one value, on to disk) die
    there: host_bytes and disk_bytes drop back to what the keys hold, their files are gone,
    and the ledger holds only the keys."""
    n = LIMIT // 4
    disk = {"store.limit.host", "store.spill.disk"} <= impl.capabilities
    h = make_store(host_limit=n + 4096) if disk else make_store()
    exts = [h.adapter.register_external(h.store, h.value(n, seed=i)) for i in range(3)]
    for i in range(4):  # the keys fill the device: the externals (least recent) leave it
        h.store[f"k{i}"] = h.value(n, seed=10 + i)
    keys = {f"k{i}" for i in range(4)}
    snap = h.check(keys)
    assert snap.host_bytes > 0, f"the externals should be on host: {snap}"
    if disk:
        assert snap.disk_bytes > 0 and files_under(h.env.spill_dir), (
            f"with a host limit of one value two externals should be on disk: {snap}"
        )
    del exts
    gc.collect()
    snap = h.check(keys)
    assert (snap.host_bytes, snap.disk_bytes) == (0, 0), (
        f"the externals died while spilled, yet host_bytes={snap.host_bytes:,}, "
        f"disk_bytes={snap.disk_bytes:,} (every key is on the device: {dict(snap.tiers)})"
    )
    left = files_under(h.env.spill_dir)
    assert not left, f"the externals died on disk, yet their files remain: {sorted(left)}"
    assert snap.device_bytes == 4 * n and h.ledger() == 4 * n, (snap, h.ledger())
