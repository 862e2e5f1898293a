"""The memory-bounded shuffle inside dask's own graph, under dask's own API.

``DataFrame.shuffle``, ``merge``/``join``, shuffle-based ``groupby`` aggregations,
``drop_duplicates``, ``set_index`` and ``sort_values`` all lower to one dask-expr
expression, ``Shuffle``, over a frame whose ``_partitions`` column dask has already
filled with each row's output (its own hash, numeric keys cast to float64, or its
quantiles). With ``dataframe.shuffle.method`` set to ``"device"`` that expression lowers
to :class:`DeviceShuffle`: the reference's transfer, barrier and unpack tasks, with each
row sent where ``_partitions`` says. Nothing is submitted before ``compute``/``persist``
and no future is embedded, so the result is an ordinary dask collection.

dask offers no registry of shuffle methods: ``Shuffle._lower`` is wrapped, here only, for
the dask versions in ``TESTED_DASK`` (another version fails loudly at :func:`install`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dask
import distributed
import pandas as pd
import pyarrow as pa
from dask._task_spec import Alias, Task, TaskRef
from dask.dataframe.dask_expr._shuffle import AssignPartitioningIndex, Shuffle, SimpleShuffle
from dask.utils import get_default_shuffle_method
from distributed.diagnostics.plugin import SchedulerPlugin

from .barrier import barrier
from .frames import arrow_schema_of, check_frame_schema, to_frame, to_transfer_input
from .install import ensure_plugins, max_restarts
from .spec import ShuffleSpec, barrier_spec, new_shuffle_id
from .transfer import transfer
from .unpack import unpack

METHOD = "device"  # the value of dask's ``dataframe.shuffle.method`` that routes here
TESTED_DASK = ("2026.8.",)  # prefixes of the dask versions whose Shuffle._lower is wrapped
DESTINATION = "_partitions"  # the column dask's lowering fills with each row's output

_original_lower: Any = None


def install(client: distributed.Client | None = None) -> None:
    """Route dask's shuffles with method ``"device"`` here, and put the coordinator and
    the worker extension on ``client``'s cluster (the default client's if None)."""
    install_lowering()
    ensure_plugins(client or distributed.get_client())


@contextmanager
def device_shuffle(client: distributed.Client | None = None) -> Iterator[None]:
    """The switch: inside it, every dask shuffle that does not name another method runs
    through the reference's memory-bounded shuffle on ``client``'s cluster."""
    install(client)
    with dask.config.set({"dataframe.shuffle.method": METHOD}):
        yield


class DeviceShufflesSeen(SchedulerPlugin):
    """Scheduler plugin: the device shuffles whose graphs reached the scheduler (their
    barriers' keys, in order). dask may plan a computation with no shuffle at all (a
    ``sort_values(...).compute()`` sorts one concatenated partition), so a pipeline that
    must use this shuffle can be checked: ``cluster.scheduler.add_plugin(seen)`` on a
    local cluster (its scheduler lives in this process), then read ``seen.barriers``."""

    name = "device-shuffles-seen"

    def __init__(self) -> None:
        self.barriers: list[str] = []

    def update_graph(self, scheduler: Any, *, tasks: Any = (), **kwargs: Any) -> None:
        found = (scheduler.tasks.get(k) for k in tasks)
        self.barriers += [ts.key for ts in found if ts is not None and barrier_spec(ts) is not None]


def install_lowering() -> None:
    """Route dask's shuffles with method ``"device"`` here, in this process (where dask
    lowers the expressions: the client's); :func:`install` also sets up a cluster."""
    global _original_lower
    if _original_lower is not None:
        return
    if not dask.__version__.startswith(TESTED_DASK):
        raise RuntimeError(
            f"the device shuffle wraps dask-expr's Shuffle._lower, tested with dask "
            f"{', '.join(v + '*' for v in TESTED_DASK)}; this is dask {dask.__version__}"
        )
    original = Shuffle._lower

    @functools.wraps(original)
    def _lower(self: Any) -> Any:
        if (self.method or get_default_shuffle_method()) != METHOD:
            return original(self)
        return _lowered(self)

    Shuffle._lower = _lower
    _original_lower = original


def _check_hashable_keys(keys: Any, meta: Any) -> None:
    """dask computes each row's output by hashing its keys with pandas, which cannot hash
    list, struct or map values: say so naming the column, before anything is submitted,
    instead of pandas' "unhashable type" from inside a task (dask's tasks and P2P shuffles
    fail that way too; the eager ``shuffle_dataframe`` hashes nested keys itself)."""
    from reference_impl.table.nested import is_nested

    for key in keys if isinstance(keys, list) else [keys]:
        try:
            dtype = meta[key].dtype if key in meta.columns else None
        except TypeError:  # an unhashable key (a Series, an expression): dask's to judge
            continue
        if isinstance(dtype, pd.ArrowDtype) and is_nested(dtype.pyarrow_dtype):
            raise TypeError(
                f"column {key!r} has dtype {dtype}: dask hashes shuffle keys with pandas, which "
                "cannot hash list, struct or map values; shuffle by a flat column made from it"
            )


