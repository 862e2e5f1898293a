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
    "default_sim_device",
    "format_bytes",
    "get_device",
    "parse_bytes",
]

_KINDS = ("auto", "sim", "cuda")


def get_device(kind: str = "auto", capacity: int | str | None = None) -> Device:
    """A new device of ``kind``: ``"sim"``, ``"cuda"`` or ``"auto"``.

    ``auto`` picks ``cuda`` only where CuPy sees a GPU, and ``sim`` otherwise.
    ``capacity`` defaults to the whole GPU, or 16 GiB on sim.
    """
    if kind not in _KINDS:
        raise ValueError(f"unknown device kind {kind!r}; expected one of {', '.join(_KINDS)}")
    if kind == "auto":
        kind = "cuda" if cuda_available() else "sim"
    if kind == "cuda":
        return CudaDevice(capacity)
    return SimDevice(capacity) if capacity is not None else SimDevice()
