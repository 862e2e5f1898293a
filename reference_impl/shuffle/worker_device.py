"""Which device a shuffle task on a given worker allocates on."""

from __future__ import annotations

import distributed

from reference_impl.device import Device, get_device
from reference_impl.store import ProxifyHostFile


def worker_device(worker: distributed.Worker) -> Device:
    """The device ``worker``'s tasks allocate on: its store's. Not the process default,
    which in-process workers (``gen_cluster``, ``LocalCluster(processes=False)``) share,
    the last one set winning, so a Table made on it would not be this worker's."""
    data = worker.data
    return data.device if isinstance(data, ProxifyHostFile) else get_device("auto")
