"""CudaDevice's accounting, on fake ``cupy`` and ``rmm`` modules (no GPU, no RMM needed).

The fakes keep what matters here: CuPy allocates through the allocator set with
``cupy.cuda.set_allocator``; RMM's allocator allocates from the current device
resource; a resource adaptor wraps an upstream; the "GPU" (the innermost resource) has
a fixed number of bytes and raises MemoryError past them; the failure-callback adaptor
retries while its callback returns True.
"""

from __future__ import annotations

import gc
import sys
import types
import weakref

import numpy as np
import pytest

from reference_impl.device import DeviceOutOfMemoryError
from reference_impl.device import cuda as cuda_mod

GPU_BYTES = 1 << 20


class FakeGpu:
    """The innermost resource: ``GPU_BYTES`` of memory."""

    def __init__(self, size: int) -> None:
        self.size, self.used = size, 0

    def allocate(self, nbytes: int) -> int:
        if self.used + nbytes > self.size:
            raise MemoryError(f"out of memory: {nbytes} bytes")
        self.used += nbytes
        return nbytes

    def deallocate(self, nbytes: int) -> None:
        self.used -= nbytes


class Statistics:
    def __init__(self, upstream) -> None:
        self.upstream, self.current, self.peak = upstream, 0, 0

    def allocate(self, nbytes: int) -> int:
        self.upstream.allocate(nbytes)
        self.current += nbytes
        self.peak = max(self.peak, self.current)
        return nbytes

    def deallocate(self, nbytes: int) -> None:
        self.upstream.deallocate(nbytes)
        self.current -= nbytes

    @property
    def allocation_counts(self) -> dict:
        return {"current_bytes": self.current, "peak_bytes": self.peak}


class FailureCallback:
    def __init__(self, upstream, callback) -> None:
        self.upstream, self.callback = upstream, callback

    def allocate(self, nbytes: int) -> int:
        while True:
            try:
                return self.upstream.allocate(nbytes)
            except MemoryError:
                if not self.callback(nbytes):
                    raise

    def deallocate(self, nbytes: int) -> None:
        self.upstream.deallocate(nbytes)


class Limiting:  # what CudaDevice used to stack on every construction
    def __init__(self, upstream, limit) -> None:
        self.upstream, self.limit = upstream, limit


class FakeArray(np.ndarray):
    pass


@pytest.fixture
def fakes(monkeypatch):
    """Fake ``cupy`` and ``rmm`` in ``sys.modules``; a fresh process-wide registry."""
    state = types.SimpleNamespace(gpu=FakeGpu(GPU_BYTES), installs=[], allocator=None)
    state.current = state.gpu

    def rmm_cupy_allocator(nbytes):
        mr = state.current
        mr.allocate(nbytes)
        return (mr, nbytes)

    def empty(dims, dtype):
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
        mr, n = state.allocator(nbytes)
        arr = np.zeros(dims, dtype).view(FakeArray)
        weakref.finalize(arr, mr.deallocate, n)
        return arr

    def set_current(mr):
        state.installs.append(mr)
        state.current = mr

    cupy = types.ModuleType("cupy")
    cupy.ndarray = FakeArray
    cupy.empty = empty
    cupy.asnumpy = lambda a: np.array(a).view(np.ndarray)

    def asarray(data, dtype=None):
        host = np.asarray(data, dtype=dtype)
        out = empty(host.shape, host.dtype)
        out[...] = host
        return out

    cupy.asarray = asarray
    device = types.SimpleNamespace(use=lambda: None, mem_info=(GPU_BYTES, GPU_BYTES))
    cupy.cuda = types.SimpleNamespace(
        Device=lambda i=0: device,
        runtime=types.SimpleNamespace(getDeviceCount=lambda: 1, deviceSynchronize=lambda: None),
        set_allocator=lambda fn: setattr(state, "allocator", fn),
    )
    rmm = types.ModuleType("rmm")
    rmm.mr = types.SimpleNamespace(
        get_current_device_resource=lambda: state.current,
        set_current_device_resource=set_current,
        StatisticsResourceAdaptor=Statistics,
        FailureCallbackResourceAdaptor=FailureCallback,
        LimitingResourceAdaptor=Limiting,
    )
    allocators = types.ModuleType("rmm.allocators")
    rmm_cupy = types.ModuleType("rmm.allocators.cupy")
    rmm_cupy.rmm_cupy_allocator = rmm_cupy_allocator
    for name, mod in {"cupy": cupy, "rmm": rmm, "rmm.allocators": allocators,
                      "rmm.allocators.cupy": rmm_cupy}.items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(cuda_mod, "_ACCOUNTING", {})
    yield state
    gc.collect()


