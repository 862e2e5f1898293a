"""LocalDeviceCluster and the worker set-up any ``dask worker`` can load.

Every worker gets its own device (a SimDevice of the given capacity, or one GPU
placed with ``CUDA_VISIBLE_DEVICES`` as ``LocalCUDACluster`` does) and a
ProxifyHostFile as its ``data``; that device becomes the worker process's
default, so ``get_device("auto")`` inside a task is the device the store
spills, and tables arriving from other workers land on it.
"""

from __future__ import annotations

import copy
import os
from collections.abc import MutableMapping
from typing import Any

import distributed
from distributed.diagnostics.plugin import WorkerPlugin

from reference_impl.device import Device, get_device, parse_bytes, set_default_device
from reference_impl.registration import register
from reference_impl.store import ProxifyHostFile

DEFAULT_DEVICE_FRACTION = 0.8  # of the device's capacity, like dask-cuda's "default"


def _device_limit(device: Device, device_memory_limit: int | str | float | None) -> int:
    """Bytes: an int, a size string, or a fraction of the device's capacity."""
    if device_memory_limit is None:
        device_memory_limit = DEFAULT_DEVICE_FRACTION
    if isinstance(device_memory_limit, float) and 0 < device_memory_limit <= 1:
        return int(device.capacity * device_memory_limit)
    return parse_bytes(device_memory_limit, what="device_memory_limit", allow_zero=True)


def make_device(kind: str = "sim", capacity: int | str | None = None) -> Device:
    """This process's device: a new SimDevice, or the (one visible) GPU."""
    return get_device(kind, capacity)


def make_worker_store(
    *,
    device: str = "sim",
    device_capacity: int | str | None = None,
    device_memory_limit: int | str | float | None = None,
    memory_limit: int | str | None = None,
    local_directory: str | None = None,
    worker_local_directory: str | None = None,
) -> MutableMapping:
    """A worker's ``data``: a ProxifyHostFile on a device made in the worker process.

    Passed to dask as ``data=(make_worker_store, kwargs)``, so the device is built
    where it is used (a device does not pickle), and made the process default. The
    reference's serializers are registered in the worker process first.
    """
    register()
    dev = make_device(device, device_capacity)
    set_default_device(dev)
    return ProxifyHostFile(
        device=dev,
        device_memory_limit=_device_limit(dev, device_memory_limit),
        memory_limit=memory_limit,
        local_directory=local_directory or worker_local_directory,
    )


class DeviceWorkerPlugin(WorkerPlugin):
    """Give a hand-started worker its device and a ProxifyHostFile ``data``.

    ``client.register_plugin(DeviceWorkerPlugin(...))``, or ``dask worker --preload
    reference_impl.shuffle.preload``. A worker that already has a ProxifyHostFile
    (a LocalDeviceCluster worker) keeps it; its device becomes the process default.
    The shuffle's worker extension is installed too.
    """

    name = "device-setup"
    idempotent = True

    def __init__(
        self,
        device: str = "sim",
        device_capacity: int | str | None = None,
        device_memory_limit: int | str | float | None = None,
        memory_limit: int | str | None = None,
        local_directory: str | None = None,
    ) -> None:
        self.options = {
            "device": device,
            "device_capacity": device_capacity,
            "device_memory_limit": device_memory_limit,
            "memory_limit": memory_limit,
            "local_directory": local_directory,
        }
        self._previous: Device | None = None

    def setup(self, worker: distributed.Worker) -> None:
        from .plugin import install_extension

        register()
        store = worker.data
        if not isinstance(store, ProxifyHostFile):
            old = store
            store = make_worker_store(
                **self.options, worker_local_directory=worker.local_directory
            )
            for key in list(old):  # normally none: the plugin runs before any task
                store[key] = old[key]
            # The worker reads its data through both; they must be the same mapping.
            worker.memory_manager.data = store
            worker.state.data = store
        self._previous = set_default_device(store.device)
        install_extension(worker)

    def teardown(self, worker: distributed.Worker) -> None:
        set_default_device(self._previous)


class LocalDeviceCluster(distributed.LocalCluster):
    """A LocalCluster whose workers each have their own device and ProxifyHostFile.

    ``device="sim"`` gives each worker a SimDevice of ``device_capacity``;
    ``device="cuda"`` gives each worker one GPU (``CUDA_VISIBLE_DEVICES`` rotated
    per worker). ``device_memory_limit`` (bytes, a size string or a fraction of
    the capacity) and ``memory_limit`` (host bytes before the store spills to
    disk) are the store's limits. ``worker_memory_limit`` is distributed's own
    per-worker limit (pause / restart on RSS), off by default because sim device
    memory is host RAM too. Loopback, no dashboard, unless given.
    """

    def __init__(
        self,
        n_workers: int = 2,
        device: str = "sim",
        device_memory_limit: int | str | float | None = None,
        memory_limit: int | str | None = None,
        local_directory: str | None = None,
        *,
        device_capacity: int | str | None = None,
        threads_per_worker: int = 1,
        worker_memory_limit: int | str | None = 0,
        **kwargs: Any,
    ) -> None:
        if device not in ("sim", "cuda"):
            raise ValueError(f"device must be 'sim' or 'cuda', got {device!r}")
        if kwargs.get("processes") is False and n_workers > 1:
            # In one process, comms pass objects by reference: a table would reach
            # another worker's store still on the sender's device.
            raise ValueError("processes=False supports one worker; use processes=True")
        if device == "cuda":
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            self._gpus = visible.split(",") if visible else _all_gpus()
            if n_workers > len(self._gpus):
                raise ValueError(f"{n_workers} workers but {len(self._gpus)} GPUs visible")
        else:
            self._gpus = []
        store_kwargs = {
            "device": device,
            "device_capacity": device_capacity,
            "device_memory_limit": device_memory_limit,
            "memory_limit": memory_limit,
            "local_directory": local_directory,
        }
        kwargs.setdefault("host", "127.0.0.1")
        kwargs.setdefault("dashboard_address", None)
        kwargs.setdefault("worker_dashboard_address", None)
        from .plugin import ShuffleWorkerPlugin

        register()  # this (the client's) process receives Tables too
        super().__init__(
            n_workers=n_workers,
            threads_per_worker=threads_per_worker,
            memory_limit=worker_memory_limit,
            local_directory=local_directory,
            data=(make_worker_store, store_kwargs),
            plugins={DeviceWorkerPlugin(**store_kwargs), ShuffleWorkerPlugin()},
            **kwargs,
        )

    def new_worker_spec(self) -> dict[Any, Any]:
        """One GPU per worker on CUDA: the worker sees its GPU first."""
        if not self._gpus:
            return super().new_worker_spec()
        free = [i for i in range(len(self._gpus)) if i not in self.worker_spec]
        if not free:
            raise ValueError("no GPU left for another worker")
        i = free[0]
        spec = copy.deepcopy(self.new_spec)
        order = self._gpus[i:] + self._gpus[:i]
        spec["options"] = {**spec["options"], "env": {"CUDA_VISIBLE_DEVICES": ",".join(order)}}
        return {i: spec}


def _all_gpus() -> list[str]:
    try:
        import cupy

        return [str(i) for i in range(cupy.cuda.runtime.getDeviceCount())]
    except Exception:
        return []
