"""In-place writes to a value in use survive its next spill and unspill."""

from __future__ import annotations

import gc
import pickle
from functools import partial

import numpy as np

from conformance import conformance_id, not_exercised, requires
from conformance.api import evict
from conformance.store.harness import LIMIT, digest, host_bytes, seed_digest, to_host, value_digest
from conformance.store.probes import peak_during, state_of
from conformance.store.tiers import N as SPILLED_N
from conformance.store.tiers import spilled_value

N = LIMIT // 3


def _push_out(h, key, round_):
    """Values that push ``key`` off the device; returns the tier it went to."""
    for i in range(4):
        h.store[f"pressure-{i}"] = h.value(N, seed=1000 * round_ + i)
    return h.snapshot().tiers[key]


def _disk_store(impl, make_store):
    disk = {"store.limit.host", "store.spill.disk"} <= impl.capabilities
    return make_store(host_limit=N + 4096) if disk else make_store()


@conformance_id("STORE-INPLACE-001", clause="13.1")
@requires("store")
def test_in_place_writes_survive_spill_and_unspill(impl, make_store):
    """Writes to a value the store handed out (item assignment, an in-place operator, a write
    through a slice), made while it is on the device, must be in it after it was spilled and
    brought back, twice: written as first stored, and written again once it came back from
    its spill (a store must not re-spill the copy it came back from). Any store can keep them:
    what it spills is the object that was written."""
    h = _disk_store(impl, make_store)
    s = h.store
    want = host_bytes(1, N).copy()
    s["k"] = h.value(N, seed=1)
    for round_, (lo, hi) in enumerate([(0, 8), (16, 24)], start=1):
        v = s["k"]  # the second time, this read brings k back from its spill
        if h.snapshot().tiers["k"] != "device":
            not_exercised(f"a value of {N:,} bytes, just read, is not on the device")
        v[lo:hi] = 7
        want[lo:hi] = 7
        v += round_
        want += round_
        v[100:200] *= 2
        want[100:200] *= 2
        del v
        tier = _push_out(h, "k", round_)
        if tier == "device":
            not_exercised("k never left the device")
        got = to_host(h.device, s["k"])
        assert digest(got) == digest(want), (
            f"writes made on the device (round {round_}) were lost by the spill to {tier} and "
            f"the unspill ({int((got != want).sum())} of {N:,} bytes differ)"
        )
        del got
    h.check(set(s))


@conformance_id("STORE-INPLACE-003", clause="13.6")
@requires("store", "store.proxy")
def test_in_place_writes_survive_wherever_the_value_is(impl, make_store):
    """A handed-out value stays the stored value: written while spilled (the write itself
    brings it back), and, for a value larger than the limit (used from host), written through
    its transient copy, the writes are in it after the next spill and unspill."""
    h = _disk_store(impl, make_store)
    s = h.store
    want = host_bytes(1, N).copy()
    s["k"] = h.value(N, seed=1)
    w = s["k"]  # written while spilled: the write itself brings it back
    tier = _push_out(h, "k", 2)
    if tier == "device":
        not_exercised("k never left the device")
    w[16:24] = 5
    want[16:24] = 5
    w -= 3
    want -= 3
    del w
    _push_out(h, "k", 3)
    got = to_host(h.device, s["k"])
    assert digest(got) == digest(want), (
        f"writes made to a value spilled to {tier} were lost by its next spill and unspill "
        f"({int((got != want).sum())} of {N:,} bytes differ)"
    )

    big_n = LIMIT + N  # over the limit: it lives off the device, used through transient copies
    big_want = host_bytes(2, big_n).copy()
    s["big"] = h.value(big_n, seed=2)
    b = s["big"]
    b[:8] = 9
    big_want[:8] = 9
    b += 2
    big_want += 2
    del b
    _push_out(h, "k", 4)
    got = to_host(h.device, s["big"])
    assert digest(got) == digest(big_want), (
        f"writes to a value over the limit were lost ({int((got != big_want).sum())} of "
        f"{big_n:,} bytes differ)"
    )
    h.check(set(s), oversize={"big": big_n})


@conformance_id("STORE-INPLACE-002", clause=("13.6", "3.5", "4.4"))
@requires("store", "store.proxy", "store.spill.disk", "store.limit.host")
def test_in_place_writes_to_an_oversize_value_on_disk(make_store):
    """A value over the device limit with a host limit of 0 lives on disk and is used through
    transient copies; writes through them must be in the value when it is read back, and its
    file must be rewritten, not added to: disk_bytes stays equal to the files under spill_dir."""
    h = make_store(host_limit=0)
    s = h.store
    big_n = LIMIT + N
    want = host_bytes(3, big_n).copy()
    s["big"] = h.value(big_n, seed=3)
    tier = h.snapshot().tiers["big"]
    if tier != "disk":
        not_exercised(f"a value over the limit with host limit 0 went to {tier}, not disk")
    b = s["big"]
    b[:8] = 4
    want[:8] = 4
    b *= 3
    want *= 3
    del b
    h.check({"big"}, oversize={"big": big_n})
    got = to_host(h.device, s["big"])
    assert digest(got) == digest(want), (
        f"writes to an oversize value on disk were lost ({int((got != want).sum())} of "
        f"{big_n:,} bytes differ)"
    )
    h.check({"big"}, oversize={"big": big_n})


