"""Preload for the clusters distributed's own shuffle tests start (``gen_cluster`` and
the ``client`` fixture): each scheduler gets the device shuffle's coordinator and a
:class:`DeviceShufflesSeen` (one, shared, so the routing plugin counts per test what
reached the scheduler), each worker its own SimDevice, a ProxifyHostFile and the shuffle
extension (in-process workers would otherwise share the process's default device).

``route_device.py`` puts it in ``distributed.scheduler.preload`` and
``distributed.worker.preload`` (config and environment, for subprocess clusters).
"""

from __future__ import annotations

from typing import Any

import distributed

from reference_impl.registration import register
from reference_impl.shuffle import DeviceWorkerPlugin, ShuffleSchedulerPlugin, ShuffleWorkerPlugin
from reference_impl.shuffle.in_dask import DeviceShufflesSeen

SEEN = DeviceShufflesSeen()  # every in-process scheduler's barriers, in order


async def dask_setup(server: Any) -> None:
    register()
    if isinstance(server, distributed.Scheduler):
        server.add_plugin(ShuffleSchedulerPlugin())  # started with the scheduler's plugins
        server.add_plugin(SEEN)
        return
    await server.plugin_add(DeviceWorkerPlugin("sim", "1 GiB", "256 MiB", "1 GiB"), catch_errors=False)
    await server.plugin_add(ShuffleWorkerPlugin(), catch_errors=False)
