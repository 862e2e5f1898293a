"""Recency: every use of a value refreshes it; looking at the store does not."""

from __future__ import annotations

import gc
import pickle
import random
from functools import partial

import numpy as np

from conformance import conformance_id, not_exercised, requires
from conformance.api import evict
from conformance.store.harness import LIMIT, host_bytes, seed_digest, value_digest
from conformance.store.probes import state_of
from conformance.store.tiers import HOST_SLACK, N, host_limit_for, host_value, spilled_value

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


def _shares(h, what: str) -> None:
    """Two keys, one allocation (2 Q): an array and a view of it, or one array twice."""
    x = h.value(2 * Q, seed=1)
    h.store["a"] = x
    h.store["b"] = x[:Q] if what == "an array and a view of it" else x


@conformance_id("STORE-RECENCY-004", clause=("5.2", "3.9", "5.4"))
@requires("store", "store.alias.dedup", "store.evict.manual", "store.lru.strict", "store.proxy")
def test_using_a_value_whose_memory_another_key_shares_refreshes_both(device_kind, harness):
    """Keys a and b share one allocation (an array and a view of it, or one array under two
    keys); c, stored after them, shares nothing. A use of b's value handed out before c was
    stored (attribute, arithmetic, indexing, np.asarray, a NumPy function or ufunc) makes the
    pair the most recently used, a included: evict(1) then takes c, not the pair. (A mutant of
    the reference refreshed only b's own key once anything in the store shared memory: a, left
    the least recently used, took b with it at the next eviction.)"""
    h, s = harness, harness.store
    uses = {w: u for w, u in USES.items() if not w.startswith("store")}
    if device_kind != "sim":
        del uses["np.asarray(v)"]  # CuPy refuses an implicit copy to the host
    stale = []
    for shape in ("an array and a view of it", "one array under two keys"):
        for what, use in uses.items():
            _shares(h, shape)
            v = s["b"]
            s["c"] = h.value(Q, seed=3)  # now the most recent
            result = use(s, "b", v)
            del result, v
            evict(h.adapter, s, 1)
            tiers = h.check("abc").tiers
            if tiers["c"] == "device" or {tiers["a"], tiers["b"]} != {"device"}:
                stale.append(f"{shape}, {what}: evict(1) left {dict(tiers)}")
            s.clear()
    assert not stale, (
        "a use of a value whose memory another key shares did not make the pair the most "
        "recently used (c, stored after them, should go first): " + "; ".join(stale)
    )


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


@conformance_id("STORE-USE-001", clause="5.6")
@requires("store", "store.proxy", "store.evict.manual")
def test_asking_a_spilled_values_size_is_not_using_it(impl, harness):
    """dask asks every task output for its size (``dask.sizeof``) and logs reprs; neither may
    bring a spilled value back or refresh it, and the size must be the value's own."""
    from dask.sizeof import sizeof

    h = harness
    v, tier = spilled_value(impl, h)
    h.store["b"] = h.value(N, seed=2)  # b is more recent than a
    before = state_of(h)
    size = sizeof(v)
    text = repr(v)
    is_array = isinstance(v, type(h.value(8)))
    after = state_of(h)
    changed = before.diff(after)
    assert not changed, f"sizeof/repr/isinstance of a value on {tier} changed the store: {changed}"
    assert size == N, f"dask.sizeof of a {N:,}-byte value on {tier} says {size:,}"
    assert text and is_array, f"isinstance of the handed-out value is {is_array}; repr {text!r}"
    del v
    h.check({"a", "b"})


class TierModel:
    """Strict LRU over three tiers for values of N bytes: the device holds 4, host ``host_cap``.

    Device values live on the device after a set or get; host-only values never do. Whatever
    leaves the device goes to host; host values beyond ``host_cap`` go to disk, least recently
    used first. Nothing comes back up without being used.
    """

    def __init__(self, host_cap: int) -> None:
        self.host_cap = host_cap
        self.kind: dict[str, str] = {}  # key -> "dev" | "host"
        self.tier: dict[str, str] = {}
        self.order: list[str] = []  # least -> most recent

    def _touch(self, key: str) -> None:
        if key in self.order:
            self.order.remove(key)
        self.order.append(key)

    def use(self, key: str) -> None:
        self._touch(key)
        self.tier[key] = "device" if self.kind[key] == "dev" else "host"
        self._settle(key)

    def put(self, key: str, kind: str) -> None:
        self.kind[key] = kind
        self.use(key)

    def delete(self, key: str) -> None:
        for d in (self.kind, self.tier):
            del d[key]
        self.order.remove(key)

    def _settle(self, keep: str) -> None:
        on_device = [k for k in self.order if self.tier[k] == "device"]
        for k in on_device[: max(0, len(on_device) - 4)]:
            self.tier[k] = "host"
        on_host = [k for k in self.order if self.tier[k] == "host"]
        for k in on_host[: max(0, len(on_host) - self.host_cap)]:
            self.tier[k] = "disk"


