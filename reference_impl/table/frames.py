"""A Table as a small header plus one host frame per device buffer, and back.

Shared by the store (spill to host/disk), dask's serializers and pickling, so
the three agree on the layout. Each frame is a plain uint8 host array (the
d2h copy, made by ``device.to_host`` and counted by the device); pickle
protocol 5 then keeps it out of band, with no further copy. The header is
msgpack-safe (str, int, bool, bytes, lists), as distributed requires.

Sliced string columns are compacted on the way out: only the chars in use are
copied, and the host offsets are rebased to start at 0. Decoding gives columns and
plain data, never a Table: ``table.py`` imports this module, not the reverse.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from reference_impl.device import device_for as _landing_device

from .column import Column
from .dtypes import is_varlen, offsets_dtype, storage_dtype

if TYPE_CHECKING:
    from .table import Table

_PLAIN = {
    str(t): t
    for t in (
        pa.bool_(),
        pa.int8(),
        pa.int16(),
        pa.int32(),
        pa.int64(),
        pa.uint8(),
        pa.uint16(),
        pa.uint32(),
        pa.uint64(),
        pa.float32(),
        pa.float64(),
        pa.string(),
        pa.large_string(),
        pa.binary(),
        pa.large_binary(),
    )
}


def type_to_header(type_: pa.DataType) -> list[Any]:
    if pa.types.is_timestamp(type_):
        return ["timestamp", type_.unit, type_.tz]
    if pa.types.is_duration(type_):
        return ["duration", type_.unit]
    return [str(type_)]


def type_from_header(spec: list[Any]) -> pa.DataType:
    if spec[0] == "timestamp":
        return pa.timestamp(spec[1], tz=spec[2])
    if spec[0] == "duration":
        return pa.duration(spec[1])
    return _PLAIN[spec[0]]


def device_header(device: Any) -> dict[str, Any]:
    return {
        "kind": device.kind,
        "token": getattr(device, "token", None),
        "name": str(getattr(device, "name", "")),
    }


def _host_bytes(device: Any, arr: Any) -> np.ndarray:
    return device.to_host(arr).reshape(-1).view(np.uint8)


def encode_header(table: Table) -> dict[str, Any]:
    """The header: names, types, masks, rows, metadata and the device it came from."""
    columns = [
        [name, type_to_header(col.type), col.nullable, col.valid is not None]
        for name, col in zip(table.column_names, table.columns, strict=True)
    ]
    metadata = [[k, v] for k, v in (table.metadata or {}).items()]
    return {
        "columns": columns,
        "num_rows": table.num_rows,
        "metadata": metadata,
        "device": device_header(table.device),
    }


def encode(table: Table) -> tuple[dict[str, Any], list[np.ndarray]]:
    """``(header, frames)``: d2h copies of every buffer, nothing allocated on the device.

    Frames per column: values (or the chars in use), then offsets, then the mask.
    """
    device = table.device
    frames: list[np.ndarray] = []
    for col in table.columns:
        if col.offsets is None:
            frames.append(_host_bytes(device, col.data))
        else:
            start, stop = col.chars_range()
            frames.append(_host_bytes(device, col.data[start:stop]))
            offsets = device.to_host(col.offsets)
            if start:
                offsets -= offsets.dtype.type(start)  # our own host copy: rebase in place
            frames.append(offsets.view(np.uint8))
        if col.valid is not None:
            frames.append(_host_bytes(device, col.valid))
    return encode_header(table), frames


def decode_columns(
    header: dict[str, Any], frames: list[Any], device: Any, upload: Callable[[Any], Any] | None = None
) -> tuple[dict[str, Column], int, dict[bytes, bytes] | None]:
    """``(columns, num_rows, metadata)`` rebuilt on ``device`` from frames, each made a uint8
    device array by ``upload`` (default: one h2d copy per host frame, through the ledger)."""
    if upload is None:
        def upload(f: Any) -> Any:
            return device.asarray(np.frombuffer(f, dtype=np.uint8))

    it = iter(frames)
    cols: dict[str, Column] = {}
    for name, spec, nullable, has_valid in header["columns"]:
        type_ = type_from_header(spec)
        data = upload(next(it)).view(storage_dtype(type_))
        offsets = upload(next(it)).view(offsets_dtype(type_)) if is_varlen(type_) else None
        valid = upload(next(it)).view(np.bool_) if has_valid else None
        cols[name] = Column.trusted(device, type_, data, valid, offsets, nullable)
    metadata = {bytes(k): bytes(v) for k, v in header["metadata"]} or None
    return cols, int(header["num_rows"]), metadata


def device_for(spec: dict[str, Any]) -> Any:
    """The device named by a header: the same sim device if it lives in this
    process, else this process's sim device; for CUDA, this process's GPU device."""
    return _landing_device(spec["kind"], spec.get("token"))
