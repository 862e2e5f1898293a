"""Recency: every use of a value refreshes it; looking at the store does not."""

from __future__ import annotations

import gc
import pickle
from functools import partial

import numpy as np

from conformance import conformance_id, requires
from conformance.api import evict
from conformance.store.harness import LIMIT, seed_digest, value_digest
from conformance.store.probes import state_of

Q = LIMIT // 4

# Every way to use a value the store handed out: each must make its key the most recent.
USES = {
    "store[k]": lambda s, k, v: s[k],
    "store.get(k)": lambda s, k, v: s.get(k),
    "v.shape": lambda s, k, v: v.shape,
    "v.dtype": lambda s, k, v: v.dtype,
    "v + 1": lambda s, k, v: v + 1,
    "v[3]": lambda s, k, v: v[3],
    "np.asarray(v)": lambda s, k, v: np.asarray(v),
    "np.sum(v)": lambda s, k, v: np.sum(v),  # __array_function__
    "np.add(v, 1)": lambda s, k, v: np.add(v, 1),  # __array_ufunc__
}


@conformance_id("STORE-RECENCY-001", clause=("5.1", "5.2", "5.4"))
@requires("store", "store.lru.strict")
def test_every_use_of_a_value_refreshes_recency(impl, harness, device_kind):
    """a, b, c on the device, a least recently used, the test holding a's value v. One use of v
    (attribute, arithmetic, indexing, np.asarray, a NumPy function or ufunc) must make a the most
    recently used: inspect's lru reads b, c, a, and a value that needs room evicts b, not a."""
    h, s = harness, harness.store
    stale = []
    uses = dict(USES)
    if device_kind != "sim":
        del uses["np.asarray(v)"]  # CuPy refuses an implicit copy to the host
    if "store.proxy" not in impl.capabilities:  # plain values: only the store's own reads count
        uses = {w: u for w, u in uses.items() if w.startswith("store")}
    for what, use in uses.items():
        for k in "abc":
            s[k] = h.value(Q, seed=ord(k))
        v = s["a"]
        s["b"]
        s["c"]
        lru = h.snapshot().lru
        if lru is not None:
            assert list(lru) == ["a", "b", "c"], f"after get a, get b, get c: lru {list(lru)}"
        result = use(s, "a", v)
        del result
        gc.collect()
        snap = h.snapshot()  # the test holds v: the ledger is checked once it is dropped
        if snap.lru is not None and list(snap.lru) != ["b", "c", "a"]:
            stale.append(f"{what}: lru {list(snap.lru)}")
        s["d"] = h.value(2 * Q, seed=ord("d"))  # needs exactly one Q of room
        snap = h.snapshot()
        if snap.tiers["a"] != "device" or snap.tiers["b"] == "device":
            stale.append(f"{what}: a new value needing room left tiers {dict(snap.tiers)}")
        assert value_digest(h.device, v) == seed_digest(ord("a"), Q)
        del v
        h.check("abcd")
        s.clear()
        h.check(set())
    assert not stale, (
        "a use of a value handed out by the store did not make its key the most recently "
        "used: " + "; ".join(stale)
    )


@conformance_id("STORE-RECENCY-002", clause="5.3")
@requires("store", "store.lru.strict")
def test_looking_is_not_using(impl, make_store):
    """`in`, len, iteration, keys(), inspect, pickling a value (device-resident or spilled) and
    registering an external again change no tier, no recency, no byte count, no file and not
    the ledger; a later eviction still takes the least recently used."""
    caps = impl.capabilities
    disk = {"store.limit.host", "store.spill.disk"} <= caps
    h = make_store(host_limit=LIMIT // 2) if disk else make_store()
    s = h.store
    third = LIMIT // 3
    for i in range(8):
        s[f"k{i}"] = h.value(third, seed=i)
    spilled = s["k0"]  # back on the device ...
    for i in range(1, 5):
        s[f"k{i}"]  # ... and out again: the test holds a spilled value
    on_device = s["k4"]
    s["k5"]  # k4 is no longer the most recent
    ext = None
    if "store.external" in caps:
        ext = h.adapter.register_external(s, h.value(LIMIT // 8, seed=99))
    keys = {f"k{i}" for i in range(8)}
    snap = h.snapshot()  # the test holds values: the ledger is checked once they are dropped
    assert set(snap.tiers) == keys, f"inspect lists {sorted(snap.tiers)}"
    assert snap.tiers["k0"] != "device", f"k0 should be spilled: {dict(snap.tiers)}"
    looks = {
        "'k1' in store": lambda: "k1" in s,
        "'k4' in store": lambda: "k4" in s,
        "'missing' in store": lambda: "missing" in s,
        "len(store)": lambda: len(s),
        "list(store)": lambda: list(s),
        "list(store.keys())": lambda: list(s.keys()),
        "inspect": h.snapshot,
    }
    if "store.pickle" in caps:
        looks["pickle.dumps(device-resident value)"] = partial(pickle.dumps, on_device)
        looks["pickle.dumps(spilled value)"] = partial(pickle.dumps, spilled)
    if ext is not None:
        looks["register_external(the same external again)"] = partial(
            h.adapter.register_external, s, ext
        )
    changed = []
    for what, look in looks.items():
        before = state_of(h)
        result = look()
        del result
        after = state_of(h)
        if after != before:
            changed.append(f"{what}: " + ", ".join(before.diff(after)))
    looks.clear()
    del look  # the last one may hold a value
    assert not changed, "looking at the store changed it: " + "; ".join(changed)
    assert value_digest(h.device, spilled) == seed_digest(0, third)
    assert value_digest(h.device, on_device) == seed_digest(4, third)
    del spilled, on_device, ext
    h.check(keys)


@conformance_id("STORE-RECENCY-003", clause="5.3")
@requires("store", "store.external", "store.evict.manual")
def test_registering_again_does_not_refresh_an_external(harness):
    """Externals are not in lru, so their recency shows in what an eviction takes: e1 (the
    least recently used, registered first) is registered again; evicting one byte must still
    spill e1, not e2."""
    h, s = harness, harness.store
    e1 = h.adapter.register_external(s, h.value(Q, seed=1))
    e2 = h.adapter.register_external(s, h.value(Q // 2, seed=2))
    s["a"] = h.value(Q, seed=3)
    h.check({"a"})
    again = h.adapter.register_external(s, e1)
    del again
    before = h.ledger()
    freed = evict(h.adapter, s, 1)
    gc.collect()
    dropped = before - h.ledger()
    snap = h.check({"a"})
    assert dropped == Q, (
        f"evict(1) freed {dropped:,} device bytes (store says {freed:,}); the least recently "
        f"used unit is e1 ({Q:,} bytes), then e2 ({Q // 2:,}), then a: registering e1 again "
        f"must not refresh it (tiers {dict(snap.tiers)})"
    )
    assert value_digest(h.device, e1) == seed_digest(1, Q)
    assert value_digest(h.device, e2) == seed_digest(2, Q // 2)
    del e1, e2
    gc.collect()
    h.check({"a"})
