"""CudaDevice: the Device protocol over CuPy arrays, accounted by RMM when present.

Importing this module never touches CUDA; constructing a CudaDevice does, and
fails with :class:`DeviceUnavailableError` on a machine without a usable GPU.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any

from . import defaults
from .common import TransferCounters, check_dtype, check_shape
from .errors import DeviceOutOfMemoryError, DeviceUnavailableError
from .ledger import MAX_OOM_RETRIES
from .oom import OomHandler, OomHandlers
from .sizes import parse_bytes


def cuda_available() -> bool:
    """True when CuPy imports and sees at least one GPU."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def _import_cupy():
    try:
        import cupy
    except ImportError as exc:
        raise DeviceUnavailableError(
            "the cuda device needs CuPy; install the 'gpu' extra (CUDA 12) or 'gpu-cu13' "
            "(CUDA 13): pip install 'proxify-conformance[gpu-cu13]'"
        ) from exc
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        raise DeviceUnavailableError(f"CuPy cannot reach a GPU: {exc}") from exc
    if count == 0:
        raise DeviceUnavailableError("CuPy sees no GPU on this machine")
    return cupy


def require_cuda() -> None:
    """Raise :class:`DeviceUnavailableError` saying why the cuda device cannot be made here
    (CuPy missing, no GPU); return where it can."""
    _import_cupy()


class _RmmAccounting:
    """RMM's statistics and failure-callback adaptors over one GPU's resource.

    Built and installed once per process per GPU (:func:`_accounting`), however many
    CudaDevices are made: wrapping the current resource on every construction would
    pile adaptors up over a test run. The capacity of each CudaDevice is therefore
    not an RMM limit; it is checked by the device before each of its allocations,
    against the bytes these statistics measured. The failure callback (a real
    out-of-memory on the GPU) asks the OOM handlers of every live CudaDevice on
    this GPU, newest first, for the requested bytes.
    """

    allocator = "rmm"

    def __init__(self, device_id: int):
        import cupy
        import rmm
        from rmm.allocators.cupy import rmm_cupy_allocator

        self.device_id = device_id
        self.devices: weakref.WeakValueDictionary[int, CudaDevice] = (
            weakref.WeakValueDictionary())
        self._serial = itertools.count()
        self._retries = 0
        self.upstream = rmm.mr.get_current_device_resource()
        self._stats = rmm.mr.StatisticsResourceAdaptor(self.upstream)
        self.resource = rmm.mr.FailureCallbackResourceAdaptor(self._stats, self._on_failure)
        rmm.mr.set_current_device_resource(self.resource)
        cupy.cuda.set_allocator(rmm_cupy_allocator)

    def attach(self, device: CudaDevice) -> None:
        self.devices[next(self._serial)] = device

    def _on_failure(self, nbytes: int) -> bool:
        """RMM's failure callback: True to retry the allocation."""
        devices = [d for _, d in sorted(self.devices.items(), reverse=True)]
        freed = self._retries < MAX_OOM_RETRIES and any(d._oom.free(max(1, int(nbytes)))
                                                        for d in devices)
        self._retries = self._retries + 1 if freed else 0
        return freed

    def in_use(self) -> int:
        return int(self._stats.allocation_counts["current_bytes"])

    def peak(self) -> int:
        return int(self._stats.allocation_counts["peak_bytes"])


class _PoolAccounting:
    """Fallback without RMM: one CuPy memory pool per process per GPU."""

    allocator = "cupy-pool"

    def __init__(self, device_id: int):
        import cupy

        self.device_id = device_id
        self._pool = cupy.cuda.MemoryPool()
        cupy.cuda.set_allocator(self._pool.malloc)
        self._peak = 0

    def attach(self, device: CudaDevice) -> None:
        pass

    def in_use(self) -> int:
        used = int(self._pool.used_bytes())
        self._peak = max(self._peak, used)
        return used

    def peak(self) -> int:
        return max(self._peak, self.in_use())


_ACCOUNTING: dict[int, Any] = {}  # GPU id -> its process-wide accounting
_ACCOUNTING_LOCK = threading.Lock()


def _accounting(device_id: int) -> Any:
    """This process's accounting for GPU ``device_id``: RMM's adaptors where RMM is
    installed, else a CuPy pool; built and installed on first use only."""
    with _ACCOUNTING_LOCK:
        acct = _ACCOUNTING.get(device_id)
        if acct is None:
            try:
                acct = _RmmAccounting(device_id)
            except ImportError:
                acct = _PoolAccounting(device_id)
            _ACCOUNTING[device_id] = acct
        return acct


