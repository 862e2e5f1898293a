"""reference_impl: a minimal, fast reference for GPU spilling and shuffling.

Data flows one way: device -> kernels / store -> table -> shuffle.
"""

from __future__ import annotations

from .device import (
    Device,
    DeviceOutOfMemoryError,
    SimArray,
    SimDevice,
    get_device,
    parse_bytes,
)
from .store import ProxifyHostFile, ProxyObject

__version__ = "0.1.0"

__all__ = [
    "Device",
    "DeviceOutOfMemoryError",
    "ProxifyHostFile",
    "ProxyObject",
    "SimArray",
    "SimDevice",
    "__version__",
    "get_device",
    "parse_bytes",
]
