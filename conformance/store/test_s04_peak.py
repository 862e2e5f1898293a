"""The limit at every moment: the device's own high-water mark during each call, not inspect
between calls. A store that copies back before it makes room, stages a spill on the device
or keeps a device copy of what it is given is within the limit after every call, and over it
during the call."""

from __future__ import annotations

import random

import pytest

from conformance import conformance_id, not_exercised, requires
from conformance.api import evict
from conformance.store.harness import LIMIT, seed_digest, value_digest
from conformance.store.probes import peak_during, recording_device

SIZES = (LIMIT // 8, LIMIT // 4, LIMIT // 3, LIMIT // 2, LIMIT)  # all fit: no single-object rule
STEPS = 60


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
    h = make_store(**kw)
    s = h.store
    rng = random.Random(4242)
    model: dict[str, tuple[int, int]] = {}
    counts = dict.fromkeys(("set", "get", "delete", "evict", "oom"), 0)

    def bounded(what: str, fn, *args, held: int = 0):
        result, peak = peak_during(h, lambda: fn(*args))
        assert peak - held <= LIMIT, (
            f"step {step}: {what}: the device peaked at {peak:,} bytes during the call, {held:,} "
            f"of them held by the test: the store held up to {peak - held:,} > limit {LIMIT:,} "
            f"(tiers before: {tiers})"
        )
        return result

    def read(key):
        return value_digest(h.device, s[key])

    for step in range(STEPS):
        tiers = dict(h.snapshot().tiers)
        r = rng.random()
        key = f"k{rng.randrange(8)}"
        if r < 0.4 or not model:
            n = rng.choice(SIZES)
            v = h.value(n, seed=step)
            bounded(f"store[{key!r}] = <{n:,} bytes>", s.__setitem__, key, v, held=n)
            del v
            model[key] = (step, n)
            counts["set"] += 1
        elif r < 0.7:
            key = rng.choice(sorted(model))
            got = bounded(f"value_digest(store[{key!r}])", read, key)
            assert got == seed_digest(*model[key]), f"{key} came back changed"
            counts["get"] += 1
        elif r < 0.84:
            key = rng.choice(sorted(model))
            bounded(f"del store[{key!r}]", s.__delitem__, key)
            del model[key]
            counts["delete"] += 1
        elif r < 0.93 and "store.evict.manual" in caps:
            n = rng.choice((1, LIMIT // 3, LIMIT))
            bounded(f"evict({n:,})", evict, h.adapter, s, n)
            counts["evict"] += 1
        elif "store.oom.on_demand" in caps and dev is not None:
            before = h.ledger()
            m = capacity - before + rng.choice((1, LIMIT // 4))  # does not fit beside the store
            if m > capacity:
                continue
            dev.calls.clear()
            outside = dev.empty(m, "uint8")
            for c in dev.calls:
                assert c.peak - h.baseline <= LIMIT, (
                    f"step {step}: during spill on demand (handler {c.handler}, shortfall "
                    f"{c.shortfall:,}) the device peaked at {c.peak - h.baseline:,} > limit "
                    f"{LIMIT:,} (the test held nothing yet; tiers before: {tiers})"
                )
            counts["oom"] += bool(dev.calls)
            h.check(model, held=m)
            del outside
        h.check(model)
    if not counts["get"] or not counts["set"]:
        not_exercised(f"the program made no get or no set: {counts}")
    if "store.oom.on_demand" in caps and dev is not None and not counts["oom"]:
        pytest.fail(f"no allocation ever called the store's OOM handler: {counts}")
