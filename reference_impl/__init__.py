"""reference_impl: a minimal, fast reference for GPU spilling and shuffling.

Data flows one way: device -> kernels / store -> table -> shuffle. Importing the root
(and so any subpackage, ``reference_impl.device`` alone included) loads only the device
layer and registers nothing; the store's and the table's names are loaded on first
access, which also calls :func:`register` (see ``registration.py``).
"""

from __future__ import annotations

from typing import Any

from .device import (
    Device,
    DeviceOutOfMemoryError,
    SimArray,
    SimDevice,
    get_device,
    parse_bytes,
)
from .registration import register, register_lazily

__version__ = "0.1.0"

# Names loaded on first access (PEP 562), with register() called first.
_STORE_NAMES = ("ProxifyHostFile", "ProxyObject")
_TABLE_NAMES = ("Column", "Table")

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
    "register",
]


def __getattr__(name: str) -> Any:
    if name in _STORE_NAMES:
        from . import store as module
    elif name in _TABLE_NAMES:
        from . import table as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    register()
    value = getattr(module, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | {*_STORE_NAMES, *_TABLE_NAMES})


register_lazily()
