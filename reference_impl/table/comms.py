"""Teach distributed's serialization to keep a Table on its device.

The ``dask`` family carries host frames (the d2h copies, counted by the
device) and rebuilds the table on the receiving process's device: the same sim
device when it lives in that process, else its default sim device (as
SimArray does, ``reference_impl/device/sim_comms.py``). The ``cuda`` family,
used by comms that move device memory (UCX), carries the CuPy buffers
themselves and rebuilds around them without a host copy. dask's ``sizeof`` answers
with the device bytes. Registered by ``reference_impl.register()``, never on import.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from reference_impl.device.common import once

from .frames import device_for, encode, encode_header
from .table import Table


@once
def register_dask_hooks() -> None:
    """Idempotent: ``sizeof`` always, the serializers where distributed is installed."""
    _register_sizeof()
    try:
        from distributed.protocol.cuda import cuda_deserialize, cuda_serialize
        from distributed.protocol.serialize import dask_deserialize, dask_serialize
    except ImportError:
        return

    @dask_serialize.register(Table)
    def _serialize_table(table: Table) -> tuple[dict[str, Any], list[Any]]:
        header, frames = encode(table)
        return header, [memoryview(f) for f in frames]

    @dask_deserialize.register(Table)
    def _deserialize_table(header: dict[str, Any], frames: list[Any]) -> Table:
        return Table._from_frames(header, frames, device_for(header["device"]))

    @cuda_serialize.register(Table)
    def _cuda_serialize_table(table: Table) -> tuple[dict[str, Any], list[Any]]:
        if table.device.kind != "cuda":
            return _serialize_table(table)
        return _device_frames(table)

    @cuda_deserialize.register(Table)
    def _cuda_deserialize_table(header: dict[str, Any], frames: list[Any]) -> Table:
        if header["device"]["kind"] != "cuda":
            return _deserialize_table(header, frames)
        return _from_device_frames(header, frames, device_for(header["device"]))


def _device_frames(table: Table) -> tuple[dict[str, Any], list[Any]]:
    """Header as :func:`frames.encode`'s, frames the (uint8-viewed) CuPy buffers.

    String columns are compacted on the device first (a slice's chars only).
    """
    frames: list[Any] = []
    for col in table.columns:
        if col.offsets is None:
            frames.append(col.data.view(np.uint8))
        else:
            start, stop = col.chars_range()
            frames.append(col.data[start:stop].view(np.uint8))
            frames.append((col.offsets - col.offsets.dtype.type(start)).view(np.uint8))
        if col.valid is not None:
            frames.append(col.valid.view(np.uint8))
    return encode_header(table), frames


def _from_device_frames(header: dict[str, Any], frames: list[Any], device: Any) -> Table:
    import cupy

    return Table._from_frames(header, frames, device, lambda f: cupy.asarray(f).view(np.uint8))


def _register_sizeof() -> None:
    """dask asks every task output's size: a Table answers with its device bytes."""
    from dask.sizeof import sizeof

    @sizeof.register(Table)
    def _sizeof_table(table: Table) -> int:
        return table.nbytes
