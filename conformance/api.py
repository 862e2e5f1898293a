"""The adapter protocol: how the suite talks to an implementation (public, versioned).

``--impl=module:attr`` names an object with this shape, or a factory that takes
no arguments and returns one. The suite owns the device and the ground truth
(the device's ledger); the adapter only creates, inspects and closes stores.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

PROTOCOL_VERSION = "1.0"

Tier = Literal["device", "host", "disk"]
TIERS: tuple[str, ...] = ("device", "host", "disk")


@dataclass(frozen=True)
class StoreEnv:
    """What a store is created with. ``spill_dir`` is an empty directory owned by the test."""

    device: Any
    device_limit: int
    host_limit: int | None
    spill_dir: str


@dataclass(frozen=True)
class Snapshot:
    """What ``inspect(store)`` reports. Taking it must not unspill or change recency.

    ``lru`` lists the device-tier keys from least to most recently used, or is
    None when the implementation does not expose recency.
    """

    tiers: Mapping[Hashable, str]
    device_bytes: int
    host_bytes: int
    disk_bytes: int
    lru: Sequence[Hashable] | None = None


@dataclass(frozen=True)
class ShuffleEnv:
    """Where a shuffle runs. The suite started the cluster (loopback, one process and one
    thread per worker) and stops it; the adapter only uses it.

    ``device_kind`` is set for ``shuffle.device`` implementations: every worker process
    then has its own device of ``device_capacity`` bytes as its default
    (``reference_impl.get_device("auto")`` inside a task), and ``device_limit`` is the
    budget the shuffle must keep to on each worker. ``host_limit`` is the host bytes per
    worker before spilling to disk, and ``spill_dir`` holds the workers' local directories.
    """

    client: Any
    n_workers: int
    spill_dir: str
    device_kind: str | None = None
    device_capacity: int | None = None
    device_limit: int | None = None
    host_limit: int | None = None


@runtime_checkable
class Implementation(Protocol):
    """An implementation under test.

    Store methods are required when ``"store"`` is in ``capabilities``;
    ``register_external`` when ``"store.external"`` is; ``shuffle`` when ``"shuffle"`` is.
    ``evict(store, nbytes) -> int`` is optional: without it the suite calls
    ``store.evict(nbytes)``; without ``"store.evict.manual"`` either must raise
    NotImplementedError or be absent.
    """

    name: str
    version: str
    capabilities: frozenset[str]

    def create_store(self, env: StoreEnv) -> MutableMapping: ...
    def inspect(self, store: Any) -> Snapshot: ...
    def register_external(self, store: Any, obj: Any) -> Any: ...
    def close_store(self, store: Any) -> None: ...
    def shuffle(
        self, inputs: Any, on: Sequence[str], npartitions: int, env: ShuffleEnv
    ) -> Sequence[Any]: ...


class ShuffleHooks(Protocol):
    """The optional parts of a shuffle adapter (each one is looked up with ``getattr``).

    - ``setup_cluster(env)``: called once per cluster before any shuffle (register worker
      plugins, ...). Whatever it installs may stay for the cluster's life.
    - ``load_inputs(tables, env) -> inputs``: put the input ``pyarrow.Table`` s on the
      workers (futures, a dask collection); the suite waits for them before it measures.
      Without it, ``shuffle`` receives the ``pyarrow.Table`` s themselves.
    - ``shuffle(inputs, on, npartitions, env)`` returns ``npartitions`` ``pyarrow.Table`` s,
      output ``i`` at index ``i``, each with the inputs' schema.
    - ``phase_of(key) -> "transfer" | "barrier" | "unpack" | None``: which phase a task key
      of a running shuffle belongs to, so that the suite can kill a worker inside a phase.
    - ``memory_budget(env) -> int``: the bytes per worker the shuffle promises to stay
      within, on the device (``shuffle.device``) or in RSS; default ``env.device_limit``.
    - ``cluster_config() -> dict``: dask config in force while the cluster starts and runs.
    - ``accepts_worker_tables = True`` (an attribute): ``load_inputs`` also takes a
      :class:`WorkerTables`, inputs already made on the workers (``stress`` generates its
      inputs there, so that no input table travels from the caller or inside a task).
    - ``shuffle_map(inputs, on, npartitions, env, fn) -> list``: ``shuffle``, but the list
      holds ``fn(output i as a pyarrow.Table)``, computed on the worker that holds output
      ``i`` (``fn`` is a picklable function of one table); only its result travels. ``stress``
      checks its outputs so (per-row digests on the workers).
    - ``shuffle_some(inputs, on, npartitions, env, which) -> list``: only the outputs
      ``which`` (a list of output numbers), output ``which[j]`` at index ``j``, selected
      before anything is computed, as a lazy front end selects partitions of a shuffled
      collection (``ddf.shuffle(...).partitions[which]``): clause 14.25.
    - ``shuffle_to(inputs, column, npartitions, env) -> list``: a shuffle by given
      destinations (``shuffle.destinations``): each row to the output its integer ``column``
      names, the outputs without ``column``: clause 14.26.
    - ``dask_method`` (an attribute, ``shuffle.dask``): the ``shuffle_method`` name dask's own
      API runs the implementation under, on ``env.client``'s cluster: clauses 14.27, 14.28.
    """

    def setup_cluster(self, env: ShuffleEnv) -> None: ...
    def load_inputs(self, tables: Sequence[Any], env: ShuffleEnv) -> Any: ...
    def phase_of(self, key: str) -> str | None: ...
    def memory_budget(self, env: ShuffleEnv) -> int: ...
    def cluster_config(self) -> dict[str, Any]: ...
    def shuffle_map(
        self, inputs: Any, on: Sequence[str], npartitions: int, env: ShuffleEnv, fn: Any
    ) -> Sequence[Any]: ...
    def shuffle_some(
        self, inputs: Any, on: Sequence[str], npartitions: int, env: ShuffleEnv, which: Sequence[int]
    ) -> Sequence[Any]: ...


class WorkerTables(list):
    """Input tables already on the workers: ``distributed.Future`` s of ``pyarrow.Table`` s
    (each made on a worker), with their common ``schema``. Passed to ``load_inputs`` only of
    an adapter that declares ``accepts_worker_tables = True``; the caller may release the
    futures once ``load_inputs`` returned (what it returned holds what it needs)."""

    schema: Any = None


# Which methods each capability makes mandatory (checked at start-up).
REQUIRED_METHODS: dict[str, tuple[str, ...]] = {
    "store": ("create_store", "inspect", "close_store"),
    "store.external": ("register_external",),
    "shuffle": ("shuffle",),
}


class Unavailable(RuntimeError):
    """Raised by an adapter factory whose implementation cannot run here (not installed, ...)."""


# What a pandas-backed shuffle adapter's Unavailable says when pandas or dask's dataframe
# cannot be imported: the extra that installs them.
SHUFFLE_EXTRA_HINT = (
    "pandas and dask[dataframe] are needed: pip install 'proxify-conformance[shuffle]'"
)


def evict(impl: Any, store: Any, nbytes: int) -> int:
    """Call the adapter's ``evict`` if it has one, otherwise ``store.evict``."""
    fn = getattr(impl, "evict", None)
    if fn is not None:
        return fn(store, nbytes)
    store_evict = getattr(store, "evict", None)
    if store_evict is None:
        raise NotImplementedError("no evict()")
    return store_evict(nbytes)
