"""Spill on demand: the store's OOM handler frees device memory for others."""

from __future__ import annotations

import pytest

from conformance import conformance_id, requires
from conformance.harness import LIMIT, seed_digest, value_digest


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


def _recording_device(capacity):
    """A sim device that records every call of each OOM handler registered on it."""
    from reference_impl import SimDevice

    class RecordingDevice(SimDevice):
        def __init__(self, capacity):
            super().__init__(capacity)
            self.wrappers = {}  # id(handler) -> (handler, wrapper)
            self.calls = []  # (handler repr, shortfall, result or exception)

        def add_oom_handler(self, handler):
            def wrapper(shortfall, _h=handler):
                try:
                    result = _h(shortfall)
                except BaseException as exc:
                    self.calls.append((repr(_h), shortfall, f"{type(exc).__name__}: {exc}"))
                    raise
                self.calls.append((repr(_h), shortfall, result))
                return result

            self.wrappers[id(handler)] = (handler, wrapper)
            super().add_oom_handler(wrapper)

        def remove_oom_handler(self, handler):
            _h, wrapper = self.wrappers.pop(id(handler), (None, handler))
            super().remove_oom_handler(wrapper)

    return RecordingDevice(capacity)


@conformance_id("STORE-OOM-004", clause="11.4")
@requires("store", "store.oom.on_demand")
def test_closed_store_leaves_no_oom_handler(make_store, device_kind):
    """After close_store the store's OOM handler is gone from the device: an allocation that
    does not fit raises the device's out-of-memory error without calling into the closed
    store, and the ledger is unchanged by the failed attempt."""
    if device_kind != "sim":
        pytest.skip("needs a recording simulated device")
    from reference_impl import DeviceOutOfMemoryError

    capacity = 4 * LIMIT
    dev = _recording_device(capacity)
    h = make_store(device=dev)
    for i in range(3):
        h.store[f"k{i}"] = h.value(LIMIT // 3, seed=i)
    outside = dev.empty(capacity - LIMIT + 1, "uint8")  # the store must spill for this to fit
    del outside
    h.check({f"k{i}" for i in range(3)})
    h.close()
    registered = [repr(hd) for hd, _w in dev.wrappers.values()]
    dev.calls.clear()
    held = dev.empty(capacity, "uint8")  # the whole device: fits, nothing is left in use
    before = dev.bytes_in_use()
    with pytest.raises(MemoryError) as info:
        dev.empty(1, "uint8")
    assert isinstance(info.value, DeviceOutOfMemoryError), (
        f"expected the device's DeviceOutOfMemoryError, got {type(info.value).__name__}: "
        f"{info.value}"
    )
    assert not dev.calls, f"the closed store's OOM handler was still called: {dev.calls}"
    assert not registered, f"OOM handlers still registered after close_store: {registered}"
    assert dev.bytes_in_use() == before, (
        f"the failed allocation changed the ledger: {before:,} -> {dev.bytes_in_use():,}"
    )
    del held
