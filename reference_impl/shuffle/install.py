"""Putting the shuffle on a cluster: the serializers, the coordinator, the worker extension,
and the configuration a shuffle reads once on its client.

Both front ends call :func:`ensure_plugins` (the eager :func:`~.api.shuffle` before it
submits; :func:`~.in_dask.install` before dask lowers a graph), so a cluster set up by one
serves the other.
"""

from __future__ import annotations

import dask.config
import distributed
from distributed import Client

from reference_impl.registration import register

from .coordinator import MAX_RESTARTS, ShuffleSchedulerPlugin
from .plugin import EXTENSION, ShuffleWorkerPlugin


def _has_extension(dask_worker: distributed.Worker) -> bool:
    return EXTENSION in dask_worker.extensions


def ensure_plugins(client: Client) -> list[str]:
    """Workers able to take part (those with the extension; it is installed where missing).

    The client and every worker register the reference's serializers first: Tables and
    HostShards cross the comms.
    """
    register()
    client.run(register)
    client.register_plugin(ShuffleSchedulerPlugin())
    found = client.run(_has_extension)
    if not all(found.values()):
        client.register_plugin(ShuffleWorkerPlugin())
        found = client.run(_has_extension)
    workers = sorted(w for w, ok in found.items() if ok)
    if not workers:
        raise RuntimeError("the cluster has no workers")
    return workers


def max_restarts() -> int:
    """``reference-impl.shuffle.max-restarts`` (restarts after lost workers), checked."""
    value = dask.config.get("reference-impl.shuffle.max-restarts", MAX_RESTARTS)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"reference-impl.shuffle.max-restarts must be an int >= 0, got {value!r}"
        )
    return value
