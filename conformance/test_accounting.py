"""Device/host/disk accounting against the device's own ledger."""

from __future__ import annotations

from conformance import conformance_id, requires
from conformance.harness import LIMIT, digest, host_bytes, seed_digest, value_digest


@conformance_id("STORE-ACCT-001", clause=("3.1", "3.6"))
@requires("store")
def test_device_bytes_match_ledger(harness):
    h, s = harness, harness.store
    keys = []
    for i, n in enumerate([10, 1000, 5000, LIMIT // 4, 3, LIMIT // 3]):
        s[f"k{i}"] = h.value(n, seed=i)
        keys.append(f"k{i}")
        h.check(keys)


@conformance_id("STORE-ACCT-002", clause="3.3")
@requires("store")
def test_delete_returns_every_byte(harness):
    h, s = harness, harness.store
    for i in range(8):
        s[f"k{i}"] = h.value(LIMIT // 3, seed=i)  # spills some
    h.check({f"k{i}" for i in range(8)})
    for i in range(8):
        del s[f"k{i}"]
    snap = h.check(set())
    assert (snap.device_bytes, snap.host_bytes, snap.disk_bytes) == (0, 0, 0), snap
    assert h.ledger() == 0


@conformance_id("STORE-ACCT-003", clause="3.4")
@requires("store", "store.spill.host")
def test_host_bytes_reported(harness):
    """Host-tier keys are counted in host_bytes: at least their payload, at most modest overhead."""
    h, s = harness, harness.store
    n = LIMIT // 3
    for i in range(7):
        s[f"k{i}"] = h.value(n, seed=i)
    snap = h.check({f"k{i}" for i in range(7)})
    on_host = [k for k, t in snap.tiers.items() if t == "host"]
    assert on_host, f"7 values of limit/3 must spill some to host: {snap.tiers}"
    low, high = n * len(on_host), (n + 4096) * len(on_host)
    assert low <= snap.host_bytes <= high, (
        f"host_bytes={snap.host_bytes:,} for {len(on_host)} host-tier values of {n:,} bytes "
        f"(expected {low:,}..{high:,})"
    )


@conformance_id("STORE-ALIAS-001", clause="3.2")
@requires("store", "store.alias.dedup")
def test_aliases_counted_once(harness):
    h, s = harness, harness.store
    base = h.value(LIMIT // 2, seed=1)
    s["base"] = base
    s["view"] = base[: LIMIT // 4]
    s["again"] = base
    del base
    snap = h.check({"base", "view", "again"})
    assert snap.device_bytes == LIMIT // 2, f"one allocation, counted {snap.device_bytes:,} bytes"
    assert value_digest(h.device, s["view"]) == digest(host_bytes(1, LIMIT // 2)[: LIMIT // 4])
    h.check({"base", "view", "again"})


@conformance_id("STORE-ALIAS-002", clause=("2.6", "3.2"))
@requires("store", "store.alias.dedup")
def test_aliases_spill_and_come_back_consistently(harness):
    h, s = harness, harness.store
    base = h.value(LIMIT // 2, seed=1)
    s["base"], s["view"] = base, base[: LIMIT // 4]
    del base
    for i in range(4):  # push the pair out
        s[f"f{i}"] = h.value(LIMIT // 3, seed=10 + i)
        h.check({"base", "view"} | {f"f{j}" for j in range(i + 1)})
    keys = {"base", "view"} | {f"f{j}" for j in range(4)}
    got = s["view"]
    assert value_digest(h.device, got) == digest(host_bytes(1, LIMIT // 2)[: LIMIT // 4])
    del got
    h.check(keys)
    got = s["base"]
    assert value_digest(h.device, got) == seed_digest(1, LIMIT // 2)
    del got
    h.check(keys)