@conformance_id("STORE-PICKLE-001", clause="13.2")
@requires("store", "store.pickle")
def test_values_pickle_round_trip(harness):
    h, s = harness, harness.store
    s["a"] = h.value(1000, seed=1)
    v = s["a"]
    w = pickle.loads(pickle.dumps(v))
    assert h.device.is_device_array(w) or isinstance(w, type(v)), f"unpickled to {type(w).__name__}"
    assert value_digest(h.device, w) == seed_digest(1, 1000)
    del v, w
    h.check({"a"})


@conformance_id("STORE-PICKLE-002", clause="13.2")
@requires("store", "store.pickle")
def test_spilled_and_nested_values_pickle(harness):
    h, s = harness, harness.store
    s["n"] = [h.value(500, seed=2), {"x": h.value(LIMIT // 3, seed=3)}]
    for i in range(4):
        s[f"f{i}"] = h.value(LIMIT // 3, seed=10 + i)
    v = s["n"]
    w = pickle.loads(pickle.dumps(v))
    assert value_digest(h.device, w[0]) == seed_digest(2, 500)
    assert value_digest(h.device, w[1]["x"]) == seed_digest(3, LIMIT // 3)
    del v, w
    h.check({"n"} | {f"f{i}" for i in range(4)})


@conformance_id("STORE-PICKLE-003", clause=("13.7", "13.2", "3.1", "3.3"))
@requires("store", "store.pickle")
def test_unpickled_values_can_be_stored_again(impl, make_store):
    """Two handed-out values, one spilled when pickled and one on the device, are unpickled (as
    a dask worker receives a value from another) and stored in the store that handed them out,
    then one of them in a second store on the same device: each reads back exactly, counted
    like any value, and every byte comes back when they are deleted. (A mutant of the reference
    raised AttributeError storing a value that no store managed.)"""
    h = make_store()
    other = make_store(device=h.device)  # both before any value: each baseline is empty
    s = h.store
    s["a"] = h.value(N, seed=1)
    x = s["a"]
    for i in range(3):  # a is the least recently used: pushed out
        s[f"f{i}"] = h.value(N, seed=10 + i)
    keys = {"a", "f0", "f1", "f2"}
    y = s["f2"]
    spilled, on_device = pickle.loads(pickle.dumps(x)), pickle.loads(pickle.dumps(y))
    del x, y
    s["u"] = spilled
    s["w"] = on_device
    del spilled, on_device
    keys |= {"u", "w"}
    h.check(keys)
    assert value_digest(h.device, s["u"]) == seed_digest(1, N), "the value spilled when pickled"
    assert value_digest(h.device, s["w"]) == seed_digest(12, N), "the value on the device"
    h.check(keys)
    other.store["z"] = pickle.loads(pickle.dumps(s["f0"]))
    for _ in range(2):
        theirs = other.check({"z"}, held=h.snapshot().device_bytes).device_bytes
        h.check(keys, held=theirs)
        assert value_digest(h.device, other.store["z"]) == seed_digest(10, N)
    for k in keys:
        del s[k]
    del other.store["z"]
    snap = h.check(set())
    assert (snap.device_bytes, snap.host_bytes, snap.disk_bytes) == (0, 0, 0), snap
    snap = other.check(set())
    assert (snap.device_bytes, snap.host_bytes, snap.disk_bytes, h.ledger()) == (0, 0, 0, 0), snap


def _spilled_datetimes(h, want):
    """``want`` stored under x in ``h`` and handed out, then evicted: held while spilled."""
    h.store["x"] = h.device.asarray(want)
    v = h.store["x"]
    evict(h.adapter, h.store, 4 * LIMIT)
    if h.snapshot().tiers["x"] == "device":
        not_exercised("evict left x on the device")
    return v


def _unpickled(make_store, want):
    """The store and a value of its own that was spilled when pickled, unpickled (13.7)."""
    h = make_store()
    return h, pickle.loads(pickle.dumps(_spilled_datetimes(h, want)))


def _from_a_closed_store(make_store, want):
    """Another store and a value a closed store handed out while it was spilled (11.8)."""
    a = make_store()
    v = _spilled_datetimes(a, want)
    a.close(check=False)
    return make_store(device=a.device), v


@conformance_id("STORE-PICKLE-004", clause=("13.7", "4.2", "4.9", "11.8"))
@requires("store", "store.pickle", "store.lru.strict", "store.evict.manual")
def test_a_value_arriving_spilled_makes_room_before_it_lands(impl, make_store, device_kind):
    """A datetime64 array (NumPy pickles it in band: no out-of-band frame) arrives spilled:
    unpickled from a spilled handed-out value, and (with store.alias.dedup) handed out spilled
    by a store since closed. It is stored under y while a, b, c and d fill the device. The set
    must make the room y takes on the device before it lands (the peak, less what the caller
    held, within the limit) and move off a, the least recently used, and only a; y reads back
    exactly. (A mutant of the reference sized that room by the serialized frames, 0 bytes
    here: it copied y to the device first and evicted a afterwards.)"""
    want = np.arange(SPILLED_N // 8).astype("M8[ns]" if device_kind == "sim" else "<i8")
    ways = {"unpickled": _unpickled}  # CuPy holds no datetimes: int64 there
    if "store.alias.dedup" in impl.capabilities:
        ways["from a closed store"] = _from_a_closed_store
    for way, arrive in ways.items():
        h, w = arrive(make_store, want)
        s = h.store
        for i, k in enumerate("abcd"):
            s[k] = h.value(SPILLED_N, seed=i)  # the device is full; a is the least recent
        held = h.ledger() - h.snapshot().device_bytes  # a device copy, where one was made
        _, peak = peak_during(h, partial(s.__setitem__, "y", w))
        del w
        keys = set(h.snapshot().tiers)
        snap = h.check(keys)
        moved = [k for k in "abcd" if snap.tiers[k] != "device"]
        assert peak - held <= h.limit and moved == ["a"], (
            f"storing y ({SPILLED_N:,} device bytes, {way}) beside a, b, c and d ("
            f"{SPILLED_N:,} each, the limit full) peaked at {peak - held:,} store bytes on the "
            f"device (limit {h.limit:,}) and moved {moved} off it: tiers {dict(snap.tiers)}"
        )
        assert np.array_equal(h.device.to_host(s["y"]), want), f"y ({way}) read back different"
        h.check(keys)


@conformance_id("STORE-USE-002", clause=("13.3", "13.1"))
@requires("store", "store.proxy", "store.evict.manual")
def test_numpy_entry_points_on_a_spilled_value(impl, harness, device_kind):
    """``np.asarray(v, dtype=...)``, ``np.array(v, copy=True)``, ``len(v)`` and ``v.nbytes`` of a
    spilled value give what they give on the value itself, and a ufunc writing into the value
    (``np.add(v, 1, out=v)``) is in it after the next spill and unspill."""
    if device_kind != "sim":
        not_exercised("host NumPy entry points need a host-readable device (sim)")
    h = harness
    want = host_bytes(1, SPILLED_N).copy()
    v, tier = spilled_value(impl, h)
    as_int = np.asarray(v, dtype=np.int16)
    assert as_int.dtype == np.int16 and np.array_equal(as_int, want.astype(np.int16)), (
        f"np.asarray(v, dtype=int16) of a value on {tier} differs from the value's"
    )
    copied = np.array(v, copy=True)
    assert np.array_equal(copied, want), f"np.array(v, copy=True) of a value on {tier} differs"
    copied[:16] = 0  # a copy: the stored value must not see it
    assert len(v) == SPILLED_N and v.nbytes == SPILLED_N, (
        f"len {len(v)}, nbytes {v.nbytes} of a {SPILLED_N:,}-byte value"
    )
    evict(h.adapter, h.store, 4 * LIMIT)
    np.add(v, 1, out=v)
    want += 1
    del v, as_int, copied
    gc.collect()
    evict(h.adapter, h.store, 4 * LIMIT)
    got = to_host(h.device, h.store["a"])
    assert digest(got) == digest(want), (
        f"after np.add(v, 1, out=v) and a spill, {int((got != want).sum())} of {SPILLED_N:,} bytes differ "
        f"(a write through out= must reach the stored value; a copy must not)"
    )
    h.check({"a"})


@conformance_id("STORE-USE-003", clause="13.4")
@requires("store", "store.pickle", "store.evict.manual")
def test_spilled_values_cross_dasks_wire_protocol(impl, make_store):
    """A worker sends a value with ``distributed.protocol.serialize``; a spilled value must
    arrive equal and as a device value, from host and from disk, and sending it must not bring
    it back to the device (nor, from disk, to host)."""
    from distributed.protocol import deserialize, serialize

    disk = {"store.limit.host", "store.spill.disk"} <= impl.capabilities
    for store_kw in ({}, {"host_limit": 0}) if disk else ({},):
        h = make_store(**store_kw)
        v, tier = spilled_value(impl, h, seed=3)
        before = state_of(h)
        header, frames = serialize(v, serializers=("dask", "pickle"), on_error="raise")
        after = state_of(h)
        w = deserialize(header, frames)
        assert h.device.is_device_array(w) or isinstance(w, v.__class__), (
            f"a value sent from {tier} arrived as {type(w).__name__}, not a {v.__class__.__name__}"
        )
        assert value_digest(h.device, w) == seed_digest(3, SPILLED_N), (
            f"a value sent from {tier} arrived changed"
        )
        changed = before.diff(after)
        assert not changed, f"serializing a value on {tier} changed the store: {changed}"
        del v, w
        h.check({"a"})
        h.close()
