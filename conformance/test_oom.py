"""Spill on demand: the store's OOM handler frees device memory for others."""

from __future__ import annotations

import pytest

from conformance import conformance_id, requires
from conformance.harness import LIMIT, seed_digest, value_digest


@conformance_id("STORE-OOM-001")
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


@conformance_id("STORE-OOM-002")
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
