"""Adapter for ``distributed.spill.SpillBuffer(spill_dir, target=device_limit)``.

The fast tier plays "device"; the slow tier is distributed's on-disk tier.
"""

from __future__ import annotations

from typing import Any

from conformance.adapters.zict_adapter import BUFFER_CAPABILITIES, buffer_tiers
from conformance.api import Snapshot, StoreEnv, Unavailable


class SpillBufferAdapter:
    name = "distributed-spill"
    capabilities = BUFFER_CAPABILITIES

    def __init__(self) -> None:
        import distributed
        from distributed.spill import SpillBuffer

        self._cls = SpillBuffer
        self.version = distributed.__version__

    def create_store(self, env: StoreEnv) -> Any:
        return self._cls(env.spill_dir, target=env.device_limit)

    def inspect(self, store: Any) -> Snapshot:
        return Snapshot(
            tiers=buffer_tiers(store),
            device_bytes=int(store.fast.total_weight),
            host_bytes=0,
            disk_bytes=int(store.spilled_total.disk),
            lru=list(store.fast.order),
        )

    def evict(self, store: Any, nbytes: int) -> int:
        freed = 0
        while freed < nbytes and len(store.fast):
            w = store.evict()
            if w < 0:
                break
            freed += int(w)
        return freed

    def close_store(self, store: Any) -> None:
        store.close()
        # Key by key: MutableMapping.clear() pops, so loads every value, and a damaged spill
        # file (STORE-INTEG-*) would make closing raise (an adapter artefact).
        for key in list(store):
            del store[key]


def adapter() -> SpillBufferAdapter:
    try:
        return SpillBufferAdapter()
    except ImportError as exc:
        raise Unavailable(f"distributed is not installed ({exc})") from exc