def test_rmm_adaptors_are_installed_once_per_process_per_gpu(fakes):
    devices = [cuda_mod.CudaDevice(cap) for cap in ("4 KiB", "64 KiB", None, "4 KiB", "1 KiB")]
    assert all(d.allocator == "rmm" for d in devices)
    assert len(fakes.installs) == 1, fakes.installs
    (resource,) = fakes.installs
    # statistics + failure callback straight over the GPU's own resource, nothing stacked
    assert isinstance(resource, FailureCallback) and isinstance(resource.upstream, Statistics)
    assert resource.upstream.upstream is fakes.gpu
    assert len({id(d._acct) for d in devices}) == 1
    assert devices[2].capacity == GPU_BYTES


def test_second_gpu_gets_its_own_accounting(fakes):
    a = cuda_mod.CudaDevice("4 KiB", device_id=0)
    b = cuda_mod.CudaDevice("4 KiB", device_id=1)
    c = cuda_mod.CudaDevice("8 KiB", device_id=1)
    assert a._acct is not b._acct and b._acct is c._acct and len(fakes.installs) == 2


def test_bytes_are_measured_and_shared_by_the_devices_of_one_gpu(fakes):
    a, b = cuda_mod.CudaDevice("64 KiB"), cuda_mod.CudaDevice("32 KiB")
    x = a.empty(1000, "uint8")
    y = b.asarray(np.arange(100, dtype=np.int64))
    assert a.bytes_in_use() == b.bytes_in_use() == 1800
    assert a.h2d_bytes == 0 and b.h2d_bytes == 800
    del x, y
    gc.collect()
    assert a.bytes_in_use() == 0 and a.peak_bytes() == 1800


def test_capacity_asks_the_handlers_for_the_shortfall_then_raises(fakes):
    dev = cuda_mod.CudaDevice(1000)
    held = [dev.empty(600, "uint8")]
    asked = []

    def handler(shortfall):
        asked.append(shortfall)
        if held:
            held.clear()
            gc.collect()
            return True
        return False

    dev.add_oom_handler(handler)
    z = dev.empty(500, "uint8")  # 600 + 500 > 1000: the handler frees 600
    assert asked == [100] and dev.bytes_in_use() == 500
    with pytest.raises(DeviceOutOfMemoryError) as err:
        dev.empty(501, "uint8")
    assert asked == [100, 1] and "501" in str(err.value)
    assert dev.bytes_in_use() == 500 and len(fakes.installs) == 1
    del z


def test_a_real_gpu_oom_goes_through_rmm_to_every_live_device_on_that_gpu(fakes):
    # capacities above the (fake) GPU's memory: only RMM's failure callback can fire
    old, new = cuda_mod.CudaDevice(2 * GPU_BYTES), cuda_mod.CudaDevice(2 * GPU_BYTES)
    hog = [old.empty(GPU_BYTES - 100, "uint8")]
    asked = []

    def spill(nbytes):  # the old device's store spills
        asked.append(("old", nbytes))
        freed = bool(hog)
        hog.clear()
        gc.collect()
        return freed

    old.add_oom_handler(spill)
    new.add_oom_handler(lambda n: asked.append(("new", n)) or False)
    arr = new.empty(200, "uint8")
    assert arr.nbytes == 200
    assert asked == [("new", 200), ("old", 200)]  # newest device first, the bytes asked for
    assert new.bytes_in_use() == 200


def test_a_gpu_oom_nobody_can_free_is_a_device_oom_error(fakes):
    dev = cuda_mod.CudaDevice(2 * GPU_BYTES)
    keep = dev.empty(GPU_BYTES, "uint8")
    dev.add_oom_handler(lambda n: False)
    with pytest.raises(DeviceOutOfMemoryError):
        dev.empty(1, "uint8")
    assert dev.bytes_in_use() == GPU_BYTES
    del keep


def test_without_rmm_one_cupy_pool_per_gpu(fakes, monkeypatch):
    monkeypatch.setitem(sys.modules, "rmm", None)  # import rmm -> ImportError
    pools = []

    class Pool:
        def __init__(self):
            pools.append(self)

        def malloc(self, nbytes):
            return fakes.gpu.allocate(nbytes) and (fakes.gpu, nbytes)

        def used_bytes(self):
            return fakes.gpu.used

    sys.modules["cupy"].cuda.MemoryPool = Pool
    devices = [cuda_mod.CudaDevice(cap) for cap in (1000, 2000, 1000)]
    assert len(pools) == 1 and {d.allocator for d in devices} == {"cupy-pool"}
    x = devices[0].empty(900, "uint8")
    with pytest.raises(DeviceOutOfMemoryError):
        devices[2].empty(200, "uint8")  # capacity 1000, 900 in use
    y = devices[1].empty(200, "uint8")  # capacity 2000
    assert devices[0].bytes_in_use() == 1100
    del x, y
