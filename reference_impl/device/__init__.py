"""The device layer: one protocol, a simulated GPU for CPU CI and a CuPy/RMM GPU.

Importing it imports nothing above it and registers nothing with dask: that is
``reference_impl.register()``'s job.
"""

from __future__ import annotations

from . import defaults
from .cuda import CudaDevice, cuda_available, default_cuda_device, require_cuda
from .errors import DeviceOutOfMemoryError, DeviceUnavailableError
from .protocol import Device
from .sim import SimArray, SimDevice, default_sim_device, sim_device_for
from .sizes import format_bytes, parse_bytes

__all__ = [
    "CudaDevice",
    "Device",
    "DeviceOutOfMemoryError",
    "DeviceUnavailableError",
    "SimArray",
    "SimDevice",
    "cuda_available",
    "default_cuda_device",
    "default_device",
    "default_sim_device",
    "device_for",
    "format_bytes",
    "get_device",
    "parse_bytes",
    "require_cuda",
    "set_default_device",
    "sim_device_for",
]

_KINDS = ("auto", "sim", "cuda")


def set_default_device(device: Device | None) -> Device | None:
    """Make ``device`` this process's device; returns the previous one.

    A dask worker (one per process) sets its own device here, so code in its
    tasks that asks for ``get_device("auto")`` allocates where the worker's store
    spills, and sim arrays or tables arriving from other processes land on it
    (it becomes :func:`default_sim_device`, or :func:`default_cuda_device`).
    ``None`` restores the old behaviour.
    """
    if device is not None and not isinstance(device, Device):
        raise TypeError(f"expected a Device or None, got {type(device).__name__}")
    return defaults.set_default_device(device)


def default_device() -> Device | None:
    """The device set by :func:`set_default_device`, or None."""
    return defaults.default_device()


def device_for(kind: str, token: str | None = None) -> Device:
    """Where data from another process lands: the sim device named by ``token`` if it
    lives here, else this process's device of ``kind`` (``"sim"`` or ``"cuda"``)."""
    return sim_device_for(token) if kind == "sim" else default_cuda_device()


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
    chosen = defaults.default_device()
    if (
        capacity is None
        and chosen is not None
        and (kind == "auto" or (kind == "cuda" and chosen.kind == "cuda"))
    ):
        return chosen
    if kind == "auto":
        kind = "cuda" if cuda_available() else "sim"
    if kind == "cuda":
        return CudaDevice(capacity)
    return SimDevice(capacity) if capacity is not None else SimDevice()
