"""The device layer: one protocol, a simulated GPU for CPU CI and a CuPy/RMM GPU."""

from __future__ import annotations

from .cuda import CudaDevice, cuda_available
from .errors import DeviceOutOfMemoryError, DeviceUnavailableError
from .protocol import Device
from .sim import SimArray, SimDevice, default_sim_device
from .sizes import format_bytes, parse_bytes

__all__ = [
    "CudaDevice",
    "Device",
    "DeviceOutOfMemoryError",
    "DeviceUnavailableError",
    "SimArray",
    "SimDevice",
    "cuda_available",
    "default_device",
    "default_sim_device",
    "format_bytes",
    "get_device",
    "parse_bytes",
    "set_default_device",
]

_KINDS = ("auto", "sim", "cuda")
_default: Device | None = None


def set_default_device(device: Device | None) -> Device | None:
    """Make ``device`` this process's device; returns the previous one.

    A dask worker (one per process) sets its own device here, so code in its
    tasks that asks for ``get_device("auto")`` allocates where the worker's store
    spills, and sim arrays or tables arriving from other processes land on it
    (it becomes :func:`default_sim_device`). ``None`` restores the old behaviour.
    """
    global _default
    from .sim import _set_default_sim_device

    if device is not None and not isinstance(device, Device):
        raise TypeError(f"expected a Device or None, got {type(device).__name__}")
    previous, _default = _default, device
    _set_default_sim_device(device if getattr(device, "kind", None) == "sim" else None)
    return previous


def default_device() -> Device | None:
    """The device set by :func:`set_default_device`, or None."""
    return _default


def get_device(kind: str = "auto", capacity: int | str | None = None) -> Device:
    """A new device of ``kind``: ``"sim"``, ``"cuda"`` or ``"auto"``.

    ``auto`` picks ``cuda`` only where CuPy sees a GPU, and ``sim`` otherwise.
    ``capacity`` defaults to the whole GPU, or 16 GiB on sim. Where a default
    device is set (:func:`set_default_device`, e.g. inside a dask worker),
    ``auto`` without a capacity returns it, and so does ``cuda`` when it is a GPU:
    one process drives one GPU through one accounting stack.
    """
    if kind not in _KINDS:
        raise ValueError(f"unknown device kind {kind!r}; expected one of {', '.join(_KINDS)}")
    if (
        capacity is None
        and _default is not None
        and (kind == "auto" or (kind == "cuda" and _default.kind == "cuda"))
    ):
        return _default
    if kind == "auto":
        kind = "cuda" if cuda_available() else "sim"
    if kind == "cuda":
        return CudaDevice(capacity)
    return SimDevice(capacity) if capacity is not None else SimDevice()
