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
from .table import Column, Table  # registers Table with the store and dask

__version__ = "0.1.0"

__all__ = [
    "Column",
    "Device",
    "DeviceOutOfMemoryError",
    "ProxifyHostFile",
    "ProxyObject",
    "SimArray",
    "SimDevice",
    "Table",
    "__version__",
    "get_device",
    "parse_bytes",
]
