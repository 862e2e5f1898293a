"""SimDevice: an exact, CPU-resident stand-in for a GPU.

Every device byte lives in host RAM but is recorded in a :class:`ByteLedger`
with a hard capacity, so CPU-only CI can check GPU memory semantics exactly.
Arrays are :class:`SimArray` (a ``numpy.ndarray`` subclass); the ledger follows
the *base allocation*, so views and slices are counted once and the bytes come
back the moment the last view is collected.
"""

from __future__ import annotations

import itertools
import os
import threading
import uuid
import weakref
from typing import Any

import numpy as np

from . import defaults
from .common import TransferCounters, check_dtype, check_shape
from .ledger import ByteLedger
from .oom import OomHandler
from .sizes import parse_bytes

DEFAULT_SIM_CAPACITY = "16 GiB"
_CAPACITY_ENV = "PROXIFY_SIM_CAPACITY"

_devices: weakref.WeakValueDictionary[str, SimDevice] = weakref.WeakValueDictionary()
# Set while wrapping a numpy result, so the new SimArray knows its device.
_wrapping = threading.local()


class _Allocation:
    """One base allocation: the unit the ledger counts and stores deduplicate by."""

    __slots__ = ("id", "nbytes", "device", "owner_ref", "__weakref__")

    def __init__(self, alloc_id: int, nbytes: int, device: SimDevice, owner: np.ndarray):
        self.id = alloc_id
        self.nbytes = nbytes
        self.device = device
        self.owner_ref = weakref.ref(owner)


def _owner_of(arr: np.ndarray) -> np.ndarray:
    """The last ndarray on the ``.base`` chain: the array that owns the memory."""
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


def _unwrap(value: Any) -> Any:
    if isinstance(value, SimArray):
        return value.view(np.ndarray)
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v) for v in value)
    return value


def _wrap(value: Any, device: SimDevice | None) -> Any:
    """Put numpy results back on ``device``: device in, device out (CuPy's rule)."""
    if isinstance(value, np.ndarray) and not isinstance(value, SimArray) and device is not None:
        _wrapping.device = device
        try:
            return value.view(SimArray)
        finally:
            _wrapping.device = None
    if isinstance(value, tuple):
        return tuple(_wrap(v, device) for v in value)
    if isinstance(value, list):
        return [_wrap(v, device) for v in value]
    return value


def _rebuild_sim_array(device_token: str, host: np.ndarray, dtype: str | None = None) -> SimArray:
    """Unpickle onto the original device, or onto this process's default one.

    ``dtype`` is carried beside the array because numpy's pickle protocols below 5
    turn a non-native byte order into the native one (``>u8`` comes back as ``<u8``).
    """
    if dtype is not None and host.dtype.str != dtype:
        host = host.astype(np.dtype(dtype), order="K")  # same values, byte order restored
    return sim_device_for(device_token).asarray(host)


class SimArray(np.ndarray):
    """A device array of a :class:`SimDevice`.

    New results (ufuncs, reductions to arrays, ``np.concatenate``, copies,
    fancy indexing) are allocated on the same device; views share their base.
    """

    _alloc: _Allocation | None = None

    def __array_finalize__(self, obj: Any) -> None:
        if obj is None:  # explicit construction: the device sets _alloc itself
            return
        owner = _owner_of(self)
        parent = getattr(obj, "_alloc", None)
        if parent is not None and parent.owner_ref() is owner:
            self._alloc = parent  # a view: same base allocation, counted once
            return
        device = parent.device if parent is not None else getattr(_wrapping, "device", None)
        self._alloc = device._track(owner) if device is not None else None

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        device = self.device
        if out is not None:
            kwargs["out"] = tuple(_unwrap(o) for o in out)
        result = getattr(ufunc, method)(*_unwrap(inputs), **kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else out
        return _wrap(result, device)

    def __array_function__(self, func, types, args, kwargs):
        result = func(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()})
        return _wrap(result, self.device)

    def __reduce_ex__(self, protocol):
        device = self.device
        if device is None:
            return np.ndarray.__reduce_ex__(self.view(np.ndarray), protocol)
        return _rebuild_sim_array, (device.token, device.to_host(self), self.dtype.str)

    def __repr__(self) -> str:
        return f"SimArray({np.array2string(self.view(np.ndarray), separator=', ')}, dtype={self.dtype})"

    __str__ = __repr__

    @property
    def device(self) -> SimDevice | None:
        alloc = self._alloc
        return alloc.device if alloc is not None else None


