"""Rules 1-2: values, container types, alias dedup, exact accounting and the limit."""

from __future__ import annotations

import collections
import gc

import numpy as np

from conftest import NB, value_of
from reference_impl import ProxyObject, SimArray


def test_device_value_is_proxied_and_counted_exactly(dev, arr, make_store):
    s = make_store()
    s["a"] = arr(1)
    s["b"] = arr(2)
    snap = s.snapshot()
    assert snap.tiers == {"a": "device", "b": "device"}
    assert snap.device_bytes == 2 * NB == dev.bytes_in_use()
    v = s["a"]
    assert type(v) is ProxyObject and isinstance(v, SimArray)
    assert value_of(v) == 1


def test_containers_keep_their_type(arr, make_store):
    s = make_store(device_memory_limit=10 * NB)
    Point = collections.namedtuple("Point", "x y")
    values = {
        "list": [arr(1), "host", 3],
        "tuple": (arr(2), (arr(3), 4)),
        "dict": {"x": arr(4), "y": [5]},
        "named": Point(arr(5), 6),
        "frozen": frozenset({1, 2}),
    }
    for k, v in values.items():
        s[k] = v
    assert type(s["list"]) is list and type(s["list"][0]) is ProxyObject
    assert s["list"][1:] == ["host", 3]
    assert type(s["tuple"]) is tuple and type(s["tuple"][1]) is tuple
    assert value_of(s["tuple"][1][0]) == 3
    assert type(s["dict"]) is dict and s["dict"]["y"] == [5]
    assert type(s["named"]) is Point and s["named"].y == 6
    assert s["frozen"] == frozenset({1, 2})


def test_host_object_passes_through_untouched(dev, make_store):
    from dask.sizeof import sizeof

    s = make_store()
    host = {"a": np.arange(10), "b": "text"}
    s["h"] = host
    assert s["h"] is host
    assert s.tier_of("h") == "host"
    assert s.snapshot().host_bytes == sizeof(host)
    assert s.snapshot().device_bytes == 0 == dev.bytes_in_use()


def test_aliases_are_counted_once(dev, arr, make_store):
    s = make_store()
    a = arr(1)
    s["x"] = a
    s["y"] = a  # the same object under two keys reuses one proxy
    s["z"] = [a[:10], a[10:]]  # views of the same base allocation
    del a
    assert s.snapshot().device_bytes == NB == dev.bytes_in_use()
    assert s["x"] is s["y"]


def test_an_object_stored_again_reuses_its_proxy_whether_its_allocation_is_shared(
    dev, arr, make_store
):
    """A lone array is found through its allocation's holder; once the allocation is shared
    (a view joins it), both objects are found by identity, and again when the view goes."""
    s = make_store()
    a = arr(1)
    s["x"] = a
    s["x1"] = a
    view = a[5:]
    s["v"] = view
    s["v1"] = view
    s["x2"] = a
    assert s["x"] is s["x1"] is s["x2"]
    assert s["v"] is s["v1"] and s["v"] is not s["x"]
    del s["v"], s["v1"]
    s["x3"] = a
    assert s["x3"] is s["x"]
    del a, view
    assert s.snapshot().device_bytes == NB == dev.bytes_in_use()


def test_evicting_an_alias_group_frees_the_memory(dev, arr, make_store):
    s = make_store(device_memory_limit=2 * NB)
    a = arr(1)
    s["x"] = a
    s["view"] = a[5:]
    del a
    s["b"] = arr(2)
    s["c"] = arr(3)  # must spill x and view together: both share one allocation
    snap = s.snapshot()
    assert snap.tiers == {"x": "host", "view": "host", "b": "device", "c": "device"}
    assert snap.device_bytes == 2 * NB == dev.bytes_in_use()
    assert value_of(s["view"]) == 1 and value_of(s["x"]) == 1


def test_limit_holds_after_every_call(dev, arr, make_store):
    s = make_store()
    for i in range(10):
        s[i] = arr(i)
        assert s.snapshot().device_bytes <= 3 * NB
        assert dev.bytes_in_use() <= 3 * NB
    for i in range(10):
        assert value_of(s[i]) == i
        assert dev.bytes_in_use() == s.snapshot().device_bytes <= 3 * NB


def test_value_larger_than_limit_goes_straight_to_host(dev, arr, make_store):
    s = make_store(device_memory_limit=NB)
    s["small"] = arr(1)
    s["big"] = [arr(2), arr(3)]  # 2 * NB > limit
    assert s.snapshot().tiers == {"small": "device", "big": "host"}
    assert dev.bytes_in_use() == NB
    big = s["big"]  # stays on host; each use is a transient copy
    assert s.tier_of("big") == "host"
    assert value_of(big[1]) == 3
    big[0] += 10  # in-place change on a transient copy is written back
    assert value_of(s["big"][0]) == 12
    del big
    assert s.snapshot().device_bytes <= NB
    assert s.tier_of("small") == "device"


def test_overwrite_releases_old_value(dev, arr, make_store):
    s = make_store()
    s["a"] = arr(1)
    s["a"] = arr(2)
    assert s.snapshot().device_bytes == NB == dev.bytes_in_use()
    assert value_of(s["a"]) == 2
    del s["a"]
    assert s.snapshot().device_bytes == 0 == dev.bytes_in_use()
    assert len(s) == 0


