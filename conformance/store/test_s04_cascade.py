"""Cascades follow recency on every tier, and every path that spills honours both limits:
sets and gets, a manual evict, a spill on demand; at the boundaries (a value of exactly the
device limit, limits of 0) too."""

from __future__ import annotations

import math
import random

import numpy as np

from conformance import conformance_id, not_exercised, requires
from conformance.api import evict
from conformance.store.harness import LIMIT, host_bytes, seed_digest, value_digest
from conformance.store.probes import recording_device, state_of

N = LIMIT // 4  # four values fill the device exactly
HOST_SLACK = 4096  # a host-tier value may cost its payload plus this much (SPEC 3.4)


def host_limit_for(values: int) -> int:
    """A host limit that holds ``values`` values of N bytes, not one more."""
    return values * (N + HOST_SLACK) if values else 0


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


def _host_value(seed: int) -> np.ndarray:
    return host_bytes(seed, N).copy()


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
                s[key] = _host_value(step)
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


def _four_on_device(h, order=("b", "d", "c", "a")):
    """a, b, c, d (N bytes each) fill the device; then used so recency is ``order``."""
    for i, k in enumerate("abcd"):
        h.store[k] = h.value(N, seed=i)
    for k in order:
        h.store[k]
    snap = h.check("abcd")
    if snap.lru is not None:
        assert list(snap.lru) == list(order), f"recency after gets {order}: lru {list(snap.lru)}"
    return snap


def _expect_cascade(h, what, host_cap, spilled):
    """``spilled`` (oldest first) left the device: the newest ``host_cap`` of them on host."""
    snap = h.check("abcd")
    want = dict.fromkeys("abcd", "device")
    for i, k in enumerate(spilled):
        want[k] = "host" if i >= len(spilled) - host_cap else "disk"
    assert dict(snap.tiers) == want, (
        f"{what} with a host limit of {host_cap} value(s): tiers {dict(snap.tiers)}, expected "
        f"{want} (recency b, d, c, a: the least recently used leave first, host keeps the "
        f"newest of them)"
    )
    limit = h.env.host_limit
    assert snap.host_bytes <= limit, f"{what}: host_bytes {snap.host_bytes:,} > limit {limit:,}"
    for i, k in enumerate("abcd"):
        assert value_digest(h.device, h.store[k]) == seed_digest(i, N)


@conformance_id("STORE-CASCADE-002", clause=("4.5", "5.4"))
@requires("store", "store.spill.disk", "store.limit.host", "store.evict.manual", "store.lru.strict")
def test_manual_evict_cascades_like_any_spill(make_store):
    """evict(3 values) spills the three least recently used; the host limit (two values, then
    0) holds right after the call, the oldest of them going on to disk."""
    for host_cap in (2, 0):
        h = make_store(host_limit=host_limit_for(host_cap))
        _four_on_device(h)
        evict(h.adapter, h.store, 3 * N)
        _expect_cascade(h, "evict(3 values)", host_cap, ["b", "d", "c"])
        h.close()


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
        _four_on_device(h)
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
        _expect_cascade(h, "a spill on demand of three values", host_cap, ["b", "d", "c"])
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
            h0.store[f"h{i}"] = _host_value(i)
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
        _four_on_device(h, order)
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