class SimDevice(TransferCounters):
    """A simulated GPU with an exact, thread-safe byte ledger.

    ``capacity`` accepts ints or strings like ``"2 GiB"``.
    """

    kind = "sim"

    def __init__(self, capacity: int | str = DEFAULT_SIM_CAPACITY, *, name: str | None = None):
        self.capacity = parse_bytes(capacity, what="device capacity")
        self.token = f"sim-{uuid.uuid4().hex}"
        self.name = name or f"sim:{self.token[4:12]}"
        self._ledger = ByteLedger(self.capacity, self.name)
        self._registry: dict[int, _Allocation] = {}
        self._registry_lock = threading.Lock()
        self._ids = itertools.count(1)
        super().__init__()
        _devices[self.token] = self

    def __repr__(self) -> str:
        return (
            f"<SimDevice {self.name} {self.bytes_in_use():,}/{self.capacity:,} bytes "
            f"peak={self.peak_bytes():,}>"
        )

    # --- allocation -------------------------------------------------------
    def empty(self, shape: int | tuple[int, ...], dtype: Any = np.float64) -> SimArray:
        """Allocate an uninitialised device array."""
        dtype = check_dtype(dtype)
        shape = check_shape(shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        self._ledger.reserve(nbytes)
        try:
            raw = np.empty(nbytes, dtype=np.uint8)
            alloc = self._register(raw, nbytes)
        except BaseException:
            self._ledger.release(nbytes)
            raise
        arr = np.ndarray.__new__(SimArray, shape, dtype, buffer=raw)
        arr._alloc = alloc
        return arr

    def zeros(self, shape: int | tuple[int, ...], dtype: Any = np.float64) -> SimArray:
        arr = self.empty(shape, dtype)
        arr.view(np.ndarray).fill(0)
        return arr

    def asarray(self, data: Any, dtype: Any = None) -> SimArray:
        """Copy host data onto the device (h2d); device arrays of this device pass through.

        A Fortran-ordered array stays Fortran-ordered, so values round-trip exactly.
        """
        if isinstance(data, SimArray) and data.device is self and dtype in (None, data.dtype):
            return data
        host = np.asarray(
            data.view(np.ndarray) if isinstance(data, SimArray) else data, dtype=dtype
        )
        if host.ndim >= 2 and host.flags.f_contiguous and not host.flags.c_contiguous:
            arr = self.empty(host.shape[::-1], host.dtype).T  # order "K", like cupy.asarray
        else:
            arr = self.empty(host.shape, host.dtype)
        np.copyto(arr.view(np.ndarray), host)
        self._count_h2d(arr.nbytes)
        return arr

    def to_host(self, arr: Any) -> np.ndarray:
        """Copy a device array to a plain host ndarray (d2h)."""
        if not isinstance(arr, SimArray):
            raise TypeError(f"to_host expects a SimArray, got {type(arr).__name__}")
        host = np.array(arr.view(np.ndarray), copy=True)
        self._count_d2h(host.nbytes)
        return host

    def is_device_array(self, obj: Any) -> bool:
        return isinstance(obj, SimArray) and obj.device is self

    def allocation_of(self, arr: Any) -> tuple[int, int]:
        """``(allocation_id, nbytes)`` of the base allocation behind ``arr``."""
        alloc = getattr(arr, "_alloc", None) if isinstance(arr, SimArray) else None
        if alloc is None or alloc.device is not self:
            raise TypeError(f"{type(arr).__name__} is not an array of {self.name}")
        return alloc.id, alloc.nbytes

    def live_allocations(self) -> dict[int, int]:
        """``{allocation_id: nbytes}`` for every allocation still alive."""
        with self._registry_lock:
            allocs = list(self._registry.values())
        return {a.id: a.nbytes for a in allocs if a.owner_ref() is not None}

    # --- ledger readings --------------------------------------------------
    def bytes_in_use(self) -> int:
        return self._ledger.in_use()

    def peak_bytes(self) -> int:
        return self._ledger.peak()

    def reset_peak(self) -> None:
        self._ledger.reset_peak()

    # --- OOM handlers -----------------------------------------------------
    def add_oom_handler(self, handler: OomHandler) -> None:
        self._ledger.oom_handlers.add(handler)

    def remove_oom_handler(self, handler: OomHandler) -> None:
        self._ledger.oom_handlers.remove(handler)

    # --- internals --------------------------------------------------------
    def _register(self, owner: np.ndarray, nbytes: int) -> _Allocation:
        alloc = _Allocation(next(self._ids), nbytes, self, owner)
        with self._registry_lock:
            self._registry[id(owner)] = alloc
        weakref.finalize(owner, self._free, id(owner), alloc)
        return alloc

    def _track(self, owner: np.ndarray) -> _Allocation:
        """The allocation of ``owner``, adopting it onto the ledger if it is new memory."""
        with self._registry_lock:
            alloc = self._registry.get(id(owner))
        if alloc is not None and alloc.owner_ref() is owner:
            return alloc
        nbytes = owner.nbytes
        self._ledger.reserve(nbytes)
        with self._registry_lock:
            alloc = self._registry.get(id(owner))
            if alloc is not None and alloc.owner_ref() is owner:  # another thread won
                self._ledger.release(nbytes)
                return alloc
        return self._register(owner, nbytes)

    def _free(self, owner_id: int, alloc: _Allocation) -> None:
        # Runs inside the owner's deallocation, so no new object can hold
        # ``owner_id`` yet: the conditional pop below cannot hit a newcomer.
        if self._registry.get(owner_id) is alloc:
            self._registry.pop(owner_id, None)
        self._ledger.release(alloc.nbytes)


def _make_default() -> SimDevice:
    return SimDevice(os.environ.get(_CAPACITY_ENV, DEFAULT_SIM_CAPACITY), name="sim:default")


def default_sim_device() -> SimDevice:
    """This process's sim device: the one set with ``set_default_device`` if it is a sim
    device, else one made on first use (capacity from ``$PROXIFY_SIM_CAPACITY``)."""
    return defaults.process_device("sim", _make_default)


def sim_device_for(token: str | None) -> SimDevice:
    """The sim device named by ``token`` if it lives in this process, else the default:
    where a sim array or table from another process lands."""
    return (_devices.get(token) if token else None) or default_sim_device()
