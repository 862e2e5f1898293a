"""SPEC section 7: externals are weakly tracked, counted once, spillable, and rejected across stores."""

from __future__ import annotations

import gc

import pytest

from conftest import NB, value_of
from reference_impl import ProxyObject, SimArray


def test_external_counts_and_is_forgotten_on_del(dev, arr, make_store):
    s = make_store()
    p = s.register_external(arr(5))
    assert type(p) is ProxyObject and isinstance(p, SimArray)
    snap = s.snapshot()
    assert snap.device_bytes == NB == dev.bytes_in_use()
    assert snap.n_externals == 1 and len(s) == 0 and snap.tiers == {}
    del p
    assert dev.bytes_in_use() == 0  # the store held it only weakly
    snap = s.snapshot()
    assert snap.device_bytes == 0 and snap.n_externals == 0


def test_external_container_is_proxified(arr, make_store):
    s = make_store()
    out = s.register_external({"a": [arr(1), "meta"], "b": (arr(2),)})
    assert type(out["a"][0]) is ProxyObject and out["a"][1] == "meta"
    assert s.snapshot().n_externals == 2
    host = s.register_external("just host")
    assert host == "just host" and s.snapshot().n_externals == 2


def test_externals_are_evicted_and_come_back(dev, arr, make_store):
    s = make_store()
    ext = s.register_external(arr(9))
    for k in "abc":
        s[k] = arr(1)
    assert "host" in repr(ext)  # the least recent unit was the external
    assert s.snapshot().host_bytes > NB
    assert value_of(ext) == 9  # use unspills it, making room first
    assert "device" in repr(ext) and s.snapshot().device_bytes == 3 * NB == dev.bytes_in_use()


def test_spilled_external_forgotten_removes_host_and_disk_bytes(arr, make_store):
    s = make_store(device_memory_limit=0, memory_limit=0)
    ext = s.register_external(arr(1))
    snap = s.snapshot()
    assert snap.disk_bytes > NB and snap.device_bytes == 0
    import os

    assert len(os.listdir(s.spill_dir)) == 1
    del ext
    snap = s.snapshot()
    assert snap.disk_bytes == 0 and snap.host_bytes == 0 and snap.n_externals == 0
    assert os.listdir(s.spill_dir) == []


def test_storing_an_external_never_counts_twice(dev, arr, make_store):
    s = make_store()
    ext = s.register_external(arr(3))
    s["k"] = ext
    snap = s.snapshot()
    assert snap.device_bytes == NB == dev.bytes_in_use() and snap.n_externals == 0
    a = arr(4)
    s["raw"] = a
    again = s.register_external(a)  # the raw object behind a stored proxy
    assert again is s["raw"]
    del a
    assert s.snapshot().device_bytes == 2 * NB == dev.bytes_in_use()


def test_deleted_key_still_referenced_becomes_external(dev, arr, make_store):
    s = make_store()
    s["k"] = arr(1)
    held = s["k"]
    del s["k"]
    snap = s.snapshot()
    assert snap.n_externals == 1 and snap.device_bytes == NB == dev.bytes_in_use()
    del held
    assert s.snapshot().device_bytes == 0 == dev.bytes_in_use()


def test_proxy_of_another_store_is_rejected(arr, make_store):
    s1, s2 = make_store(), make_store()
    p = s1.register_external(arr(1))
    with pytest.raises(ValueError, match="already managed by another ProxifyHostFile"):
        s2.register_external(p)
    with pytest.raises(ValueError, match="already managed by another ProxifyHostFile"):
        s2["k"] = [p]
    assert len(s2) == 0 and s2.snapshot().device_bytes == 0
    assert s1.snapshot().n_externals == 1 and value_of(p) == 1


def test_proxy_of_a_closed_store_can_be_adopted(dev, arr, make_store):
    s1, s2 = make_store(), make_store()
    p = s1.register_external(arr(1))
    s1.close()
    s2["k"] = p
    assert s2.snapshot().device_bytes == NB == dev.bytes_in_use()


def test_external_in_a_reference_cycle_is_forgotten_at_gc(arr, make_store):
    s = make_store()

    class Holder:
        pass

    h = Holder()
    h.me = h
    h.p = s.register_external(arr(1))
    del h
    gc.collect()
    assert s.snapshot().n_externals == 0 and s.snapshot().device_bytes == 0