def test_stats_report_tiers_and_traffic(arr, make_store):
    s = make_store(device_memory_limit=NB)
    s["a"] = arr(1)
    s["b"] = arr(2)
    st = s.stats()
    assert st["device_keys"] == 1 and st["host_keys"] == 1
    assert st["spilled_bytes"] == NB and st["spill_count"] == 1
    s["a"]
    st = s.stats()
    assert st["unspilled_bytes"] == NB and st["spill_time_s"] > 0


def test_a_value_pickled_in_band_is_sized_by_its_device_bytes(dev, make_store):
    """datetime64 has no buffer protocol, so its host frames are empty (0 bytes): sizing a
    read-back by the frames let an over-limit value back onto the device (found by
    STORE-STATE-002)."""
    s = make_store(device_memory_limit=2 * NB, memory_limit=0)
    times = dev.asarray(np.arange(NB // 8).astype("datetime64[s]"))
    s["big"] = (times, dev.empty(2 * NB // 8, "float64"))  # 3 * NB together: over the limit
    s.evict(10 * NB)
    v = s["big"]
    assert s.tier_of("big") != "device"
    assert s.snapshot().device_bytes <= 2 * NB
    assert (v[0].view(np.ndarray) == np.arange(NB // 8).astype("datetime64[s]")).all()
    del v, times
    s["t"] = dev.asarray(np.arange(2 * NB // 8).astype("timedelta64[ns]"))
    s["u"] = dev.asarray(np.arange(2 * NB // 8).astype("timedelta64[ns]"))  # evicts "t"
    assert s.stats()["spilled_bytes"] >= 2 * NB  # counted in device bytes, not frame bytes
    s["t"]
    assert s.snapshot().device_bytes == 2 * NB == dev.bytes_in_use()


def test_a_dropped_store_frees_device_memory_without_the_collector(dev, arr, tmp_path):
    """Its bookkeeping holds no reference cycle, so nothing waits for the cyclic GC."""
    from reference_impl import ProxifyHostFile

    gc.collect()
    before = dev.bytes_in_use()
    s = ProxifyHostFile(device=dev, device_memory_limit=3 * NB, local_directory=str(tmp_path))
    s["a"] = arr(1)
    s["b"] = [arr(2), arr(3)]
    s["c"] = s["a"]  # one proxy under two keys
    s.evict(NB)
    assert dev.bytes_in_use() > before
    gc.disable()
    try:
        del s
        assert dev.bytes_in_use() == before
    finally:
        gc.enable()


def test_a_host_object_under_several_keys_outlives_each_of_them(dev, make_store):
    """One host object under three keys (SPEC 3.2): counted once, one file on disk, one
    object when read back; each key deleted in turn, owner first, leaves the rest counted
    and readable, and the last one takes the file with it."""
    import os

    from store_invariants import check_store

    x = list(range(5_000))
    s = make_store(memory_limit=None)
    s["a"] = x
    one = s.host_bytes
    s["b"] = x
    s["c"] = x
    assert s.host_bytes == one and set(s.snapshot().tiers.values()) == {"host"}
    check_store(s, dev.bytes_in_use())
    del s["a"]  # the owner goes: its peers keep the value, counted once
    assert s.host_bytes == one and s["b"] is x and s["c"] is x
    s.memory_limit = 0  # all to disk (on the next call): one file for both keys
    s.evict(1)
    assert set(s.snapshot().tiers.values()) == {"disk"} and len(os.listdir(s.spill_dir)) == 1
    check_store(s, dev.bytes_in_use())
    s.memory_limit = None
    b = s["b"]
    assert b == x and b is not x and s["c"] is b  # read back once, one object for both keys
    check_store(s, dev.bytes_in_use())
    s.memory_limit = 0
    s.evict(1)
    del s["b"]  # a peer goes while on disk: the file stays for the other
    assert len(os.listdir(s.spill_dir)) == 1 and s.stats()["disk_keys"] == 1
    check_store(s, dev.bytes_in_use())
    del s["c"]
    snap = s.snapshot()
    assert (snap.host_bytes, snap.disk_bytes, os.listdir(s.spill_dir)) == (0, 0, [])
    check_store(s, dev.bytes_in_use())


def test_reading_one_key_of_a_host_object_is_a_use_of_it_under_every_key(dev, make_store):
    """LRU order (SPEC 5.x) for peers: reading ``b`` refreshes the object it shares with
    ``a``, so the next value to arrive pushes out the older ``y``, not the object just used
    (which, by ``a``'s older place, would go to disk with both its keys)."""
    from dask.sizeof import sizeof

    x, y, z = list(range(5_000)), list(range(5_000, 10_000)), list(range(10_000, 15_000))
    s = make_store(memory_limit=int(2.5 * sizeof(x)))  # room for two of them, not three
    s["a"] = x
    s["b"] = x
    s["c"] = y
    assert s["b"] is x
    s["d"] = z
    assert s.snapshot().tiers == {"a": "host", "b": "host", "c": "disk", "d": "host"}


def test_when_the_owner_goes_the_totals_count_the_next_keys_measure(dev, make_store):
    """A host object's bytes are counted through one key, its owner. An object that grew in
    place between two sets has two measures; once the owner goes, the totals hold the
    remaining key's, as if it had been stored alone."""
    from dask.sizeof import sizeof

    x = list(range(100))
    s = make_store(memory_limit=None)
    s["a"] = x
    x.extend(range(10_000))  # in place, unseen by the store
    s["b"] = x  # the same object: a peer, measured now
    del s["a"]
    assert s.host_bytes == sizeof(x)