class CudaDevice(TransferCounters):
    """A real GPU. ``bytes_in_use`` is what the allocator measured.

    Every CudaDevice of one GPU in a process shares that GPU's accounting (see
    :class:`_RmmAccounting`): ``bytes_in_use`` is the process's bytes on the GPU,
    and ``capacity`` bounds them for allocations made through this device.
    """

    kind = "cuda"

    def __init__(self, capacity: int | str | None = None, *, device_id: int = 0):
        self._cp = cp = _import_cupy()
        cp.cuda.Device(device_id).use()
        total = cp.cuda.Device(device_id).mem_info[1]
        self.capacity = parse_bytes(capacity, what="device capacity") if capacity else int(total)
        self.name = f"cuda:{device_id}"
        self.device_id = device_id
        self._oom = OomHandlers()
        super().__init__()
        self._peak_at_reset = 0
        self._use_at_reset = 0
        self._acct: Any = _accounting(device_id)
        self._acct.attach(self)
        self.allocator = self._acct.allocator

    def __repr__(self) -> str:
        return f"<CudaDevice {self.name} ({self.allocator}) {self.bytes_in_use():,}/{self.capacity:,}>"

    def _with_oom_retry(self, make, nbytes: int):
        """One allocation, ending in :class:`DeviceOutOfMemoryError` like the sim device.

        The capacity is checked first, against the measured bytes: over it, the
        handlers are asked for the shortfall. A real out-of-memory on the GPU has
        already asked them under RMM (its failure callback); the CuPy-pool
        fallback asks them here, emulating that callback.
        """
        for _ in range(MAX_OOM_RETRIES):
            in_use = self._acct.in_use()
            shortfall = in_use + nbytes - self.capacity
            if shortfall > 0:
                if self._oom.free(shortfall):
                    continue
                raise DeviceOutOfMemoryError(nbytes, in_use, self.capacity, self.name)
            try:
                return make()
            except MemoryError as exc:
                if self.allocator == "rmm" or not self._oom.free(max(1, nbytes)):
                    raise DeviceOutOfMemoryError(
                        nbytes, self._acct.in_use(), self.capacity, self.name
                    ) from exc
        raise DeviceOutOfMemoryError(nbytes, self._acct.in_use(), self.capacity, self.name)

    def empty(self, shape: int | tuple[int, ...], dtype: Any = "float64") -> Any:
        import numpy as np

        dtype = check_dtype(dtype)
        dims = check_shape(shape)
        nbytes = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
        return self._with_oom_retry(lambda: self._cp.empty(dims, dtype=dtype), nbytes)

    def asarray(self, data: Any, dtype: Any = None) -> Any:
        cp = self._cp
        if isinstance(data, cp.ndarray) and dtype in (None, data.dtype):
            return data
        nbytes = int(getattr(data, "nbytes", 0))
        arr = self._with_oom_retry(lambda: cp.asarray(data, dtype=dtype), nbytes)
        self._count_h2d(arr.nbytes)
        return arr

    def to_host(self, arr: Any) -> Any:
        host = self._cp.asnumpy(arr)
        self._count_d2h(host.nbytes)
        return host

    def is_device_array(self, obj: Any) -> bool:
        return isinstance(obj, self._cp.ndarray)

    def allocation_of(self, arr: Any) -> tuple[int, int]:
        if not isinstance(arr, self._cp.ndarray):
            raise TypeError(f"{type(arr).__name__} is not a CuPy array of {self.name}")
        mem = arr.data.mem
        return int(mem.ptr), int(mem.size)

    def bytes_in_use(self) -> int:
        self._cp.cuda.runtime.deviceSynchronize()
        return self._acct.in_use()

    def peak_bytes(self) -> int:
        # The allocator's peak is all-time. Once it rises past its value at the
        # last reset, it is the exact peak since then; before that we only know
        # a lower bound, the larger of the usage then and now.
        peak = self._acct.peak()
        if peak > self._peak_at_reset:
            return peak
        return max(self._use_at_reset, self.bytes_in_use())

    def reset_peak(self) -> None:
        self._peak_at_reset = self._acct.peak()
        self._use_at_reset = self.bytes_in_use()

    def add_oom_handler(self, handler: OomHandler) -> None:
        self._oom.add(handler)

    def remove_oom_handler(self, handler: OomHandler) -> None:
        self._oom.remove(handler)


def default_cuda_device() -> CudaDevice:
    """This process's GPU device: the one set with ``set_default_device`` if it is a
    CudaDevice, else one made on first use (the whole GPU): where a CUDA table from
    another process lands, so one process drives one GPU through one accounting stack."""
    return defaults.process_device("cuda", CudaDevice)
