"""Spill on demand: the store's OOM handler frees device memory for others."""

from __future__ import annotations

import pytest

from conformance import conformance_id, not_exercised, requires
from conformance.store.harness import LIMIT, seed_digest, value_digest
from conformance.store.probes import recording_device
from conformance.store.tiers import N, expect_cascade, four_on_device, host_limit_for


@conformance_id("STORE-OOM-001", clause="8.1")
@requires("store", "store.oom.on_demand")
def test_outside_allocation_makes_store_spill(make_store):
    h = make_store(capacity=LIMIT + LIMIT // 2)
    keys = {f"k{i}" for i in range(3)}
    for i in range(3):
        h.store[f"k{i}"] = h.value(LIMIT // 3, seed=i)
    h.store["k0"]
    h.check(keys)
    n = LIMIT  # does not fit next to ~LIMIT of store data in a 1.5*LIMIT device
    outside = h.device.empty(n, "uint8")
    snap = h.check(keys, held=n)
    assert snap.tiers["k1"] != "device", f"LRU k1 should have spilled first: {dict(snap.tiers)}"
    del outside
    for i in range(3):
        assert value_digest(h.device, h.store[f"k{i}"]) == seed_digest(i, LIMIT // 3)
    h.check(keys)


@conformance_id("STORE-OOM-002", clause="8.3")
@requires("store", "store.oom.on_demand")
def test_oom_when_spilling_cannot_help(make_store):
    """The handlers spill everything, the allocation still fails: a clear MemoryError, nothing lost."""
    h = make_store(capacity=2 * LIMIT)
    keys = {f"k{i}" for i in range(3)}
    for i in range(3):
        h.store[f"k{i}"] = h.value(LIMIT // 3, seed=i)
    hog = h.device.empty(LIMIT, "uint8")
    with pytest.raises(MemoryError):
        h.device.empty(LIMIT + 8, "uint8")
    h.check(keys, held=LIMIT)
    del hog
    for i in range(3):
        assert value_digest(h.device, h.store[f"k{i}"]) == seed_digest(i, LIMIT // 3)
    h.check(keys)


@conformance_id("STORE-OOM-003", clause="8.4")
@requires("store", "store.oom.on_demand", "store.limit.host", "store.spill.disk")
def test_spill_on_demand_keeps_host_limit(make_store):
    """The OOM path cascades like every other spill: right after an outside allocation made
    the store spill, host bytes <= the host limit (before any further store call)."""
    host_limit = LIMIT // 3
    h = make_store(capacity=LIMIT + LIMIT // 2, host_limit=host_limit)
    keys = {f"k{i}" for i in range(3)}
    for i in range(3):
        h.store[f"k{i}"] = h.value(LIMIT // 3, seed=i)
    h.check(keys)
    n = LIMIT  # does not fit next to ~LIMIT of store data: the OOM handler must spill
    outside = h.device.empty(n, "uint8")
    snap = h.snapshot()
    assert snap.host_bytes <= host_limit, (
        f"after spill on demand host_bytes={snap.host_bytes:,} > host limit {host_limit:,} "
        f"(tiers {dict(snap.tiers)}, disk_bytes={snap.disk_bytes:,}): the OOM path must "
        f"cascade host -> disk"
    )
    h.check(keys, held=n)
    del outside
    for i in range(3):
        assert value_digest(h.device, h.store[f"k{i}"]) == seed_digest(i, LIMIT // 3)
    h.check(keys)


MAX_HANDLER_CALLS = 64  # per failing allocation: a handler that never says "no" is called far more
OOM_DEADLINE_S = 10.0


def _allocate_in_thread(dev, nbytes):
    """``dev.empty(nbytes)`` on a worker thread: (array or None, exception or None, finished)."""
    import threading

    out = {}

    def run():
        try:
            out["array"] = dev.empty(nbytes, "uint8")
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True, name="oom-allocation")
    t.start()
    t.join(OOM_DEADLINE_S)
    return out.pop("array", None), out.pop("error", None), not t.is_alive()


@conformance_id("STORE-OOM-005", clause="8.2")
@requires("store", "store.oom.on_demand")
def test_oom_handler_reports_progress_only_when_bytes_were_freed(make_store, device_kind):
    """Every call of the store's OOM handler that reports progress (a true result) must have
    freed device bytes by the ledger: for an allocation spilling makes fit, and for one it
    cannot (the handler spills what it has, then must say it freed nothing)."""
    if device_kind != "sim":
        pytest.skip("needs a recording simulated device")
    capacity = 2 * LIMIT
    dev = recording_device(capacity)
    h = make_store(device=dev)
    n = LIMIT // 4
    keys = {f"k{i}" for i in range(4)}
    for i in range(4):
        h.store[f"k{i}"] = h.value(n, seed=i)
    hog = dev.empty(LIMIT, "uint8")  # the device is full: store LIMIT + hog LIMIT
    fits, error, finished = _allocate_in_thread(dev, 2 * n)  # spilling two values makes room
    assert finished, f"an allocation spilling can satisfy did not return in {OOM_DEADLINE_S}s"
    assert error is None, f"spilling could make room, yet the allocation raised {error!r}"
    h.check(keys, held=LIMIT + 2 * n)
    _, error, finished = _allocate_in_thread(dev, LIMIT)  # cannot fit: 2n spillable, LIMIT short
    assert finished, f"an allocation that cannot fit did not return in {OOM_DEADLINE_S}s"
    assert isinstance(error, MemoryError), f"expected an out-of-memory error, got {error!r}"
    del error
    calls = list(dev.calls)
    if not calls:
        not_exercised("no allocation called an OOM handler")
    liars = [c for c in calls if c.result and not c.after < c.before]
    assert not liars, (
        f"{len(liars)} of {len(calls)} OOM handler calls reported progress while the ledger "
        f"freed nothing, e.g. {liars[:3]}"
    )
    assert any(c.result for c in calls), f"no handler call ever reported progress: {calls[:5]}"
    h.check(keys, held=LIMIT + 2 * n)
    del hog, fits
    for i in range(4):
        assert value_digest(h.device, h.store[f"k{i}"]) == seed_digest(i, n)
    h.check(keys)


@conformance_id("STORE-OOM-006", clause="8.3")
@requires("store", "store.oom.on_demand")
def test_oom_with_nothing_left_to_spill_fails_fast(make_store, device_kind):
    """An allocation spilling cannot satisfy fails with the device's DeviceOutOfMemoryError
    after at most MAX_HANDLER_CALLS handler calls and within a deadline (no livelock), whether
    the store first spills what it has or has nothing on the device to begin with; no value
    is lost."""
    if device_kind != "sim":
        pytest.skip("needs a recording simulated device")
    from reference_impl import DeviceOutOfMemoryError

    capacity = 2 * LIMIT
    dev = recording_device(capacity)
    h = make_store(device=dev)
    n = LIMIT // 4
    keys = {f"k{i}" for i in range(3)}
    for i in range(3):
        h.store[f"k{i}"] = h.value(n, seed=i)
    hog = dev.empty(LIMIT, "uint8")
    for what in ("spills its values, then has nothing left", "has nothing on the device"):
        dev.calls.clear()
        got, error, finished = _allocate_in_thread(dev, LIMIT + 1)
        assert finished, (
            f"the store {what}: an allocation that cannot fit was still retrying after "
            f"{OOM_DEADLINE_S}s ({len(dev.calls)} handler calls so far): livelock"
        )
        assert got is None and isinstance(error, DeviceOutOfMemoryError), (
            f"the store {what}: expected DeviceOutOfMemoryError, got {error!r}"
        )
        del error
        assert dev.calls, f"the store {what}: the device never called the OOM handler"
        assert len(dev.calls) <= MAX_HANDLER_CALLS, (
            f"the store {what}: one failing allocation called the OOM handler "
            f"{len(dev.calls):,} times (bound {MAX_HANDLER_CALLS}): a handler that keeps "
            f"reporting progress it did not make, e.g. {dev.calls[-3:]}"
        )
        snap = h.check(keys, held=LIMIT)
        assert snap.device_bytes == 0, f"nothing should be left on the device: {snap}"
    del hog
    for i in range(3):
        assert value_digest(h.device, h.store[f"k{i}"]) == seed_digest(i, n)
    h.check(keys)


@conformance_id("STORE-CASCADE-003", clause=("8.1", "8.4", "5.4"))
@requires(
    "store", "store.spill.disk", "store.limit.host", "store.oom.on_demand", "store.lru.strict"
)
def test_spill_on_demand_cascades_like_any_spill(make_store, device_kind):
    """An outside allocation that needs three values' room makes the store spill the three
    least recently used; right after it the host limit (two values, then 0) holds, the oldest
    going on to disk."""
    capacity = 2 * LIMIT
    for host_cap in (2, 0):
        dev = recording_device(capacity) if device_kind == "sim" else None
        h = make_store(host_limit=host_limit_for(host_cap), capacity=capacity, device=dev)
        four_on_device(h)
        outside = h.device.empty(capacity - N, "uint8")  # room for one value of the store's four
        if dev is not None and not dev.calls:
            not_exercised("the outside allocation never called an OOM handler")
        snap = h.snapshot()
        assert snap.host_bytes <= h.env.host_limit, (
            f"right after the spill on demand host_bytes {snap.host_bytes:,} > host limit "
            f"{h.env.host_limit:,}: {dict(snap.tiers)}"
        )
        h.check("abcd", held=capacity - N)
        del outside
        expect_cascade(h, "a spill on demand of three values", host_cap, ["b", "d", "c"])
        h.close()
