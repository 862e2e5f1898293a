"""Stores filled across the tiers, shared by the tests of several sections: four values of
``N`` bytes fill the device; host limits in values; a value held while it is spilled."""

from __future__ import annotations

import numpy as np

from conformance import not_exercised
from conformance.api import evict
from conformance.store.harness import LIMIT, host_bytes, seed_digest, value_digest

HOST_SLACK = 4096  # a host-tier value may cost its payload plus this much (SPEC 3.4)
N = LIMIT // 4  # four values fill the device exactly


def host_limit_for(values: int) -> int:
    """A host limit that holds ``values`` values of N bytes, not one more."""
    return values * (N + HOST_SLACK) if values else 0


def host_value(seed: int) -> np.ndarray:
    return host_bytes(seed, N).copy()


def four_on_device(h, order=("b", "d", "c", "a")):
    """a, b, c, d (N bytes each) fill the device; then used so recency is ``order``."""
    for i, k in enumerate("abcd"):
        h.store[k] = h.value(N, seed=i)
    for k in order:
        h.store[k]
    snap = h.check("abcd")
    if snap.lru is not None:
        assert list(snap.lru) == list(order), f"recency after gets {order}: lru {list(snap.lru)}"
    return snap


def expect_cascade(h, what, host_cap, spilled):
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


def spilled_value(impl, h, key="a", seed=1):
    """Store ``key``, take its value, then evict everything: the value is held, not resident."""
    h.store[key] = h.value(N, seed=seed)
    v = h.store[key]
    evict(h.adapter, h.store, 4 * LIMIT)
    tier = h.snapshot().tiers[key]
    if tier == "device":
        not_exercised(f"evict left {key!r} on the device")
    return v, tier


def disk_store(impl, make_store, **kw):
    """A store whose spilled values end up on disk."""
    if "store.limit.host" in impl.capabilities:
        return make_store(host_limit=LIMIT // 4, **kw)
    return make_store(**kw)


def cleanup_store(impl, make_store):
    """A disk store for the file-cleanup tests: whether disk_bytes equals the bytes in
    spill_dir is judged on its own ID (STORE-DISK-007), not here."""
    return disk_store(impl, make_store, disk_accounting=False)


def fill(h, count=8, n=LIMIT // 3):
    keys = set()
    for i in range(count):
        h.store[f"k{i}"] = h.value(n, seed=i)
        keys.add(f"k{i}")
    snap = h.check(keys)
    assert "disk" in snap.tiers.values(), f"nothing reached disk: {dict(snap.tiers)}"
    return keys
