"""A memory-bounded shuffle of device Tables on dask.distributed (explicit comms).

Phases, one module each, as in distributed/shuffle: :mod:`.plan` (checks before any
data moves, placement), :mod:`.transfer` (partition local inputs, send packed shards to
their workers), :mod:`.barrier`, :mod:`.unpack` (one output at a time from its buffer).
What they share: :mod:`.spec` (the frozen ShuffleSpec every task gets), :mod:`.packed`
(a shard as host bytes and one index row; an output built from them), :mod:`.buffers`
(one buffer and one file per output on its worker). The worker side: :mod:`.plugin`
(the extension), :mod:`.run` (one shuffle's state on a worker), :mod:`.limiter` (device
room, host budget), :mod:`.comms` (sends in flight); the scheduler side:
:mod:`.coordinator`; set-up: :mod:`.cluster`. Data flows device -> store -> table ->
shuffle; nothing below imports this package.
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
