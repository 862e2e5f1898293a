"""``dask worker --preload reference_impl.shuffle.preload``: the LocalDeviceCluster
set-up for a hand-started worker (its device, a ProxifyHostFile, the shuffle
extension). Options after ``--preload-argv`` or from the environment:
``--device`` / PROXIFY_DEVICE (sim | cuda), ``--device-capacity`` /
PROXIFY_DEVICE_CAPACITY, ``--device-memory-limit`` / PROXIFY_DEVICE_MEMORY_LIMIT,
``--memory-limit`` / PROXIFY_MEMORY_LIMIT (host bytes before disk).
"""

from __future__ import annotations

import click

from reference_impl.registration import register

from .cluster import DeviceWorkerPlugin
from .plugin import ShuffleWorkerPlugin


@click.command()
@click.option("--device", envvar="PROXIFY_DEVICE", default="sim")
@click.option("--device-capacity", envvar="PROXIFY_DEVICE_CAPACITY", default=None)
@click.option("--device-memory-limit", envvar="PROXIFY_DEVICE_MEMORY_LIMIT", default=None)
@click.option("--memory-limit", envvar="PROXIFY_MEMORY_LIMIT", default=None)
async def dask_setup(
    worker, device, device_capacity, device_memory_limit, memory_limit
) -> None:
    register()  # before the worker receives anything (DeviceWorkerPlugin registers too)
    limit = device_memory_limit
    if limit is not None and limit.replace(".", "", 1).isdigit() and "." in limit:
        limit = float(limit)  # a fraction of the capacity
    await worker.plugin_add(
        DeviceWorkerPlugin(device, device_capacity, limit, memory_limit), catch_errors=False
    )
    await worker.plugin_add(ShuffleWorkerPlugin(), catch_errors=False)
