"""The device limit, the single-object rule, LRU eviction, the host limit, bad limits, evict()."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from conformance import conformance_id, not_exercised, requires
from conformance.api import evict
from conformance.store.harness import LIMIT, host_bytes, seed_digest, value_digest
from conformance.store.probes import peak_during, recording_device, state_of
from conformance.store.tiers import N, expect_cascade, four_on_device, host_limit_for, host_value


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


@conformance_id("STORE-LIMIT-009", clause=("4.9", "5.2", "7.3"))
@requires("store", "store.lru.strict", "store.proxy", "store.external", "store.spill.host")
def test_a_use_bringing_a_value_back_moves_only_what_it_needs(harness):
    """a, b and c of a third of the limit fill the device, the test holding a's value; an
    external of the same size pushes a out and is dropped. A use of a's value brings it back
    into the room the dead external left: nothing else has to move, so b, the least recently
    used, stays. (A mutant of the reference decided before forgetting the dead external and
    spilled b for room it already had.)"""
    h, s = harness, harness.store
    third = LIMIT // 3
    for k in "abc":
        s[k] = h.value(third, seed=ord(k))
    v = s["a"]
    s["b"]
    s["c"]
    x = h.adapter.register_external(s, h.value(third, seed=1))
    if h.snapshot().tiers["a"] == "device":
        not_exercised("an external of a third of the limit moved nothing off a full device")
    del x  # dead now; no store call in between: the next one is the use
    used = v[3]
    del used
    snap = h.check("abc")
    moved = [k for k in "bc" if snap.tiers[k] != "device"]
    assert snap.tiers["a"] == "device" and not moved, (
        f"a use of a brought it back and moved {moved} off the device (tiers {dict(snap.tiers)}, "
        f"device_bytes {snap.device_bytes:,} of {h.limit:,}: room for a third was free once the "
        "dropped external was forgotten)"
    )
    assert value_digest(h.device, v) == seed_digest(ord("a"), third)
    del v
    h.check("abc")


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


SIZES = (LIMIT // 8, LIMIT // 4, LIMIT // 3, LIMIT // 2, LIMIT)  # all fit: no single-object rule


STEPS = 60


class _PeakProgram:
    """STORE-PEAK-001's random program: each call made with the device's peak reset, and
    the peak minus what the test itself holds bounded by the limit afterwards."""

    def __init__(self, h, dev, capacity: int, caps) -> None:
        self.h, self.s, self.dev, self.capacity, self.caps = h, h.store, dev, capacity, caps
        self.model: dict[str, tuple[int, int]] = {}
        self.counts = dict.fromkeys(("set", "get", "delete", "evict", "oom"), 0)
        self.step = 0
        self.tiers: dict = {}

    def bounded(self, what: str, fn, *args, held: int = 0):
        result, peak = peak_during(self.h, lambda: fn(*args))
        assert peak - held <= LIMIT, (
            f"step {self.step}: {what}: the device peaked at {peak:,} bytes during the call, "
            f"{held:,} of them held by the test: the store held up to {peak - held:,} > limit "
            f"{LIMIT:,} (tiers before: {self.tiers})"
        )
        return result

    def read(self, key):
        return value_digest(self.h.device, self.s[key])

    def run(self, step: int, rng: random.Random) -> None:
        """One call, drawn from ``rng``; then the store-wide invariants."""
        h, s, model, counts = self.h, self.s, self.model, self.counts
        self.step, self.tiers = step, dict(h.snapshot().tiers)
        r = rng.random()
        key = f"k{rng.randrange(8)}"
        if r < 0.4 or not model:
            n = rng.choice(SIZES)
            v = h.value(n, seed=step)
            self.bounded(f"store[{key!r}] = <{n:,} bytes>", s.__setitem__, key, v, held=n)
            del v
            model[key] = (step, n)
            counts["set"] += 1
        elif r < 0.7:
            key = rng.choice(sorted(model))
            got = self.bounded(f"value_digest(store[{key!r}])", self.read, key)
            assert got == seed_digest(*model[key]), f"{key} came back changed"
            counts["get"] += 1
        elif r < 0.84:
            key = rng.choice(sorted(model))
            self.bounded(f"del store[{key!r}]", s.__delitem__, key)
            del model[key]
            counts["delete"] += 1
        elif r < 0.93 and "store.evict.manual" in self.caps:
            n = rng.choice((1, LIMIT // 3, LIMIT))
            self.bounded(f"evict({n:,})", evict, h.adapter, s, n)
            counts["evict"] += 1
        elif "store.oom.on_demand" in self.caps and self.dev is not None:
            made = self.spill_on_demand(rng)
            if not made:
                return  # nothing allocated this step: nothing to check either
        h.check(model)

    def spill_on_demand(self, rng: random.Random) -> bool:
        """An allocation that does not fit beside the store: each call of the store's OOM
        handler stays under the limit (the test holds nothing yet). False: none made."""
        h, dev = self.h, self.dev
        before = h.ledger()
        m = self.capacity - before + rng.choice((1, LIMIT // 4))
        if m > self.capacity:
            return False
        dev.calls.clear()
        outside = dev.empty(m, "uint8")
        for c in dev.calls:
            assert c.peak - h.baseline <= LIMIT, (
                f"step {self.step}: during spill on demand (handler {c.handler}, shortfall "
                f"{c.shortfall:,}) the device peaked at {c.peak - h.baseline:,} > limit "
                f"{LIMIT:,} (the test held nothing yet; tiers before: {self.tiers})"
            )
        self.counts["oom"] += bool(dev.calls)
        h.check(self.model, held=m)
        del outside
        return True


@conformance_id("STORE-PEAK-001", clause="4.2")
@requires("store")
def test_device_peak_stays_under_limit_during_every_call(impl, make_store, device_kind):
    """Before each set, overwrite, get (and use), delete, evict and spill on demand the
    device's peak is reset; after it, the peak minus what the test itself holds must be at most
    the device limit. During a spill on demand the test's allocation does not exist yet, so
    each handler call must stay under limit + what the test held before."""
    caps = impl.capabilities
    capacity = 4 * LIMIT
    dev = recording_device(capacity, measure_peak=True) if device_kind == "sim" else None
    kw = {"capacity": capacity, "device": dev}
    if {"store.limit.host", "store.spill.disk"} <= caps:
        kw["host_limit"] = LIMIT // 2  # spills cascade to disk: every tier is read back
    program = _PeakProgram(make_store(**kw), dev, capacity, caps)
    rng = random.Random(4242)
    for step in range(STEPS):
        program.run(step, rng)
    counts = program.counts
    if not counts["get"] or not counts["set"]:
        not_exercised(f"the program made no get or no set: {counts}")
    if "store.oom.on_demand" in caps and dev is not None and not counts["oom"]:
        pytest.fail(f"no allocation ever called the store's OOM handler: {counts}")


@conformance_id("STORE-CASCADE-002", clause=("4.5", "5.4"))
@requires("store", "store.spill.disk", "store.limit.host", "store.evict.manual", "store.lru.strict")
def test_manual_evict_cascades_like_any_spill(make_store):
    """evict(3 values) spills the three least recently used; the host limit (two values, then
    0) holds right after the call, the oldest of them going on to disk."""
    for host_cap in (2, 0):
        h = make_store(host_limit=host_limit_for(host_cap))
        four_on_device(h)
        evict(h.adapter, h.store, 3 * N)
        expect_cascade(h, "evict(3 values)", host_cap, ["b", "d", "c"])
        h.close()


@conformance_id("STORE-LIMIT-007", clause=("4.1", "4.4"))
@requires("store")
def test_limits_at_their_boundaries(impl, make_store):
    """A value of exactly the device limit lives on the device (alone); a device limit of 0
    keeps nothing on the device; a host limit of 0 keeps nothing on host (spills go to disk).
    Every value reads back."""
    h = make_store()
    for i in range(3):
        h.store[f"k{i}"] = h.value(N, seed=i)
    h.store["full"] = h.value(LIMIT, seed=9)
    snap = h.check({"k0", "k1", "k2", "full"})
    assert snap.tiers["full"] == "device", (
        f"a value of exactly the limit fits: it must be on the device, tiers {dict(snap.tiers)}"
    )
    assert value_digest(h.device, h.store["full"]) == seed_digest(9, LIMIT)
    assert value_digest(h.device, h.store["k0"]) == seed_digest(0, N)
    snap = h.check({"k0", "k1", "k2", "full"})
    assert snap.tiers["k0"] == "device" and snap.tiers["full"] != "device", dict(snap.tiers)

    zero = make_store(device_limit=0, capacity=4 * LIMIT)
    zero.store["a"] = zero.value(N, seed=1)
    zero.store["b"] = zero.value(1, seed=2)
    snap = zero.check({"a", "b"}, oversize={"a": N, "b": 1})
    on_device = {k: t for k, t in snap.tiers.items() if t == "device"}
    assert not on_device and snap.device_bytes == 0, (
        f"device limit 0: nothing may stay on the device, tiers {dict(snap.tiers)}, "
        f"device_bytes {snap.device_bytes:,}"
    )
    assert value_digest(zero.device, zero.store["a"]) == seed_digest(1, N)
    assert value_digest(zero.device, zero.store["b"]) == seed_digest(2, 1)

    if {"store.limit.host", "store.spill.disk"} <= impl.capabilities:
        h0 = make_store(host_limit=0)
        keys = set()
        for i in range(6):
            h0.store[f"k{i}"] = h0.value(N, seed=i)
            h0.store[f"h{i}"] = host_value(i)
            keys |= {f"k{i}", f"h{i}"}
            snap = h0.check(keys)
            on_host = sorted(k for k, t in snap.tiers.items() if t == "host")
            assert not on_host and snap.host_bytes == 0, (
                f"host limit 0: nothing may stay on host, yet {on_host} are there "
                f"(host_bytes {snap.host_bytes:,})"
            )
        for i in range(6):
            assert value_digest(h0.device, h0.store[f"k{i}"]) == seed_digest(i, N)
            assert np.array_equal(np.asarray(h0.store[f"h{i}"]), host_bytes(i, N))
            h0.check(keys)


EVICT_ASKS = (0, 1, N - 1, N, N + 1, 2 * N + 1, 10 * LIMIT, 0)


@conformance_id("STORE-EVICT-003", clause="4.7")
@requires("store", "store.evict.manual", "store.lru.strict")
def test_evict_frees_what_it_says_lru_first(make_store):
    """For n in 0, 1, N-1, N, N+1, 2N+1, 10 x limit (four values of N on the device, recency
    b, d, c, a): evict(n) spills the ceil(n / N) least recently used, returns the bytes freed,
    and the ledger drops by exactly that much; evict(0) changes nothing at all."""
    h = make_store()
    order = ["b", "d", "c", "a"]
    for ask in EVICT_ASKS:
        for k in "abcd":
            if k in h.store:
                del h.store[k]
        four_on_device(h, order)
        before = state_of(h)
        freed = evict(h.adapter, h.store, ask)
        after = state_of(h)
        count = min(4, math.ceil(ask / N))
        dropped = before.ledger - after.ledger
        if ask == 0:
            assert after == before, f"evict(0) changed the store: {before.diff(after)}"
        spilled = [k for k in order if after.tiers[k] != "device"]
        assert spilled == order[:count], (
            f"evict({ask:,}) spilled {spilled}, expected the {count} least recently used "
            f"{order[:count]}"
        )
        assert dropped == count * N, (
            f"evict({ask:,}): the ledger dropped by {dropped:,}, expected {count * N:,}"
        )
        assert freed == dropped, (
            f"evict({ask:,}) returned {freed!r}, the ledger dropped {dropped:,}"
        )
        h.check("abcd")
