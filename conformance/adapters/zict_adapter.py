"""Adapter for ``zict.Buffer`` with the fast tier playing "device" and zict.File as disk.

    zict.Buffer(fast=dict, slow=zict.Func(pickle.dumps, pickle.loads, zict.File(spill_dir)),
                n=device_limit, weight=nbytes)

zict has no host tier, no externals, no OOM hook and no integrity check, so it
does not declare them; what it declares and fails is in expected/zict.toml.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
from typing import Any

from conformance.api import Snapshot, StoreEnv, Unavailable


def _device_nbytes(device: Any, value: Any) -> int:
    """Device bytes ``value`` holds: each base allocation once, containers of any kind walked.

    This is the adapter's weight function, so it counts what the device ledger counts
    (a view costs its whole base allocation; a dataclass is looked into).
    """
    allocs: dict[int, int] = {}
    _collect(device, value, allocs)
    return sum(allocs.values())


def _collect(device: Any, value: Any, allocs: dict[int, int]) -> None:
    if isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            _collect(device, v, allocs)
    elif isinstance(value, dict):
        for v in value.values():
            _collect(device, v, allocs)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            _collect(device, getattr(value, f.name), allocs)
    elif device.is_device_array(value):
        aid, nbytes = device.allocation_of(value)
        allocs[aid] = nbytes


# What a zict.Buffer (and distributed's SpillBuffer, built on it) can honestly claim.
BUFFER_CAPABILITIES = frozenset(
    {
        "store",
        "store.spill.disk",
        "store.unspill.on_access",
        "store.lru.strict",
        "store.evict.manual",
        "store.threadsafe",
        "store.pickle",
    }
)


def buffer_tiers(buffer: Any) -> dict[Any, str]:
    """Fast keys play "device", slow keys are on "disk"; reads only, no unspill."""
    tiers = {k: "device" for k in list(buffer.fast.keys())}
    tiers.update({k: "disk" for k in list(buffer.slow.keys())})
    return tiers


class ZictAdapter:
    name = "zict"
    capabilities = BUFFER_CAPABILITIES

    def __init__(self) -> None:
        import zict

        self._zict = zict
        self.version = zict.__version__

    def create_store(self, env: StoreEnv) -> Any:
        z = self._zict
        slow = z.Func(pickle.dumps, pickle.loads, z.File(env.spill_dir))
        device = env.device
        return z.Buffer(
            fast={}, slow=slow, n=env.device_limit, weight=lambda k, v: _device_nbytes(device, v)
        )

    def inspect(self, store: Any) -> Snapshot:
        fast, slow = store.fast, store.slow
        tiers = buffer_tiers(store)
        directory = slow.d.directory
        disk = 0
        for fn in os.listdir(directory):
            disk += os.path.getsize(os.path.join(directory, fn))
        return Snapshot(
            tiers=tiers,
            device_bytes=int(fast.total_weight),
            host_bytes=0,
            disk_bytes=disk,
            lru=list(fast.order),
        )

    def evict(self, store: Any, nbytes: int) -> int:
        freed = 0
        while freed < nbytes and len(store.fast):
            _, _, weight = store.fast.evict()
            freed += int(weight)
        return freed

    def close_store(self, store: Any) -> None:
        # Delete key by key: MutableMapping.clear() pops, so loads every value, and a damaged
        # spill file (STORE-INTEG-*) would make closing raise (an adapter artefact).
        store.fast.clear()
        for key in list(store.slow):
            del store.slow[key]
        store.close()


def adapter() -> ZictAdapter:
    try:
        return ZictAdapter()
    except ImportError as exc:
        raise Unavailable(f"zict is not installed ({exc}); pip install zict") from exc
