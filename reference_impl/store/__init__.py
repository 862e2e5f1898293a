"""The reference spilling store: ProxifyHostFile and its ProxyObject.

Each module holds one idea, and each piece of the store's state has one owner:

- ``hostfile``: ProxifyHostFile, the mapping and the proxies' manager; it owns the lock.
- ``locking``: ``@locked``, the preamble every cold store call shares.
- ``accounting``: the device, host and disk totals and each record's tier (their one writer).
- ``index``: keys, tracked proxies, the allocation table and the alias groups it links.
- ``recency``: LRU order of device units, the host heap, and pins.
- ``mover``: placement, eviction, the host -> disk cascade, all-or-nothing moves.
- ``tracker``: proxifies values, tracks proxies weakly, forgets the dead ones.
- ``records``: Record (one proxy), Entry (one key), Unit (what is evicted).
- ``proxy``: ProxyObject, its ProxyState, and the ProxyManager protocol it calls.
- ``disk`` (authenticated spill files), ``serialize`` (host payloads), ``dispatch``
  (device types), ``containers`` (nested values), ``comms`` (a proxy across distributed's
  comms), ``snapshot``, ``errors``.
"""

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
