"""Unspilling on access: content, type, room made first, limits kept."""

from __future__ import annotations

import numpy as np

from conformance import conformance_id, requires
from conformance.harness import LIMIT, host_bytes, seed_digest, value_digest


def _spill_first(h, n=LIMIT // 3, count=5):
    for i in range(count):
        h.store[f"k{i}"] = h.value(n, seed=i)
    snap = h.check({f"k{i}" for i in range(count)})
    assert snap.tiers["k0"] != "device", f"k0 should have been spilled: {dict(snap.tiers)}"
    return {f"k{i}" for i in range(count)}


@conformance_id("STORE-UNSPILL-001", clause="6.1")
@requires("store", "store.unspill.on_access")
def test_access_brings_value_back(harness):
    h = harness
    keys = _spill_first(h)
    v = h.store["k0"]
    assert value_digest(h.device, v) == seed_digest(0, LIMIT // 3)
    snap = h.check(keys, held=0)
    assert snap.tiers["k0"] == "device", f"k0 was accessed, tiers: {dict(snap.tiers)}"


@conformance_id("STORE-UNSPILL-002", clause="6.2")
@requires("store", "store.unspill.on_access")
def test_unspill_makes_room_before_copying(harness):
    """Peak device bytes <= limit + the object brought back (measured by the device)."""
    h = harness
    n = LIMIT // 3
    keys = _spill_first(h, n=n, count=6)
    expected_sum = int(host_bytes(0, n).sum(dtype=np.uint64))
    h.device.reset_peak()
    peak0 = h.device.peak_bytes()
    v = h.store["k0"]
    # Use the value inside the window: a lazy store (a proxy that unspills on first use)
    # brings it back here, not after the peak was read.  A reduction allocates nothing
    # of the value's size, so the bound below stays exact.
    total = int(np.asarray(v).sum(dtype=np.uint64))
    del v
    peak = h.device.peak_bytes() - h.baseline
    assert total == expected_sum, (
        f"k0 came back with the wrong content (sum {total} != {expected_sum})"
    )
    assert peak <= LIMIT + n, (
        f"unspilling {n:,} bytes peaked at {peak:,} device bytes; limit {LIMIT:,} + object "
        f"{n:,} = {LIMIT + n:,} (peak before: {peak0 - h.baseline:,})"
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
