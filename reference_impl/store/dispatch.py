"""Which objects are device objects, and how each kind moves between tiers.

A small registry keyed by type (looked up along the MRO) so new device types,
such as a Table of device columns, plug in without touching the store.
Anything the device itself calls a device array uses :class:`ArrayType`.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from . import serialize
from .serialize import Payload


class DeviceType(Protocol):
    """How the store handles one kind of device object."""

    def allocations(self, obj: Any, device: Any) -> list[tuple[int, int]]:
        """``(allocation_id, nbytes)`` of every base allocation ``obj`` holds."""

    def to_host(self, obj: Any, device: Any) -> Payload:
        """A host payload of ``obj``; must not allocate device memory."""

    def to_device(self, payload: Payload, device: Any) -> Any:
        """Rebuild the device object from ``payload`` on ``device``."""

    def metadata(self, obj: Any) -> dict[str, Any]:
        """Cheap attributes a proxy answers without unspilling (e.g. ``nbytes``)."""

    # Optional: ``default_device(meta) -> device``, the device a spilled proxy that was
    # pickled into another process unspills onto (default: sim for SimArray, else cuda).
    #
    # Optional: ``immutable = True`` when no instance ever changes after it is built. Only
    # then does the store keep a value's spill file as a *clean copy* when it reads the value
    # back, and reuse that file (no serialization, no write) when it evicts the value again:
    # a file kept for a mutable object would go stale at its first in-place write (SPEC 13.1).
    # Absent means False.


class ArrayType:
    """Device arrays (SimArray, CuPy): one base allocation, copied with the device."""

    # Arrays are written in place (``a[0] = 1``, ``np.add(a, 1, out=a)`` through a raw
    # array the store never sees), so a spill file kept for one would go stale: no clean copy.
    immutable = False

    def allocations(self, obj: Any, device: Any) -> list[tuple[int, int]]:
        return [device.allocation_of(obj)]

    def to_host(self, obj: Any, device: Any) -> Payload:
        host = device.to_host(obj)
        # The dtype travels beside the array: numpy's pickle turns a non-native
        # datetime64/timedelta64 (``>M8[ns]``) into the native one.
        return serialize.dumps((host, host.dtype.str))

    def to_device(self, payload: Payload, device: Any) -> Any:
        host, dtype = serialize.loads(payload)
        if host.dtype.str != dtype:
            host = host.astype(dtype, order="K")  # same values, byte order restored
        return device.asarray(host)

    def metadata(self, obj: Any) -> dict[str, Any]:
        """Shared by every array of one shape and dtype: a proxy reads it, never writes it.

        Arrays of one shape are the common case (a dask array's chunks), and one dict
        for all of them is one object fewer to build, keep and free per proxy.
        """
        shape = tuple(obj.shape)
        dtype = obj.dtype
        meta = _array_meta.get((shape, dtype))
        if meta is None:
            meta = {
                "nbytes": int(obj.nbytes),  # size * itemsize: a function of the key
                "shape": shape,
                "dtype": dtype,
                "ndim": len(shape),
                "size": int(obj.size),
            }
            if shape:
                meta["__len__"] = int(shape[0])
            if len(_array_meta) >= _ARRAY_META_MAX:
                _array_meta.clear()  # bounded: a workload of ever new shapes rebuilds them
            _array_meta[shape, dtype] = meta
        return meta


_ARRAY_META_MAX = 4096
_array_meta: dict[tuple[tuple[int, ...], Any], dict[str, Any]] = {}

ARRAY = ArrayType()
_registry: dict[type, DeviceType] = {}
_registry_lock = threading.Lock()


def register_device_type(cls: type, handler: DeviceType) -> None:
    """Teach every store to proxify instances of ``cls`` with ``handler``."""
    with _registry_lock:
        _registry[cls] = handler


def is_immutable(handler: Any) -> bool:
    """Whether ``handler``'s objects never change once built (may keep a clean copy)."""
    return getattr(handler, "immutable", False) is True


def handler_for(obj: Any, device: Any) -> DeviceType | None:
    """The handler for ``obj`` if it is a device object of ``device``, else None."""
    if _registry:
        for cls in type(obj).__mro__:
            handler = _registry.get(cls)
            if handler is not None:
                return handler
    if device.is_device_array(obj):
        return ARRAY
    return None
