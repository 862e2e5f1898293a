"""SPEC section 8: spill on demand through the device's OOM handler, honouring memory_limit."""

from __future__ import annotations

import pytest

from conftest import NB, value_of
from reference_impl import DeviceOutOfMemoryError, ProxifyHostFile, get_device


def test_allocation_outside_the_store_spills_on_demand(tmp_path, arr):
    dev = get_device("sim", 4 * NB)
    with ProxifyHostFile(
        device=dev, device_memory_limit=4 * NB, local_directory=str(tmp_path)
    ) as s:
        for k in "abcd":
            a = dev.empty(NB // 8)
            a.view("float64")[:] = 1
            s[k] = a
            del a
        assert dev.bytes_in_use() == 4 * NB
        outside = dev.empty(2 * NB // 8)  # does not fit: the store spills a and b
        assert s.snapshot().tiers == {"a": "host", "b": "host", "c": "device", "d": "device"}
        assert s.stats()["oom_calls"] >= 1
        del outside
        assert value_of(s["a"]) == 1


def test_oom_handler_honours_memory_limit(tmp_path):
    dev = get_device("sim", 2 * NB)
    with ProxifyHostFile(
        device=dev, device_memory_limit=2 * NB, memory_limit=0, local_directory=str(tmp_path)
    ) as s:
        s["a"] = dev.zeros(NB // 8)
        s["b"] = dev.zeros(NB // 8)
        outside = dev.empty(NB // 8)
        snap = s.snapshot()
        assert snap.tiers["a"] == "disk" and snap.host_bytes == 0  # cascaded, not left on host
        del outside


def test_oom_loop_ends_when_nothing_can_be_freed(tmp_path):
    dev = get_device("sim", 2 * NB)
    with ProxifyHostFile(
        device=dev, device_memory_limit=2 * NB, local_directory=str(tmp_path)
    ) as s:
        a = dev.zeros(NB // 8)
        s["a"] = a  # the caller keeps `a`: spilling it frees no real memory
        b = dev.zeros(NB // 8)
        with pytest.raises(DeviceOutOfMemoryError, match="cannot allocate"):
            dev.empty(NB // 8)
        assert s.tier_of("a") == "host"
        del b
        assert float(s["a"][0]) == 0
        del a


def test_close_removes_the_oom_handler(tmp_path):
    dev = get_device("sim", NB)
    s = ProxifyHostFile(device=dev, device_memory_limit=NB, local_directory=str(tmp_path))
    assert len(dev._ledger.oom_handlers) == 1
    s.close()
    assert len(dev._ledger.oom_handlers) == 0


def test_spill_on_demand_can_be_disabled(tmp_path):
    dev = get_device("sim", NB)
    with ProxifyHostFile(
        device=dev, device_memory_limit=NB, spill_on_demand=False, local_directory=str(tmp_path)
    ) as s:
        assert len(dev._ledger.oom_handlers) == 0
        s["a"] = dev.zeros(NB // 8)
        with pytest.raises(DeviceOutOfMemoryError):
            dev.empty(1)
        assert s.tier_of("a") == "device"
