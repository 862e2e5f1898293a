"""A memory-bounded shuffle of device Tables on dask.distributed (explicit comms).

Phases, one module each: :mod:`.plan` (checks before any data moves, placement),
:mod:`.transfer` (partition local inputs, send shards to their workers),
:mod:`.barrier`, :mod:`.unpack` (one output at a time from its shards); the
worker extension in :mod:`.plugin`, the scheduler side in :mod:`.coordinator`,
and the cluster set-up in :mod:`.cluster`. Data flows device -> store -> table
-> shuffle; nothing below imports this package.
"""

from __future__ import annotations

from .api import shuffle, shuffle_dataframe
from .cluster import DeviceWorkerPlugin, LocalDeviceCluster, make_worker_store
from .coordinator import ShuffleSchedulerPlugin
from .errors import ShuffleClosedError, ShuffleError
from .plugin import ShuffleWorkerPlugin

__all__ = [
    "DeviceWorkerPlugin",
    "LocalDeviceCluster",
    "ShuffleClosedError",
    "ShuffleError",
    "ShuffleSchedulerPlugin",
    "ShuffleWorkerPlugin",
    "make_worker_store",
    "shuffle",
    "shuffle_dataframe",
]
