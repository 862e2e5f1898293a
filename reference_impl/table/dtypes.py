"""The column types a Table holds, and how each maps to a device dtype.

One table of truth for Arrow type <-> device dtype, so every entry point
(Arrow, pandas, cuDF, raw device arrays) accepts and rejects the same set and
names the column and its type when it rejects one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

ARROW_UNITS = ("s", "ms", "us", "ns")

_FIXED: dict[pa.DataType, np.dtype] = {
    pa.bool_(): np.dtype(np.bool_),
    pa.int8(): np.dtype(np.int8),
    pa.int16(): np.dtype(np.int16),
    pa.int32(): np.dtype(np.int32),
    pa.int64(): np.dtype(np.int64),
    pa.uint8(): np.dtype(np.uint8),
    pa.uint16(): np.dtype(np.uint16),
    pa.uint32(): np.dtype(np.uint32),
    pa.uint64(): np.dtype(np.uint64),
    pa.float32(): np.dtype(np.float32),
    pa.float64(): np.dtype(np.float64),
}
_FROM_NUMPY = {v: k for k, v in _FIXED.items()}

SUPPORTED = (
    "bool, int8-int64, uint8-uint64, float32, float64, timestamp/datetime64 and "
    "duration/timedelta64 in s, ms, us or ns, utf8 (string), large_utf8 (large_string), "
    "binary and large_binary; held as one of those: unordered dictionaries, decimals, "
    "date32/64, time32/64, halffloat, null, and lists, large lists, fixed-size lists, structs and "
    "maps of any of these (no dictionary inside)"
)


def _column(name: str | None) -> str:
    return f"column {name!r}" if name is not None else "column"


def unsupported(name: str | None, what: Any) -> TypeError:
    return TypeError(f"{_column(name)} has unsupported type {what}; supported: {SUPPORTED}")


_VARLEN = (pa.string(), pa.large_string(), pa.binary(), pa.large_binary())
_LARGE = (pa.large_string(), pa.large_binary())


def is_varlen(type_: pa.DataType) -> bool:
    """Whether ``type_`` has Arrow's variable-width layout (offsets + uint8 bytes): utf8 and
    binary alike, since every kernel, gather and packer handles the layout, not the text."""
    return type_ in _VARLEN


def check_arrow_type(name: str | None, type_: pa.DataType) -> pa.DataType:
    """``type_`` if a Table can hold it, else a TypeError naming the column."""
    if is_varlen(type_) or type_ in _FIXED:
        return type_
    if (pa.types.is_timestamp(type_) or pa.types.is_duration(type_)) and type_.unit in ARROW_UNITS:
        return type_
    raise unsupported(name, type_)


def storage_dtype(type_: pa.DataType) -> np.dtype:
    """The device dtype of a fixed-width type's values (uint8 bytes for varlen types)."""
    if is_varlen(type_):
        return np.dtype(np.uint8)
    if pa.types.is_timestamp(type_):
        return np.dtype(f"datetime64[{type_.unit}]")
    if pa.types.is_duration(type_):
        return np.dtype(f"timedelta64[{type_.unit}]")
    return _FIXED[type_]


def offsets_dtype(type_: pa.DataType) -> np.dtype:
    """int32 offsets for utf8 and binary, int64 for large_utf8 and large_binary (Arrow's
    layouts)."""
    return np.dtype(np.int64 if type_ in _LARGE else np.int32)


def arrow_type_of(name: str | None, dtype: Any) -> pa.DataType:
    """The Arrow type of device values of ``dtype`` (a TypeError naming the column if none)."""
    dtype = np.dtype(dtype)
    if not dtype.isnative:
        raise TypeError(
            f"{_column(name)} has non-native byte order dtype {dtype.str!r}; "
            f"convert it with .astype({dtype.newbyteorder('=').str!r}) first"
        )
    if dtype in _FROM_NUMPY:
        return _FROM_NUMPY[dtype]
    if dtype.kind in "mM":
        unit, count = np.datetime_data(dtype)
        if unit in ARROW_UNITS and count == 1:
            return pa.timestamp(unit) if dtype.kind == "M" else pa.duration(unit)
    raise unsupported(name, f"dtype {dtype}")
