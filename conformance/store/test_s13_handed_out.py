"""Values the store handed out behave as the values they stand for, wherever they are.

Clauses 5.6, 11.7, 13.3 and 13.4: the ways dask and NumPy reach a value that the store has
since spilled (its size, its repr, NumPy's entry points, dask's wire protocol), and a value
whose store was closed. Each of these was a mutant of the reference that no test looked at.
"""

from __future__ import annotations

import gc

import numpy as np

from conformance import conformance_id, not_exercised, requires
from conformance.api import evict
from conformance.store.harness import LIMIT, digest, host_bytes, seed_digest, to_host, value_digest
from conformance.store.probes import state_of

N = LIMIT // 4


def _spilled_value(impl, h, key="a", seed=1):
    """Store ``key``, take its value, then evict everything: the value is held, not resident."""
    h.store[key] = h.value(N, seed=seed)
    v = h.store[key]
    evict(h.adapter, h.store, 4 * LIMIT)
    tier = h.snapshot().tiers[key]
    if tier == "device":
        not_exercised(f"evict left {key!r} on the device")
    return v, tier


@conformance_id("STORE-USE-001", clause="5.6")
@requires("store", "store.proxy", "store.evict.manual")
def test_asking_a_spilled_values_size_is_not_using_it(impl, harness):
    """dask asks every task output for its size (``dask.sizeof``) and logs reprs; neither may
    bring a spilled value back or refresh it, and the size must be the value's own."""
    from dask.sizeof import sizeof

    h = harness
    v, tier = _spilled_value(impl, h)
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


@conformance_id("STORE-USE-002", clause=("13.3", "13.1"))
@requires("store", "store.proxy", "store.evict.manual")
def test_numpy_entry_points_on_a_spilled_value(impl, harness, device_kind):
    """``np.asarray(v, dtype=...)``, ``np.array(v, copy=True)``, ``len(v)`` and ``v.nbytes`` of a
    spilled value give what they give on the value itself, and a ufunc writing into the value
    (``np.add(v, 1, out=v)``) is in it after the next spill and unspill."""
    if device_kind != "sim":
        not_exercised("host NumPy entry points need a host-readable device (sim)")
    h = harness
    want = host_bytes(1, N).copy()
    v, tier = _spilled_value(impl, h)
    as_int = np.asarray(v, dtype=np.int16)
    assert as_int.dtype == np.int16 and np.array_equal(as_int, want.astype(np.int16)), (
        f"np.asarray(v, dtype=int16) of a value on {tier} differs from the value's"
    )
    copied = np.array(v, copy=True)
    assert np.array_equal(copied, want), f"np.array(v, copy=True) of a value on {tier} differs"
    copied[:16] = 0  # a copy: the stored value must not see it
    assert len(v) == N and v.nbytes == N, f"len {len(v)}, nbytes {v.nbytes} of a {N:,}-byte value"
    evict(h.adapter, h.store, 4 * LIMIT)
    np.add(v, 1, out=v)
    want += 1
    del v, as_int, copied
    gc.collect()
    evict(h.adapter, h.store, 4 * LIMIT)
    got = to_host(h.device, h.store["a"])
    assert digest(got) == digest(want), (
        f"after np.add(v, 1, out=v) and a spill, {int((got != want).sum())} of {N:,} bytes differ "
        f"(a write through out= must reach the stored value; a copy must not)"
    )
    h.check({"a"})


@conformance_id("STORE-USE-003", clause="13.4")
@requires("store", "store.pickle", "store.evict.manual")
def test_spilled_values_cross_dasks_wire_protocol(impl, harness):
    """A worker sends a value with ``distributed.protocol.serialize``; a spilled value must
    arrive equal and as a device value, and sending it must not bring it back to the device."""
    from distributed.protocol import deserialize, serialize

    h = harness
    v, tier = _spilled_value(impl, h, seed=3)
    before = state_of(h)
    header, frames = serialize(v, serializers=("dask", "pickle"), on_error="raise")
    after = state_of(h)
    w = deserialize(header, frames)
    assert h.device.is_device_array(w) or isinstance(w, v.__class__), (
        f"a value sent from {tier} arrived as {type(w).__name__}, not a {v.__class__.__name__}"
    )
    assert value_digest(h.device, w) == seed_digest(3, N), f"a value sent from {tier} arrived changed"
    changed = before.diff(after)
    assert not changed, f"serializing a value on {tier} changed the store: {changed}"
    del v, w
    h.check({"a"})


@conformance_id("STORE-USE-004", clause="11.7")
@requires("store", "store.evict.manual")
def test_a_value_held_past_close_never_reads_wrong(impl, make_store):
    """The caller holds values from every tier, then the store is closed: each must either
    read back exactly or raise on use; none may read back other data."""
    disk = {"store.limit.host", "store.spill.disk"} <= impl.capabilities
    h = make_store(host_limit=N + 4096) if disk else make_store()
    held = {}
    for i in range(4):
        h.store[f"k{i}"] = h.value(N, seed=20 + i)
        held[f"k{i}"] = h.store[f"k{i}"]
    evict(h.adapter, h.store, 3 * N)
    tiers = dict(h.snapshot().tiers)
    h.close(check=False)
    wrong = []
    for i, (k, v) in enumerate(held.items()):
        try:
            got = value_digest(h.device, v)
        except Exception:  # a clear error on use is allowed
            continue
        if got != seed_digest(20 + i, N):
            wrong.append(f"{k} (was on {tiers[k]})")
    assert not wrong, f"after close, values held by the caller read back other data: {wrong}"
    del held, v
    gc.collect()
