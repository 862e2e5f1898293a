"""The reference spilling store: ProxifyHostFile and its ProxyObject."""

from __future__ import annotations

from .dispatch import ArrayType, DeviceType, register_device_type
from .errors import SpillDirectoryError, SpillIntegrityError, SpillWarning, StoreClosedError
from .hostfile import ProxifyHostFile
from .proxy import ProxyManager, ProxyObject, ProxyState, state_of
from .snapshot import StoreSnapshot

__all__ = [
    "ArrayType",
    "DeviceType",
    "ProxifyHostFile",
    "ProxyManager",
    "ProxyObject",
    "ProxyState",
    "SpillDirectoryError",
    "SpillIntegrityError",
    "SpillWarning",
    "StoreClosedError",
    "StoreSnapshot",
    "register_device_type",
    "state_of",
]
