"""Adapter for ``reference_impl.ProxifyHostFile`` (public API only)."""

from __future__ import annotations

from typing import Any

from conformance.api import Snapshot, StoreEnv


class ReferenceAdapter:
    name = "reference"
    capabilities = frozenset(
        {
            "store",
            "store.spill.host",
            "store.spill.disk",
            "store.limit.host",
            "store.unspill.on_access",
            "store.lru.strict",
            "store.alias.dedup",
            "store.external",
            "store.oom.on_demand",
            "store.evict.manual",
            "store.threadsafe",
            "store.faults.disk",
            "store.integrity",
            "store.pickle",
            "store.proxy",
        }
    )

    def __init__(self) -> None:
        import reference_impl

        self.version = getattr(reference_impl, "__version__", "unknown")
        self._cls = reference_impl.ProxifyHostFile

    def create_store(self, env: StoreEnv) -> Any:
        return self._cls(
            device=env.device,
            device_memory_limit=env.device_limit,
            memory_limit=env.host_limit,
            local_directory=env.spill_dir,
        )

    def inspect(self, store: Any) -> Snapshot:
        snap = store.snapshot()
        return Snapshot(
            tiers=dict(snap.tiers),
            device_bytes=snap.device_bytes,
            host_bytes=snap.host_bytes,
            disk_bytes=snap.disk_bytes,
            lru=list(snap.lru),
        )

    def register_external(self, store: Any, obj: Any) -> Any:
        return store.register_external(obj)

    def evict(self, store: Any, nbytes: int) -> int:
        return store.evict(nbytes)

    def close_store(self, store: Any) -> None:
        store.close()


def adapter() -> ReferenceAdapter:
    from conformance.api import Unavailable

    try:
        return ReferenceAdapter()
    except (ImportError, AttributeError) as exc:
        raise Unavailable(f"reference_impl.ProxifyHostFile cannot be imported: {exc!r}") from exc