def _lowered(expr: Any) -> Any:
    """``expr`` (a dask-expr Shuffle) as a DeviceShuffle, its frame checked here, on the
    client, before anything is submitted (carried dtypes allowed: :mod:`.carriers`)."""
    index = expr.partitioning_index
    index = index[0] if isinstance(index, list) and len(index) == 1 else index
    meta = expr.frame._meta
    if index != DESTINATION or DESTINATION not in meta.columns:
        raise NotImplementedError(
            f"the device shuffle takes the {DESTINATION!r} column dask's lowering adds, "
            f"not a partitioning index of {index!r}"
        )
    check_frame_schema(meta, carriers=True)
    _check_hashable_keys(expr.original_partitioning_index, meta)
    options = {**(expr.options or {}), "max_restarts": max_restarts()}
    return DeviceShuffle(
        expr.frame,
        DESTINATION,
        expr.npartitions_out,
        expr.ignore_index,
        options,
        expr.original_partitioning_index,
    )


class _Unfused(Task):
    """A task dask's graph optimizations never fuse into another: an unpack must keep its
    key, which the coordinator restricts to the worker its shards went to (fused, say
    into ``.values``'s chain, it ran anywhere)."""

    @property
    def block_fusion(self) -> bool:
        return True


def unpack_frame(spec: Any, output: int, meta: Any) -> Any:
    """Task: output ``output`` unpacked, as a frame cast to ``meta``, its ``_partitions``
    column (every row's is ``output``, so the shuffle did not carry it) restored."""
    return to_frame(unpack(spec, output), meta, constants={DESTINATION: output})


class DeviceShuffle(SimpleShuffle):
    """dask's Shuffle as the reference's tasks: per input partition its transfer (the
    partition made a Table inside it), the barrier, and per output its unpack (a frame
    cast to ``meta``)."""

    @property
    def _inlines_input(self) -> bool:
        return isinstance(self.frame, AssignPartitioningIndex)

    def dependencies(self) -> list:
        """Past the ``_partitions`` assignment, which each transfer runs inline (:meth:`_input`):
        its layer is not in the graph."""
        return self.frame.dependencies() if self._inlines_input else super().dependencies()

    def _input(self, i: int) -> Any:
        """Input partition ``i`` as the transfer's argument. dask's ``_partitions`` assignment
        runs inside the transfer, as a nested task: as a task of its own, each input was
        stored twice, once more with one more column, and with a tight host limit every such
        frame went to disk and back (SHUF-BOUND-003's RSS on reference-in-dask)."""
        if self._inlines_input:
            return self.frame._task((self.frame._name, i), i)
        return TaskRef((self.frame._name, i))

    def _layer(self) -> dict:
        # The outputs keep dask's deterministic keys; the shuffle's own tasks get an id of
        # this graph's: the same collection computed again (after .values, persist, or
        # while the last run's tasks are being forgotten) is a new shuffle, never a late
        # share of a run that has ended.
        shuffle_id = new_shuffle_id(self._name.split("-")[-1])
        npartitions = self.npartitions_out
        meta = self.frame._meta
        schema = arrow_schema_of(meta, index=not self.ignore_index)
        # dask fills _partitions with int64 output indices, whatever its meta says (for a
        # set_index by a datetime index of negative freq, meta says datetime64[ns]): the
        # destinations travel as the integers they are; the output is cast to meta after.
        at = schema.get_field_index(DESTINATION)
        schema = schema.set(at, schema.field(at).with_type(pa.int64()))
        spec = ShuffleSpec(  # the destinations are not carried: unpack_frame restores them
            shuffle_id, (DESTINATION,), npartitions, schema.remove(at),
            destination=True, max_restarts=int(self.options["max_restarts"]),
        )  # fmt: skip
        dsk: dict = {}
        transfers = []
        for i in range(self.frame.npartitions):
            # Each partition becomes the transfer's input inside the transfer task (a nested
            # task, inlined): a pandas partition as host Arrow, which the transfer moves to the
            # device a chunk at a time. The output is cast to meta inside its unpack. No device
            # Table is ever a task's result, which another worker could fetch (in-process
            # workers share a process, so a fetched Table would land on the sender's device).
            table = Task(spec.input_key(i), to_transfer_input, self._input(i), meta, schema, i)
            sent = Task(spec.transfer_key(i), transfer, spec, [i], table)
            dsk[sent.key] = sent
            transfers.append(sent.ref())
        done = Task(spec.barrier_key, barrier, spec, *transfers)
        dsk[done.key] = done
        parts_out = self._partitions if self._filtered else range(npartitions)
        for i, part in enumerate(parts_out):
            built = _Unfused(spec.unpack_key(part), unpack_frame, done.ref(), part, meta)
            dsk[built.key] = built
            dsk[(self._name, i)] = Alias((self._name, i), built.key)
        return dsk
