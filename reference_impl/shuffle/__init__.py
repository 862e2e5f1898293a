"""A memory-bounded shuffle of device Tables on dask.distributed (explicit comms).

Phases, one task module each, as in distributed/shuffle, each a thin wrapper: :mod:`.plan`
(checks before any data moves, placement), :mod:`.transfer`, :mod:`.barrier`,
:mod:`.unpack`. One object owns a shuffle's run on a worker: :mod:`.run`'s ShuffleRun
(its shards, its sends, its unpacked outputs, its failure; partitioning an input, keeping
what arrives, building an output). What they share: :mod:`.spec` (the frozen ShuffleSpec
every task gets, and every task key), :mod:`.packed` (a shard as host bytes and one index
row; an output built from them), :mod:`.buffers` (a run's storage: one buffer and one
file per output). The worker side: :mod:`.plugin` (the extension: what is worker-wide),
:mod:`.limiter` (device room, host budget), :mod:`.comms` (the transport, bytes in flight);
the scheduler side: :mod:`.coordinator`; set-up: :mod:`.install` (on a client),
:mod:`.cluster` (workers). Data flows device -> store -> table -> shuffle; nothing below
imports this package.
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
