"""Adapter for ``reference_impl``: its ProxifyHostFile and its shuffle (public API only)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conformance.adapters._spread import read_outputs, spread
from conformance.api import ShuffleEnv, Snapshot, StoreEnv


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
            "store.spill.authenticated",
            "store.pickle",
            "store.proxy",
            "store.table",
            "shuffle",
            "shuffle.device",
            "shuffle.bounded",
            "shuffle.spill",
            "shuffle.nulls",
            "shuffle.recover",
            "shuffle.checks",
            "shuffle.dtypes",
            "shuffle.nested",
        }
    )
    accepts_worker_tables = True  # load_inputs also takes a conformance.api.WorkerTables

    def __init__(self) -> None:
        import reference_impl

        reference_impl.register()  # the reference's serializers, in the process judging it
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

    # ------------------------------------------------------------------ shuffle
    def setup_cluster(self, env: ShuffleEnv) -> None:
        """Each worker's store on the device the suite gave it, and the shuffle extension."""
        from reference_impl.shuffle import DeviceWorkerPlugin

        env.client.register_plugin(
            DeviceWorkerPlugin(
                device="auto", device_memory_limit=env.device_limit, memory_limit=env.host_limit
            )
        )

    def load_inputs(self, tables: Sequence[Any], env: ShuffleEnv) -> list[Any]:
        """Spread round-robin; not pinned, so that an input lost with its worker can be
        computed again elsewhere (pinned, it would wait for that worker forever). The tables
        (or futures of them on the workers) never travel inside the tasks (``_spread``)."""
        return spread(env, _to_device, tables)

    def shuffle(self, inputs: Any, on: Sequence[str], npartitions: int, env: ShuffleEnv) -> list:
        return self.shuffle_map(inputs, on, npartitions, env)

    def shuffle_map(
        self, inputs: Any, on: Sequence[str], npartitions: int, env: ShuffleEnv, fn: Any = None
    ) -> list:
        """``shuffle``, with ``fn`` (when given) applied to each output's Arrow table on the
        worker that holds it; outputs are read where they are, a batch bounded by the host
        limit at a time (``_spread.read_outputs``)."""
        from reference_impl.shuffle import shuffle

        outputs = shuffle(env.client, inputs, list(on), npartitions)
        return read_outputs(env, outputs, _to_arrow, fn=fn)

    def phase_of(self, key: str) -> str | None:
        for phase in ("transfer", "barrier", "unpack"):
            if key.startswith("devshuffle-") and f"-{phase}" in key:
                return phase
        return None


def _to_device(table: Any) -> Any:
    """Task: an Arrow table onto the worker's own device."""
    from reference_impl import Table, get_device

    return Table.from_arrow(table, get_device("auto"))


def _to_arrow(table: Any, fn: Any = None) -> Any:
    """Task: an output as Arrow (and ``fn`` of it, when given)."""
    arrow = table.to_arrow()
    return arrow if fn is None else fn(arrow)


def adapter() -> ReferenceAdapter:
    from conformance.api import Unavailable

    try:
        return ReferenceAdapter()
    except (ImportError, AttributeError) as exc:
        raise Unavailable(f"reference_impl.ProxifyHostFile cannot be imported: {exc!r}") from exc