@conformance_id("STORE-CASCADE-001", clause=("5.4", "4.4", "5.5"))
@requires("store", "store.spill.host", "store.spill.disk", "store.limit.host", "store.lru.strict")
def test_every_tier_follows_recency(make_store):
    """A seeded program of sets, gets and deletes over device values and host-only values (which
    live on host and are used there), with a host limit of two values and of 0. After every
    step each key is in the tier strict LRU puts it: the four most recent device values on the
    device, the two most recent of the rest on host, the others on disk."""
    for host_cap in (2, 0):
        h = make_store(host_limit=host_limit_for(host_cap))
        s = h.store
        model = TierModel(host_cap)
        contents: dict[str, tuple[str, int]] = {}
        rng = random.Random(10)  # a program that uses host-only values from host and disk
        used = {"host": 0, "disk": 0}  # gets of host-only values, by the tier they were in
        for step in range(70):
            r = rng.random()
            key = f"k{rng.randrange(10)}"
            if r < 0.3 or not model.kind:
                s[key] = h.value(N, seed=step)
                model.put(key, "dev")
                contents[key] = ("dev", step)
                what = f"store[{key!r}] = <device value>"
            elif r < 0.5:
                s[key] = host_value(step)
                model.put(key, "host")
                contents[key] = ("host", step)
                what = f"store[{key!r}] = <host value>"
            elif r < 0.9:
                key = rng.choice(sorted(model.kind))
                kind, seed = contents[key]
                if kind == "host" and model.tier[key] in used:
                    used[model.tier[key]] += 1
                got = s[key]
                model.use(key)
                if kind == "dev":
                    assert value_digest(h.device, got) == seed_digest(seed, N), f"{key} changed"
                else:
                    assert np.array_equal(np.asarray(got), host_bytes(seed, N)), f"{key} changed"
                del got
                what = f"store[{key!r}]"
            else:
                key = rng.choice(sorted(model.kind))
                del s[key]
                model.delete(key)
                contents.pop(key)
                what = f"del store[{key!r}]"
            snap = h.check(model.kind)
            if dict(snap.tiers) != model.tier:
                wrong = {k: (t, model.tier[k]) for k, t in snap.tiers.items() if model.tier[k] != t}
                raise AssertionError(
                    f"host limit {host_cap} value(s), step {step} ({what}): keys in the wrong "
                    f"tier (store, strict LRU): {wrong}; recency, oldest first: {model.order}"
                )
        if not used["disk"] or (host_cap and not used["host"]):
            not_exercised(f"host limit {host_cap}: host-only values used from host/disk: {used}")
        h.close()


@conformance_id("STORE-CASCADE-004", clause=("5.4", "4.3", "4.4"))
@requires("store", "store.spill.host", "store.spill.disk", "store.limit.host", "store.lru.strict")
def test_using_an_oversize_value_refreshes_it_on_host(make_store):
    """Values over the device limit live on host (4.3) and are used from there. Using one must
    make it the most recent on the host tier too: with room on host for two of them, a and b
    stored, a read, then c stored, the cascade takes b to disk and keeps a on host (5.4)."""
    big = LIMIT + N
    h = make_store(host_limit=2 * (big + HOST_SLACK) + HOST_SLACK)
    s = h.store
    s["a"] = h.value(big, seed=1)
    s["b"] = h.value(big, seed=2)
    tiers = dict(h.snapshot().tiers)
    if tiers != {"a": "host", "b": "host"}:
        not_exercised(f"two oversize values did not both land on host: {tiers}")
    v = s["a"]
    assert value_digest(h.device, v) == seed_digest(1, big)
    del v
    s["c"] = h.value(big, seed=3)
    tiers = dict(h.snapshot().tiers)
    assert tiers.get("b") == "disk" and tiers.get("a") == "host", (
        f"after using a (oversize, on host) and storing c, the cascade left {tiers}: the least "
        f"recently used host value is b, which must go to disk first"
    )
    h.check({"a", "b", "c"}, oversize={k: big for k in "abc"})
