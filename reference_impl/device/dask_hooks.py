"""Teach dask's "dask" serialization family to keep SimArrays on their device.

Without this, distributed serializes a SimArray with the plain ndarray
serializer (found through the MRO) and it comes back as host memory, off the
ledger. Registered once, on the first SimDevice, so the import stays cheap.
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_done = False


def register_dask_serializers() -> None:
    """Idempotent; a no-op where distributed is not installed."""
    global _done
    with _lock:
        if _done:
            return
        _done = True
    try:
        from distributed.protocol.numpy import (
            deserialize_numpy_ndarray,
            serialize_numpy_ndarray,
        )
        from distributed.protocol.serialize import dask_deserialize, dask_serialize
    except ImportError:
        return

    from .sim import SimArray, _devices, default_sim_device

    @dask_serialize.register(SimArray)
    def _serialize_sim_array(arr: SimArray):
        device = arr.device
        header, frames = serialize_numpy_ndarray(device.to_host(arr))
        return {"host": header, "device_token": device.token}, frames

    @dask_deserialize.register(SimArray)
    def _deserialize_sim_array(header, frames) -> SimArray:
        host = deserialize_numpy_ndarray(header["host"], frames)
        device = _devices.get(header["device_token"]) or default_sim_device()
        return device.asarray(host)
