"""Teach dask's "dask" serialization family to keep SimArrays on their device.

Without this, distributed serializes a SimArray with the plain ndarray
serializer (found through the MRO) and it comes back as host memory, off the
ledger. Registered by ``reference_impl.register()`` (importing registers nothing).

This is the only place the SimArray serializers are defined: the reference
store, distributed's workers and the dask-cuda conformance adapter (whose
spills go through the "dask" family) all use it.
"""

from __future__ import annotations

from .common import once
from .sim import SimArray, sim_device_for


@once
def register_dask_serializers() -> None:
    """Idempotent; a no-op where distributed is not installed.

    A frame is a d2h copy (``device.to_host``, counted by the device); the
    header names the device by its token, and deserializing allocates on that
    device again (``device.asarray``, through the ledger and its OOM handlers),
    or on this process's sim device when the token is unknown here.
    A detached SimArray (no device) travels and comes back as a plain ndarray.
    """
    try:
        from distributed.protocol.numpy import (
            deserialize_numpy_ndarray,
            serialize_numpy_ndarray,
        )
        from distributed.protocol.serialize import dask_deserialize, dask_serialize
    except ImportError:
        return

    import numpy as np

    @dask_serialize.register(SimArray)
    def _serialize_sim_array(arr: SimArray):
        device = arr.device
        if device is None:  # detached: plain host data
            header, frames = serialize_numpy_ndarray(arr.view(np.ndarray))
            return {"host": header, "device_token": None}, frames
        header, frames = serialize_numpy_ndarray(device.to_host(arr))
        return {"host": header, "device_token": device.token}, frames

    @dask_deserialize.register(SimArray)
    def _deserialize_sim_array(header, frames):
        host = deserialize_numpy_ndarray(header["host"], frames)
        token = header["device_token"]
        if token is None:
            return host
        return sim_device_for(token).asarray(host)
