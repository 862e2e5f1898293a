"""The Device protocol on the real GPU (CudaDevice), next to the same checks on sim.

``anydev`` is a SimDevice and a CudaDevice over the whole GPU; the cuda case is skipped
without a GPU (failed under PROXIFY_REQUIRE_GPU=1, as ci/gpu_check.sh runs it).
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

from reference_impl.device import Device, DeviceOutOfMemoryError, SimDevice


@pytest.fixture(params=["sim", "cuda"])
def anydev(request):
    if request.param == "sim":
        return SimDevice("1 GiB")
    return request.getfixturevalue("gpu")


def settle():
    gc.collect()


def test_satisfies_the_protocol(anydev):
    assert isinstance(anydev, Device)
    assert anydev.kind in ("sim", "cuda")


def test_empty_is_measured_and_returned_when_freed(anydev):
    settle()
    base = anydev.bytes_in_use()
    x = anydev.empty((1000, 3), "float64")
    assert anydev.is_device_array(x) and x.shape == (1000, 3) and x.dtype == np.float64
    assert anydev.bytes_in_use() - base >= 24_000
    view = x[10:20]
    assert anydev.allocation_of(view)[0] == anydev.allocation_of(x)[0]
    del x, view
    settle()
    assert anydev.bytes_in_use() == base


def test_round_trip_and_transfer_counters(anydev):
    data = np.arange(50_000, dtype=np.int64)
    h2d, d2h = anydev.h2d_bytes, anydev.d2h_bytes
    x = anydev.asarray(data)
    back = anydev.to_host(x)
    assert isinstance(back, np.ndarray) and not anydev.is_device_array(back)
    np.testing.assert_array_equal(back, data)
    assert anydev.h2d_bytes - h2d == data.nbytes and anydev.d2h_bytes - d2h == data.nbytes
    assert anydev.asarray(x) is x  # already there: no copy


def test_peak_and_reset(anydev):
    settle()
    anydev.reset_peak()
    base = anydev.bytes_in_use()
    x = anydev.empty(1 << 20, "uint8")
    del x
    settle()
    assert anydev.peak_bytes() >= base + (1 << 20)
    anydev.reset_peak()
    assert anydev.peak_bytes() < base + (1 << 20)


def test_capacity_asks_handlers_for_the_shortfall_then_raises(anydev):
    settle()
    base = anydev.bytes_in_use()
    if anydev.kind == "sim":
        dev = SimDevice(base + 4 * 2**20)
    else:
        from reference_impl.device import CudaDevice

        dev = CudaDevice(base + 4 * 2**20)
    held = [dev.empty(3 * 2**20, "uint8")]
    asked = []

    def handler(shortfall):
        asked.append(shortfall)
        freed = bool(held)
        held.clear()
        gc.collect()
        return freed

    dev.add_oom_handler(handler)
    try:
        y = dev.empty(2 * 2**20, "uint8")  # over by 1 MiB: the handler frees 3 MiB
        assert asked and asked[0] >= 2**20 - 4096, asked
        with pytest.raises(DeviceOutOfMemoryError):
            dev.empty(5 * 2**20, "uint8")
        del y
    finally:
        dev.remove_oom_handler(handler)
    settle()
    assert dev.bytes_in_use() == base


@pytest.mark.parametrize("shape, dtype", [(-1, "uint8"), ((2, -3), "float64"), (4, "object")])
def test_bad_empty_raises_before_allocating(anydev, shape, dtype):
    settle()
    base = anydev.bytes_in_use()
    with pytest.raises((ValueError, TypeError)):
        anydev.empty(shape, dtype)
    assert anydev.bytes_in_use() == base
