"""The device limit, the single-object rule, LRU eviction, the host limit, bad limits, evict()."""

from __future__ import annotations

import pytest

from conformance import conformance_id, requires
from conformance.api import evict
from conformance.store.harness import LIMIT, seed_digest, value_digest


@conformance_id("STORE-LIMIT-001", clause=("4.1", "2.1"))
@requires("store")
def test_device_bytes_never_exceed_limit(harness):
    h, s = harness, harness.store
    keys = set()
    for i in range(12):
        s[f"k{i}"] = h.value(LIMIT // 3 + i, seed=i)
        keys.add(f"k{i}")
        snap = h.check(keys)
        assert snap.device_bytes <= LIMIT
    for i in range(12):
        assert value_digest(h.device, s[f"k{i}"]) == seed_digest(i, LIMIT // 3 + i)
        h.check(keys)


@conformance_id("STORE-LIMIT-002", clause="4.3")
@requires("store")
def test_object_larger_than_limit_skips_device(harness):
    h, s = harness, harness.store
    s["small"] = h.value(100, seed=1)
    s["big"] = h.value(LIMIT + 1, seed=2)
    snap = h.check({"small", "big"})
    assert snap.tiers["big"] != "device", (
        "a value larger than the limit must go straight to a lower tier"
    )
    assert snap.tiers["small"] == "device", "storing an over-limit value must not evict others"
    assert value_digest(h.device, s["big"]) == seed_digest(2, LIMIT + 1)


@conformance_id("STORE-LIMIT-003", clause=("5.1", "5.4"))
@requires("store", "store.lru.strict")
def test_least_recently_used_is_evicted_first(harness):
    h, s = harness, harness.store
    third = LIMIT // 3
    for k in "abc":
        s[k] = h.value(third, seed=ord(k))
    s["a"]  # any access is use: now b is the least recently used
    s["d"] = h.value(third, seed=ord("d"))
    snap = h.check("abcd")
    assert snap.tiers["b"] != "device", (
        f"b was least recently used, yet tiers are {dict(snap.tiers)}"
    )
    assert snap.tiers["a"] == "device", f"a was just used, yet tiers are {dict(snap.tiers)}"
    assert snap.tiers["d"] == "device"


@conformance_id("STORE-LIMIT-004", clause=("5.3", "5.5"))
@requires("store", "store.lru.strict")
def test_inspect_reports_recency_without_touching_it(harness):
    h, s = harness, harness.store
    for k in "abcd":
        s[k] = h.value(1000, seed=ord(k))
    s["b"]
    s["a"]
    assert list(h.snapshot().lru) == ["c", "d", "b", "a"]
    h.snapshot()
    s["c"]
    assert list(h.snapshot().lru) == ["d", "b", "a", "c"], "inspect() must not change recency"


@conformance_id("STORE-LIMIT-005", clause="4.4")
@requires("store", "store.limit.host", "store.spill.disk")
def test_host_limit_cascades_to_disk(make_store):
    h = make_store(host_limit=LIMIT)
    s = h.store
    keys = set()
    for i in range(12):
        s[f"k{i}"] = h.value(LIMIT // 3, seed=i)
        keys.add(f"k{i}")
        snap = h.check(keys)
        assert snap.host_bytes <= LIMIT
    assert "disk" in snap.tiers.values(), (
        f"12 x limit/3 with host limit = limit: {dict(snap.tiers)}"
    )
    for i in range(12):
        assert value_digest(h.device, s[f"k{i}"]) == seed_digest(i, LIMIT // 3)
        h.check(keys)


@conformance_id("STORE-LIMIT-006", clause="4.6")
@requires("store")
def test_bad_limits_rejected(impl, make_store):
    from dataclasses import replace

    good = make_store()
    for bad in (-1, "twelve parsecs"):
        env = replace(good.env, device_limit=bad)
        with pytest.raises((ValueError, TypeError)):
            impl.adapter.create_store(env)


@conformance_id("STORE-LIMIT-008", clause=("4.9", "4.7"))
@requires("store", "store.lru.strict")
def test_eviction_moves_only_what_it_needs(harness):
    """Room for a new value, for a view brought back and for evict(n) comes from the least
    recently used values it needs, and no more."""
    h, s = harness, harness.store
    tenth = LIMIT // 10
    for k in "abcd":
        s[k] = h.value(2 * tenth, seed=ord(k))
    s["e"] = h.value(3 * tenth, seed=ord("e"))  # 0.8 + 0.3 of the limit: only a must go
    snap = h.check("abcde")
    moved = [k for k in "abcde" if snap.tiers[k] != "device"]
    assert moved == ["a"], f"storing e needed room for 0.1 of the limit; moved {moved}"
    for k in "abcde":
        del s[k]
    # A view of a larger base holds the base while on the device, and only itself once
    # spilled: bringing it back needs room for the view.
    base = h.value(6 * tenth, seed=1)
    s["v"] = base[::2]
    del base
    s["big"] = h.value(9 * tenth, seed=2)  # v (its base) must make room
    del s["big"]
    s["x"] = h.value(3 * tenth, seed=3)
    s["y"] = h.value(3 * tenth, seed=4)
    s["v"]  # 0.6 on device + the view's 0.3: fits, nothing needs to move
    snap = h.check({"v", "x", "y"})
    assert snap.tiers["x"] == snap.tiers["y"] == "device", (
        f"bringing back a view of 0.3 of the limit beside 0.6 moved others: {dict(snap.tiers)}"
    )
    if "store.evict.manual" not in h.caps:
        return
    for k in ("v", "x", "y"):
        del s[k]
    for k in "pqr":
        s[k] = h.value(3 * tenth, seed=ord(k))
    freed = evict(h.adapter, s, 1)
    snap = h.check("pqr")
    moved = [k for k in "pqr" if snap.tiers[k] != "device"]
    assert moved == ["p"], f"evict(1) moved {moved} ({freed:,} bytes freed)"


@conformance_id("STORE-EVICT-001", clause="4.7")
@requires("store", "store.evict.manual")
def test_manual_evict_frees_lru_first(harness):
    h, s = harness, harness.store
    third = LIMIT // 3
    for k in "abc":
        s[k] = h.value(third, seed=ord(k))
    s["a"]
    before = h.snapshot().device_bytes
    freed = evict(h.adapter, s, 1)
    snap = h.check("abc")
    assert freed >= 1 and before - snap.device_bytes == freed, (before, freed, snap.device_bytes)
    assert snap.tiers["b"] != "device" and snap.tiers["a"] == "device", dict(snap.tiers)
    freed = evict(h.adapter, s, 10 * LIMIT)
    snap = h.check("abc")
    assert snap.device_bytes == 0 and freed == before - third, (freed, dict(snap.tiers))
    assert value_digest(h.device, s["b"]) == seed_digest(ord("b"), third)


@conformance_id("STORE-EVICT-002", clause="4.8")
@requires("store", without="store.evict.manual")
def test_no_manual_evict_means_not_implemented(harness):
    h = harness
    h.store["a"] = h.value(100, seed=1)
    with pytest.raises((NotImplementedError, AttributeError)):
        evict(h.adapter, h.store, 10)
    h.check({"a"})
