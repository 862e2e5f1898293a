"""The few device-generic array operations the table needs, for sim and CUDA alike.

On sim, numpy functions applied to SimArrays allocate their results on the same
device (CuPy's rule), so the ledger sees every byte; on CUDA the same calls go
to CuPy. Checks that must not allocate (bad input is rejected before anything
is allocated) read sim memory through a plain-ndarray view, which the ledger
does not count; on CUDA they are small CuPy reductions whose temporaries are
freed before the error is raised.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def namespace(device: Any) -> Any:
    """numpy for sim (SimArray results stay on the device), cupy for CUDA."""
    if device.kind == "sim":
        return np
    import cupy

    return cupy


def readable(device: Any, arr: Any) -> Any:
    """``arr`` for reading in a check: no ledger allocation on sim."""
    return arr.view(np.ndarray) if device.kind == "sim" else arr


def device_name(device: Any) -> str:
    return str(getattr(device, "name", device))


def check_device_array(device: Any, arr: Any, label: str) -> None:
    """A 1-D contiguous array of ``device``, or a TypeError/ValueError naming ``label``."""
    if not device.is_device_array(arr):
        other = getattr(arr, "device", None)
        if isinstance(arr, np.ndarray) and getattr(other, "kind", None) == "sim":
            where = f"an array of another device ({device_name(other)})"
        elif isinstance(arr, np.ndarray):
            where = f"a {type(arr).__module__}.{type(arr).__name__} in host memory"
        else:
            where = f"a {type(arr).__name__}"
        raise TypeError(
            f"{label} is {where}, not an array of device {device_name(device)!r}; "
            "move it with device.asarray() first"
        )
    if arr.ndim != 1:
        raise ValueError(f"{label} must be 1-D, got shape {tuple(arr.shape)}")
    if not arr.flags.c_contiguous:
        raise ValueError(f"{label} must be contiguous (copy it first)")


def empty(device: Any, n: int, dtype: Any) -> Any:
    return device.empty(int(n), dtype)


def full(device: Any, n: int, value: Any, dtype: Any) -> Any:
    out = device.empty(int(n), dtype)
    out[...] = value
    return out


def arange(device: Any, n: int, dtype: Any = np.int64) -> Any:
    if device.kind == "sim":
        out = device.empty(int(n), dtype)
        out.view(np.ndarray)[:] = np.arange(n, dtype=dtype)
        return out
    return namespace(device).arange(n, dtype=dtype)


def to_int(value: Any) -> int:
    """A device scalar (0-d array or numpy scalar) as a Python int (a tiny d2h read)."""
    return int(value)
