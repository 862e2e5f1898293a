"""The cluster a shuffle implementation runs on, as the conformance suite builds it.

On sim (the default) this is the suite's own ``ShuffleCluster``: loopback worker processes,
each with its own SimDevice for ``shuffle.device`` implementations. On ``cuda`` it is a
``LocalDeviceCluster`` with one GPU per worker (``CUDA_VISIBLE_DEVICES``); with
``--scheduler`` the workers of an existing cluster. All expose what the scenarios use:
``client``, ``env``, ``adapter``, ``on_device``, ``settled()``, ``mark_baseline()``,
``kill_in(phase)``, ``scheduler`` (None when it is not in this process), ``local_workers``
(the workers run on this machine: their RSS is sampled, SPEC 14.20) and ``close()``. Local
workers start with the suite's allocator settings (``shuffle_harness.WORKER_ENVIRON``).
"""

from __future__ import annotations

import os
from typing import Any

from conformance.api import ShuffleEnv
from conformance.shuffle.harness import (
    CAPACITY_FACTOR,
    PhaseKiller,
    ShuffleCluster,
    check_worker_environ,
    fork_server_with,
    spawn_environ,
    worker_addresses,
    worker_environ,
)

from .sampler import files_bytes
from .settings import Settings

WORKERS_TIMEOUT = 300.0


def open_cluster(
    adapter: Any,
    settings: Settings,
    spill_dir: str,
    *,
    device_limit: int,
    host_limit: int | None,
) -> Any:
    if settings.scheduler:
        return _Attached(adapter, settings, spill_dir, device_limit, host_limit)
    if settings.device == "cuda" and "shuffle.device" in adapter.capabilities:
        return _Gpus(adapter, settings, spill_dir, device_limit, host_limit)
    cluster = ShuffleCluster(
        adapter,
        settings.device if settings.device != "auto" else "sim",
        spill_dir,
        n_workers=settings.workers,
        device_limit=device_limit,
        host_limit=host_limit,
    )
    cluster.scheduler = cluster.cluster.scheduler
    cluster.local_workers = True
    try:  # on a loaded machine the worker processes register after LocalCluster returns
        cluster.client.wait_for_workers(settings.workers, timeout=WORKERS_TIMEOUT)
    except BaseException:
        cluster.close()
        raise
    return cluster


class _Own:
    """The parts shared by the GPU cluster and an attached one."""

    adapter: Any
    client: Any
    env: ShuffleEnv
    spill_dir: str
    scheduler: Any = None
    local_workers = False

    def _finish(self, device_limit: int, host_limit: int | None, capacity: int | None) -> None:
        import distributed

        self.on_device = "shuffle.device" in self.adapter.capabilities
        n = len(worker_addresses(self.client))
        self.env = ShuffleEnv(
            client=self.client,
            n_workers=n,
            spill_dir=self.spill_dir,
            device_kind=self.kind if self.on_device else None,
            device_capacity=capacity if self.on_device else None,
            device_limit=device_limit,
            host_limit=host_limit,
        )
        setup = getattr(self.adapter, "setup_cluster", None)
        if setup is not None:
            setup(self.env)
        assert isinstance(self.client, distributed.Client)

    def worker_pids(self) -> dict[str, int]:
        return self.client.run(os.getpid)

    def mark_baseline(self) -> None:
        pass

    def settled(self, timeout: float = 10.0) -> list[str] | None:
        n = files_bytes(self.spill_dir) if os.path.isdir(self.spill_dir) else 0
        return [f"{n:,} bytes of files left under {self.spill_dir}"] if n else None

    def kill_in(self, phase: str) -> PhaseKiller:
        phase_of = getattr(self.adapter, "phase_of", None)
        if phase_of is None or self.scheduler is None:
            raise NotImplementedError(f"{self.adapter.name}: cannot kill a worker in a phase here")
        killer = PhaseKiller(phase, phase_of, self.worker_pids(), scheduler=self.scheduler)
        self.scheduler.add_plugin(killer, name=f"{killer.name}-{phase}")
        return killer

    def __enter__(self) -> _Own:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Gpus(_Own):
    kind = "cuda"
    local_workers = True

    def __init__(self, adapter, settings, spill_dir, device_limit, host_limit) -> None:
        import dask
        import distributed

        from reference_impl.shuffle import LocalDeviceCluster

        self.adapter, self.spill_dir = adapter, spill_dir
        fork_server_with(environ := spawn_environ(worker_environ()))
        with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
            self.cluster = LocalDeviceCluster(
                settings.workers,
                device="cuda",
                device_memory_limit=device_limit,
                memory_limit=host_limit,
                local_directory=spill_dir,
            )
        self.client = distributed.Client(self.cluster, set_as_default=False)
        self.client.wait_for_workers(settings.workers, timeout=WORKERS_TIMEOUT)
        check_worker_environ(self.client, environ, settings.workers)
        self.scheduler = self.cluster.scheduler
        self._finish(device_limit, host_limit, None)

    def close(self) -> None:
        try:
            self.client.close()
        finally:
            self.cluster.close()


class _Attached(_Own):
    """An existing cluster: its workers are not ours to start, stop or kill."""

    def __init__(self, adapter, settings, spill_dir, device_limit, host_limit) -> None:
        import distributed

        self.adapter, self.spill_dir = adapter, spill_dir
        self.kind = settings.device if settings.device != "auto" else "sim"
        self.client = distributed.Client(settings.scheduler, set_as_default=False, timeout="30s")
        self._finish(device_limit, host_limit, CAPACITY_FACTOR * device_limit)

    def settled(self, timeout: float = 10.0) -> list[str] | None:
        return None  # the workers' directories are not ours to look into

    def close(self) -> None:
        self.client.close()
