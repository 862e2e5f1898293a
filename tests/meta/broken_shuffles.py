"""Deliberately broken shuffles: each wraps the reference shuffle adapter with ONE bug.

Every adapter here is the reference's shuffle (``conformance/adapters/reference.py``) with
one mistake a real implementation makes: a step before the shuffle (on the client or in a
task on the workers), a different way to build or collect the outputs, or a lenient
argument check. ``EXPECTED`` maps each to the conformance ID that must catch it in the
``ci`` profile, and ``--impl=broken_shuffles:<name>`` loads any of them; ``control`` is the
same wrapper without a bug. Each class names the SPEC.md clauses its bug breaks
(``violates``).

The workers unpickle the task functions of this module by name: the suite's subprocess
gets ``tests/meta`` on ``PYTHONPATH`` (``conftest.run_suite``), which the nannies' spawned
worker processes inherit.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from conformance.adapters._spread import read_outputs, spread, workers
from conformance.adapters.reference import ReferenceAdapter


# --------------------------------------------------------------------------- tasks
# Module-level functions: they run on the workers (pickled by reference).
def _table(value: Any) -> Any:
    """The Table itself (a worker's store hands tasks proxies of its values)."""
    from reference_impl.store.proxy import unwrap

    return unwrap(value)


def _to_arrow(table: Any) -> Any:
    return _table(table).to_arrow()


def _arrow_schema(table: Any) -> Any:
    return _table(table).to_arrow().schema


def _num_rows(table: Any) -> int:
    return _table(table).num_rows


def _on_device(arrow: Any) -> Any:
    from reference_impl import Table, get_device

    return Table.from_arrow(arrow, get_device("auto"))


def _key_values(column: Any) -> list:
    """A key column as Python values that compare as keys do (NaN = NaN, -0.0 = 0.0)."""
    import pyarrow as pa

    if pa.types.is_temporal(column.type):
        column = column.cast(pa.int64())
    out = []
    for v in column.to_pylist():
        if isinstance(v, float):
            v = ("nan",) if math.isnan(v) else v + 0.0
        out.append(v)
    return out


# --------------------------------------------------------------------------- the wrapper
class _BrokenShuffle(ReferenceAdapter):
    """The reference's shuffle adapter in four overridable steps: ``prepare`` (the inputs,
    keys and count the reference shuffle gets), the reference shuffle, ``finish`` (the task
    that turns an output Table into Arrow, read a batch at a time as the reference adapter
    reads them) and ``collect`` (the Arrow tables, in order)."""

    capabilities = frozenset(c for c in ReferenceAdapter.capabilities if c.startswith("shuffle"))
    violates: tuple[str, ...] = ()
    # The bugs live in shuffle(): no shuffle_map, so that stress runs them too (it takes the
    # path of an adapter that returns its outputs; issue 24's RSS bound is checked there too).
    shuffle_map = None

    @staticmethod
    def finish(table: Any, on: Sequence[str] = ()) -> Any:
        return _to_arrow(table)

    def shuffle(self, inputs: Any, on: Sequence[str], npartitions: int, env: Any) -> list:
        import dask.config

        from reference_impl.shuffle import shuffle

        inputs, on, npartitions = self.prepare(list(inputs), list(on), npartitions, env)
        limit = {} if self.max_restarts is None else {"reference-impl.shuffle.max-restarts": self.max_restarts}
        with dask.config.set(limit):
            outputs = shuffle(env.client, inputs, on, npartitions)
        # Read each output on its holder, in batches, as the reference adapter does.
        errors = "return" if self.keep_errors else "raise"
        return self.collect(read_outputs(env, outputs, self.finish, errors=errors, on=on), env)

    def shuffle_some(self, inputs: Any, on: Sequence[str], npartitions: int, env: Any, which: Sequence[int]) -> list:
        """Outputs ``which`` (14.25), taken from the whole shuffle: the control selects right."""
        outputs = self.shuffle(inputs, on, npartitions, env)
        return [outputs[i] for i in self.selected(list(which))]

    @staticmethod
    def selected(which: list[int]) -> list[int]:
        """The outputs a selection builds."""
        return which

    keep_errors = False  # collect gets each failed read's exception (read_outputs' errors)
    max_restarts: int | None = None  # None: the reference's own (a lost worker restarts it)

    def prepare(self, inputs: list, on: list[str], npartitions: int, env: Any):
        return inputs, on, npartitions

    def collect(self, arrow: list, env: Any) -> list:
        return arrow

    def _per_input(self, fn, inputs: list, env: Any, *args: Any) -> list:
        """``fn(input, *args)`` as a task on the worker that holds each input."""
        holders = env.client.who_has(inputs)
        return [
            env.client.submit(
                fn, f, *args, workers=sorted(holders.get(f.key, ())) or None, pure=False
            )
            for f in inputs
        ]


class control(_BrokenShuffle):  # noqa: N801 - a factory name: --impl=broken_shuffles:control
    """The wrapper without a bug: the zoo's control."""

    name = "wrapped-reference-shuffle"


# 1 ------------------------------------------------------------------------------ 14.7
class DropsEmptyOutputs(_BrokenShuffle):
    """Returns only the outputs that received rows (an output without shards is 'nothing')."""

    name = "broken-shuffle-drops-empty"
    violates = ("14.7",)

    def collect(self, arrow, env):
        return [t for t in arrow if t.num_rows]


# 2 ------------------------------------------------------------------------------ 14.9
class WorkerOrder(_BrokenShuffle):
    """Collects the outputs worker by worker, assuming round-robin placement (output i on
    worker i % n), and returns them in that order: a row's index depends on the workers."""

    name = "broken-shuffle-worker-order"
    violates = ("14.9",)

    def collect(self, arrow, env):
        n = len(workers(env))
        out = []
        for w in range(n):  # worker by worker
            out.extend(arrow[w::n])
        return out


# 3 ------------------------------------------------------------------------------ 14.6
def _with_bit_keys(table: Any, on: Sequence[str]) -> Any:
    """Float keys also as their bit patterns (integer hashing is the fast path)."""
    import numpy as np
    import pyarrow as pa

    t = _to_arrow(table)
    for k in on:
        col = t.column(k).combine_chunks()
        if pa.types.is_floating(col.type):
            ints = np.int32 if col.type == pa.float32() else np.int64
            bits = col.to_numpy(zero_copy_only=False).view(ints)
            mask = col.is_null().to_numpy(zero_copy_only=False)
            t = t.append_column(f"__bits_{k}", pa.array(bits, mask=mask))
    return _on_device(t)


def _drop_bit_keys(table: Any, on: Sequence[str] = ()) -> Any:
    t = _to_arrow(table)
    return t.select([n for n in t.column_names if not n.startswith("__bits_")])


class HashesFloatBits(_BrokenShuffle):
    """Hashes float keys by their bits: -0.0 and 0.0 (and NaNs with different payloads)
    are equal keys with different bits, so they land in different outputs."""

    name = "broken-shuffle-float-bits"
    violates = ("14.6",)
    finish = staticmethod(_drop_bit_keys)

    def prepare(self, inputs, on, npartitions, env):
        import pyarrow as pa

        schema = env.client.submit(_arrow_schema, inputs[0], pure=False).result()
        floats = {k for k in on if pa.types.is_floating(schema.field(k).type)}
        if not floats:
            return inputs, on, npartitions
        prepared = self._per_input(_with_bit_keys, inputs, env, on)
        return prepared, [f"__bits_{k}" if k in floats else k for k in on], npartitions


# 4 ------------------------------------------------------------------------------ 14.8
def _numpy_columns(table: Any, on: Sequence[str] = ()) -> Any:
    """The output rebuilt column by column through NumPy (zero-copy where it can be)."""
    import pyarrow as pa

    t = _to_arrow(table)
    cols = []
    for col in t.columns:
        if pa.types.is_integer(col.type) and col.null_count:
            # to_numpy gives float64 with NaN for null; from_pandas turns NaN back into null
            col = pa.array(col.to_numpy(), from_pandas=True)
        cols.append(col)
    return pa.table(cols, names=t.column_names)


class IntsWithNullsToFloat(_BrokenShuffle):
    """Integer columns with nulls come out as float64 (a NumPy round trip)."""

    name = "broken-shuffle-int-nulls-float"
    violates = ("14.8",)
    finish = staticmethod(_numpy_columns)


# 5 ------------------------------------------------------------------------------ 14.2
def _coalesce(*tables: Any) -> Any:
    from reference_impl import Table

    return Table.concat([_table(t) for t in tables])


class CoalescesOnOneWorker(_BrokenShuffle):
    """Concatenates all inputs into one table on the first worker before shuffling (one
    transfer task, one kernel launch): that worker's device holds the whole data at once."""

    name = "broken-shuffle-one-worker"
    violates = ("14.2",)

    def prepare(self, inputs, on, npartitions, env):
        first = workers(env)[0]
        whole = env.client.submit(_coalesce, *inputs, workers=[first], pure=False)
        return [whole], on, npartitions


# 6 ------------------------------------------------------------------------------ 14.5
class PartialAfterWorkerLoss(_BrokenShuffle):
    """Returns what it could get when a worker dies: an output whose task raised becomes an
    empty table of the inputs' schema, so the rows on the lost worker silently vanish."""

    name = "broken-shuffle-partial-after-loss"
    violates = ("14.5", "14.1")
    keep_errors = True  # its collect turns each erred output into an empty table
    max_restarts = 0  # it gives up at the first loss, and what it returns is short
    error_word: str | None = None  # only errors naming this become empty tables (None: all)

    def prepare(self, inputs, on, npartitions, env):
        self._schema = env.client.submit(_arrow_schema, inputs[0], pure=False).result()
        return inputs, on, npartitions

    def collect(self, arrow, env):
        from reference_impl.shuffle import ShuffleError

        out = []
        for t in arrow:
            if isinstance(t, BaseException):
                if not isinstance(t, ShuffleError) or (
                    self.error_word is not None and self.error_word not in str(t)
                ):
                    raise t
                t = self._schema.empty_table()
            out.append(t)
        return out


class MissingFileReadsAsEmpty(PartialAfterWorkerLoss):
    """An output whose spill file is gone comes back empty, as if it had received no shards
    (what distributed's P2P does: a missing file reads as 'no data')."""

    name = "broken-shuffle-missing-file-empty"
    violates = ("14.14", "14.1")
    error_word = "missing"


# 7 ------------------------------------------------------------------------------ 14.11
def _keep_copy(table: Any, on: Sequence[str] = ()) -> Any:
    """The output as Arrow, also written to the worker's directory (to serve a retry)."""
    import distributed
    import pyarrow as pa

    t = _to_arrow(table)
    worker = distributed.get_worker()
    folder = os.path.join(worker.local_directory, "shuffle-outputs")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{worker.get_current_task()}.arrow")
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, t.schema) as writer:
        writer.write_table(t)
    return t


class LeavesOutputFiles(_BrokenShuffle):
    """Writes every output to a file under the worker's local directory and never removes
    it."""

    name = "broken-shuffle-leaves-files"
    violates = ("14.11",)
    finish = staticmethod(_keep_copy)


_RECENT_OUTPUTS: list[Any] = []  # per worker process: the last outputs read, on the device


def _remember_output(table: Any, on: Sequence[str] = ()) -> Any:
    """The output as Arrow, its device table kept in a worker-global list (a cache of the
    last outputs read, never emptied)."""
    _RECENT_OUTPUTS.append(table)
    del _RECENT_OUTPUTS[:-4]
    return _to_arrow(table)


class KeepsDeviceOutputs(_BrokenShuffle):
    """Keeps the last few outputs' device tables in a cache of its own: no task and no file
    is left, but their device memory stays in use after the shuffle is released."""

    name = "broken-shuffle-keeps-device-outputs"
    violates = ("14.11",)
    finish = staticmethod(_remember_output)


# 8 ------------------------------------------------------------------------------ 14.9
def _distinct_keys(table: Any, on: Sequence[str]) -> list:
    """The input's keys in order of first appearance."""
    t = _to_arrow(table)
    seen: dict = {}
    for row in zip(*(_key_values(t.column(k)) for k in on), strict=True):
        seen.setdefault(row, None)
    return list(seen)


def _with_codes(table: Any, on: Sequence[str], codes: dict) -> Any:
    import pyarrow as pa

    t = _to_arrow(table)
    rows = zip(*(_key_values(t.column(k)) for k in on), strict=True) if on else ()
    ids = [codes[row] for row in rows] if t.num_rows else []
    return _on_device(t.append_column("__code", pa.array(ids, pa.int64())))


def _drop_code(table: Any, on: Sequence[str] = ()) -> Any:
    t = _to_arrow(table)
    return t.drop_columns(["__code"])


class DictionaryCodes(_BrokenShuffle):
    """Dictionary-encodes the keys (one int64 code per distinct key, so multi-column and
    string keys hash as one integer) and shuffles on the code. The codes are numbered in
    order of first appearance, so where a row lands depends on the order of the inputs."""

    name = "broken-shuffle-input-order"
    violates = ("14.9",)
    finish = staticmethod(_drop_code)

    def prepare(self, inputs, on, npartitions, env):
        distinct = env.client.gather(self._per_input(_distinct_keys, inputs, env, on))
        codes: dict = {}
        for keys in distinct:
            for key in keys:
                codes.setdefault(key, len(codes))
        return self._per_input(_with_codes, inputs, env, on, codes), ["__code"], npartitions


# 9 ------------------------------------------------------------------------------ 14.4
def _drop_null_keys(table: Any, on: Sequence[str]) -> Any:
    import pyarrow.compute as pc

    t = _to_arrow(table)
    valid = None
    for k in on:
        v = pc.is_valid(t.column(k))
        valid = v if valid is None else pc.and_(valid, v)
    return _on_device(t.filter(valid))


class DropsNullKeys(_BrokenShuffle):
    """Drops rows with a null key before hashing (pandas groupby's ``dropna=True``)."""

    name = "broken-shuffle-drops-null-keys"
    violates = ("14.4", "14.1")

    def prepare(self, inputs, on, npartitions, env):
        return self._per_input(_drop_null_keys, inputs, env, on), on, npartitions


# 10 ----------------------------------------------------------------------------- 14.1
PIECE_ROWS = 32


def _piece(table: Any, start: int, stop: int) -> Any:
    return _table(table).slice(start, stop)


class OverlappingPieces(_BrokenShuffle):
    """Cuts inputs into pieces of at most PIECE_ROWS rows, taking each piece's last row as
    inclusive (``slice(start, stop + 1)``): the first row of every next piece goes twice."""

    name = "broken-shuffle-overlapping-pieces"
    violates = ("14.1",)

    def prepare(self, inputs, on, npartitions, env):
        rows = env.client.gather(self._per_input(_num_rows, inputs, env))
        holders = env.client.who_has(inputs)
        pieces = []
        for f, n in zip(inputs, rows, strict=True):
            bounds = [*range(0, n, PIECE_ROWS), n] if n else [0, 0]
            for a, b in zip(bounds, bounds[1:], strict=False):
                pieces.append(
                    env.client.submit(
                        _piece, f, a, min(b + 1, n),
                        workers=sorted(holders.get(f.key, ())) or None, pure=False,
                    )
                )
        return pieces, on, npartitions


# 11 ----------------------------------------------------------------------------- 14.13
def _with_schema(table: Any, on: Sequence[str] = ()) -> Any:
    """The output made contiguous and typed like an empty table of its schema (a concat
    on the device, while the output itself is still held)."""
    from reference_impl import Table

    t = _table(table)
    return Table.concat([t.slice(0, 0), t]).to_arrow()


class ConcatCopyOnUnpack(_BrokenShuffle):
    """Builds each output a second time on the device (a concat that copies) while the
    first is still there: two outputs' worth at the end of the unpack."""

    name = "broken-shuffle-unpack-copy"
    violates = ("14.13",)
    finish = staticmethod(_with_schema)


# 12 ----------------------------------------------------------------------------- 14.3
def _device_bytes(table: Any) -> int:
    return _table(table).nbytes


class FitsInDeviceMemory(_BrokenShuffle):
    """An in-memory shuffle that claims ``shuffle.spill``: refuses data larger than the
    workers' device memory instead of spilling."""

    name = "broken-shuffle-no-spill"
    violates = ("14.3",)

    def prepare(self, inputs, on, npartitions, env):
        total = sum(env.client.gather(self._per_input(_device_bytes, inputs, env)))
        room = env.device_limit * env.n_workers
        if total > room:
            raise MemoryError(
                f"the inputs ({total:,} bytes) do not fit the workers' device memory ({room:,})"
            )
        return inputs, on, npartitions


# 13 ----------------------------------------------------------------------------- 14.10
class SchemaOnTheAdapter(_BrokenShuffle):
    """Keeps the running shuffle's schema on the adapter (``self``) to cast the outputs to:
    a second shuffle at once overwrites it, and the first one's outputs are cast to the
    second one's schema."""

    name = "broken-shuffle-shared-schema"
    violates = ("14.10",)

    def prepare(self, inputs, on, npartitions, env):
        self._schema = env.client.submit(_arrow_schema, inputs[0], pure=False).result()
        return inputs, on, npartitions

    def collect(self, arrow, env):
        return [t.cast(self._schema) for t in arrow]


# 14 ----------------------------------------------------------------------------- 14.12
class CancelsInputsOnError(_BrokenShuffle):
    """When the shuffle raises, cancels every future it was handed (to free the workers'
    memory): the caller's inputs are gone."""

    name = "broken-shuffle-cancels-inputs"
    violates = ("14.12",)

    def shuffle(self, inputs, on, npartitions, env):
        try:
            return super().shuffle(inputs, on, npartitions, env)
        except Exception:
            env.client.cancel(list(inputs))
            raise


# 15 ----------------------------------------------------------------------------- 14.12
class LenientNpartitions(_BrokenShuffle):
    """Coerces ``npartitions`` instead of checking it: ``max(1, int(npartitions))``."""

    name = "broken-shuffle-lenient-npartitions"
    violates = ("14.12",)

    def prepare(self, inputs, on, npartitions, env):
        return inputs, on, max(1, int(npartitions))


# 16 ----------------------------------------------------------------------------- 14.12
class EmptyOnMeansAllColumns(_BrokenShuffle):
    """An empty ``on`` means the whole row (as ``drop_duplicates(subset=None)`` does)."""

    name = "broken-shuffle-empty-on-all-columns"
    violates = ("14.12",)

    def prepare(self, inputs, on, npartitions, env):
        if not on:
            on = env.client.submit(_arrow_schema, inputs[0], pure=False).result().names
        return inputs, on, npartitions


# 17 ----------------------------------------------------------------------------- 14.12
def _cast(table: Any, schema: Any) -> Any:
    return _on_device(_to_arrow(table).cast(schema))


class CastsToFirstSchema(_BrokenShuffle):
    """Casts every input to the first input's schema (as a concat would promote) instead of
    rejecting inputs whose schemas differ."""

    name = "broken-shuffle-casts-schemas"
    violates = ("14.12",)

    def prepare(self, inputs, on, npartitions, env):
        schema = env.client.submit(_arrow_schema, inputs[0], pure=False).result()
        return self._per_input(_cast, inputs, env, schema), on, npartitions


# The five below are missed by every scenario ID (each was run on them) and caught by the
# shuffle machine, SHUF-STATE-001: the bug needs a property of the inputs, a sequence or a
# fault that no scenario draws.

# 18 ----------------------------------------------------------------------------- 14.15
def _rebuilt(table: Any, on: Sequence[str] = ()) -> Any:
    """The output rebuilt from its columns (as a concat of device columns does)."""
    import pyarrow as pa

    t = _to_arrow(table)
    return pa.Table.from_arrays(t.columns, names=t.column_names)


class RebuildsFromColumns(_BrokenShuffle):
    """Builds each output from its columns and names alone: the schema's metadata and the
    fields' non-null flags are gone, the types are right."""

    name = "broken-shuffle-drops-schema-metadata"
    violates = ("14.15",)
    finish = staticmethod(_rebuilt)


# 19 ----------------------------------------------------------------------------- 14.8
def _naive_times(table: Any, on: Sequence[str] = ()) -> Any:
    """The output with its timestamps as NumPy holds them: datetime64 has no time zone."""
    import pyarrow as pa

    t = _to_arrow(table)
    for i, f in enumerate(t.schema):
        if pa.types.is_timestamp(f.type) and f.type.tz is not None:
            naive = pa.field(f.name, pa.timestamp(f.type.unit), f.nullable, f.metadata)
            t = t.set_column(i, naive, t.column(i).cast(naive.type))
    return t


class DropsTimezone(_BrokenShuffle):
    """Timestamp columns with a time zone come back without it (the same instants, read as
    local wall-clock times by every consumer)."""

    name = "broken-shuffle-drops-timezone"
    violates = ("14.8",)
    finish = staticmethod(_naive_times)


# 20 ----------------------------------------------------------------------------- 14.17
PLAN_DIR = "shuffle-plans"


def _write_plan(token: str, dask_worker: Any = None) -> int:
    folder = os.path.join(dask_worker.local_directory, PLAN_DIR)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{token}.plan"), "w") as f:
        f.write(token)
    return 1


def _remove_plan(token: str, dask_worker: Any = None) -> int:
    path = os.path.join(dask_worker.local_directory, PLAN_DIR, f"{token}.plan")
    if os.path.exists(path):
        os.unlink(path)
    return 1


class PlanLeftOnFailure(_BrokenShuffle):
    """Once the shuffle's tasks are submitted, writes its plan to every worker's directory
    (for a restarted worker to rejoin) and removes it once the outputs are gathered: a
    shuffle that fails or is cancelled after that leaves the plan files behind."""

    name = "broken-shuffle-plan-left-on-failure"
    violates = ("14.17", "14.11")

    def shuffle(self, inputs, on, npartitions, env):
        import uuid

        from reference_impl.shuffle import shuffle

        outputs = shuffle(env.client, list(inputs), list(on), npartitions)
        token = uuid.uuid4().hex
        env.client.run(_write_plan, token)
        result = read_outputs(env, outputs, self.finish, on=on)
        env.client.run(_remove_plan, token)
        return result


# 21 ----------------------------------------------------------------------------- 14.16
class ResultCacheByInputs(_BrokenShuffle):
    """Caches each shuffle's outputs under a name made from its inputs' keys alone (the
    token leaves out ``on`` and ``npartitions``): the same inputs shuffled again by other
    keys or into another count get the first shuffle's outputs."""

    name = "broken-shuffle-result-cache"
    violates = ("14.16", "14.7")

    def __init__(self) -> None:
        super().__init__()
        self._cache: dict[tuple, list] = {}

    def shuffle(self, inputs, on, npartitions, env):
        import distributed

        token = tuple(sorted(str(f.key) for f in distributed.futures_of(list(inputs))))
        if token not in self._cache:
            self._cache[token] = super().shuffle(inputs, on, npartitions, env)
        return list(self._cache[token])


# 22 ----------------------------------------------------------------------------- 14.18
class TruncatedFileReadsShort(PartialAfterWorkerLoss):
    """An output whose spill file was cut short comes back with what could be read (here:
    nothing), as a reader of an Arrow IPC stream stops at the last whole batch."""

    name = "broken-shuffle-truncated-file-short"
    violates = ("14.18", "14.1")
    error_word = "truncated"


# 23 ----------------------------------------------------------------------------- 14.19
def _coordinator_keeps_first_placement(dask_scheduler: Any = None) -> None:
    """On the scheduler: this cluster's coordinator restricts the outputs only when the
    first run starts, so a later run builds a lost output where the first one placed it
    (patched in this one instance, as the zoo's other adapters share the process)."""
    import types

    from broken_mutants import mutated_function

    from reference_impl.shuffle import ShuffleSchedulerPlugin

    plugin = dask_scheduler.plugins[ShuffleSchedulerPlugin.name]
    mutated = mutated_function(
        "reference_impl.shuffle.coordinator", "ShuffleSchedulerPlugin._start_run",
        "for key in shuffle.unpacks:",
        "for key in (shuffle.unpacks if shuffle.last_run_id == 1 else ()):",
    )  # fmt: skip
    plugin._start_run = types.MethodType(mutated, plugin)


class LostOutputWaits(_BrokenShuffle):
    """An output lost with its worker after the shuffle finished is built again on the
    worker the first run placed it on, which is gone: it waits for it (until the
    coordinator's safety net errs it), though the workers left could build it."""

    name = "broken-shuffle-lost-output-waits"
    violates = ("14.19", "14.5")

    def prepare(self, inputs, on, npartitions, env):
        from reference_impl.shuffle import ShuffleSchedulerPlugin

        env.client.register_plugin(ShuffleSchedulerPlugin())  # idempotent, as the shuffle does
        env.client.run_on_scheduler(_coordinator_keeps_first_placement)
        return inputs, on, npartitions


# 24 ----------------------------------------------------------------------------- 14.20
_HOST_COPIES: list[Any] = []  # per worker process: host copies of this shuffle's partitions


def _host_copy(table: Any) -> Any:
    """An Arrow copy of ``table`` in fresh host buffers (an IPC stream read back)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return pa.ipc.open_stream(sink.getvalue()).read_all()


def _keep_input_copy(table: Any) -> int:
    """Task on an input's holder: keep a host copy of it (to send again without a recompute,
    should a transfer fail)."""
    _HOST_COPIES.append(_host_copy(_to_arrow(table)))
    return len(_HOST_COPIES)


def _arrow_kept(table: Any, on: Sequence[str] = ()) -> Any:
    """The output as Arrow, a host copy of it kept (to serve a read again)."""
    t = _to_arrow(table)
    _HOST_COPIES.append(_host_copy(t))
    return t


def _drop_host_copies() -> int:
    n = len(_HOST_COPIES)
    _HOST_COPIES.clear()
    return n


class KeepsHostCopies(_BrokenShuffle):
    """Keeps a host (Arrow) copy of every input it sends and every output it builds until the
    shuffle returns, to retry a failed transfer or read without recomputing: nothing on the
    device, no file and no task is left, so the device's ledger stays within its bound; the
    workers' RSS holds the whole data once more."""

    name = "broken-shuffle-keeps-host-copies"
    violates = ("14.20",)
    finish = staticmethod(_arrow_kept)

    def prepare(self, inputs, on, npartitions, env):
        env.client.gather(self._per_input(_keep_input_copy, inputs, env))
        return inputs, on, npartitions

    def shuffle(self, inputs, on, npartitions, env):
        try:
            return super().shuffle(inputs, on, npartitions, env)
        finally:
            env.client.run(_drop_host_copies)


# 25 ----------------------------------------------------------------------------- 14.5
class GivesUpAtFirstLoss(_BrokenShuffle):
    """Declares shuffle.recover, yet a lost worker ends the shuffle with a clear
    ShuffleError (max-restarts 0): what the reference did before it recovered."""

    name = "broken-shuffle-gives-up-at-first-loss"
    violates = ("14.5",)
    max_restarts = 0


# 26 ----------------------------------------------------------------------------- 14.21
class RecoversOnlyOnce(_BrokenShuffle):
    """Restarts after the first lost worker, and gives up when a second one dies in the
    restarted run (max-restarts 1)."""

    name = "broken-shuffle-recovers-once"
    violates = ("14.21",)
    max_restarts = 1


# 28 ----------------------------------------------------------------------------- 14.24
class SkipsLostInputs(PartialAfterWorkerLoss):
    """Recovers from a lost worker as the reference does, but when inputs were lost with it
    for good (scattered there), returns what the other inputs made instead of an error: the
    lost rows silently vanish."""

    name = "broken-shuffle-skips-lost-inputs"
    violates = ("14.24", "14.1")
    max_restarts = None  # the reference's own: a lost worker whose inputs survive restarts it
    error_word = "lived only on the worker"


# 27 ----------------------------------------------------------------------------- 14.22
def _decimals_through_float(table: Any, on: Sequence[str] = ()) -> Any:
    """The output with its decimals gone through float64 (as pandas turns Decimal objects
    into floats): the type is back, digits past float64's 15-17 are not."""
    import pyarrow as pa

    t = _to_arrow(table)
    for i, f in enumerate(t.schema):
        if pa.types.is_decimal(f.type):
            t = t.set_column(i, f, t.column(i).cast(pa.float64()).cast(f.type, safe=False))
    return t


class DecimalsThroughFloat(_BrokenShuffle):
    """Moves decimal columns as float64 and casts them back to their decimal type: small
    values survive, a decimal's full precision does not."""

    name = "broken-shuffle-decimals-through-float"
    violates = ("14.22",)
    finish = staticmethod(_decimals_through_float)


# 28 ----------------------------------------------------------------------------- 14.22
def _dictionaries_decoded(table: Any, on: Sequence[str] = ()) -> Any:
    """The output with each dictionary column as its values (what a concat that does not
    unify dictionaries falls back to)."""
    import pyarrow as pa

    t = _to_arrow(table)
    for i, f in enumerate(t.schema):
        if pa.types.is_dictionary(f.type):
            decoded = pa.field(f.name, f.type.value_type, f.nullable, f.metadata)
            t = t.set_column(i, decoded, t.column(i).cast(decoded.type))
    return t


class DecodesDictionaries(_BrokenShuffle):
    """Returns dictionary columns decoded: every value right, the type not the inputs'."""

    name = "broken-shuffle-decodes-dictionaries"
    violates = ("14.22",)
    finish = staticmethod(_dictionaries_decoded)


# 29 ----------------------------------------------------------------------------- 14.22
def _stringified(table: Any) -> Any:
    """Task: an input onto the device, each list, struct and ordered dictionary column (what
    a Table once could not hold) as the text of its values: something, rather than an error."""
    import pyarrow as pa

    for i, f in enumerate(table.schema):
        if pa.types.is_nested(f.type) or (pa.types.is_dictionary(f.type) and f.type.ordered):
            text = pa.array([None if v is None else str(v) for v in table.column(i).to_pylist()], pa.string())
            table = table.set_column(i, pa.field(f.name, pa.string(), f.nullable), text)
    return _on_device(table)


class StringifiesWhatItCannotHold(_BrokenShuffle):
    """Loads a column it does not carry as the text of its values instead of refusing it:
    the shuffle succeeds, the outputs have a string column where the inputs had a list."""

    name = "broken-shuffle-stringifies"
    violates = ("14.22",)

    def load_inputs(self, tables, env):
        return spread(env, _stringified, tables)


# 30 ----------------------------------------------------------------------------- 14.1
def _offset_dropped(array: Any) -> Any:
    """``array`` read from its buffers as if it started at their first byte."""
    import pyarrow as pa

    if pa.types.is_dictionary(array.type) or pa.types.is_nested(array.type):
        return array  # children and dictionaries: not this reader's concern
    return pa.Array.from_buffers(array.type, len(array), array.buffers(), offset=0)


def _offsets_ignored(table: Any) -> Any:
    """Task: an input onto the device, every chunk read from its buffers' start."""
    import pyarrow as pa

    columns = [pa.chunked_array([_offset_dropped(c) for c in col.chunks], col.type) for col in table.columns]
    return _on_device(pa.Table.from_arrays(columns, schema=table.schema))


class IgnoresArrayOffsets(_BrokenShuffle):
    """Reads each input array from the start of its buffers, forgetting ``Array.offset``
    (a hand-written Arrow reader's classic slip): right for a table built from scratch, and
    for one that crossed an IPC hop, which compacts it; wrong rows for a slice."""

    name = "broken-shuffle-ignores-array-offsets"
    violates = ("14.1",)

    def load_inputs(self, tables, env):
        return spread(env, _offsets_ignored, tables)


# 14.1 at 2**16 rows -------------------------------------------------------------------
def _first_batch(table: Any, on: Sequence[str] = ()) -> Any:
    """An output read as a stream whose first batch is taken for the whole: 65,536 rows."""
    return _to_arrow(table).slice(0, 1 << 16)


class ReadsOneBatch(_BrokenShuffle):
    """Reads each output through a reader of 64 Ki-row batches and keeps the first (a loop
    that should have drained the stream): right for every output the suite builds small."""

    name = "broken-shuffle-reads-one-batch"
    violates = ("14.1",)
    finish = staticmethod(_first_batch)


# 31 ----------------------------------------------------------------------------- 14.22
def _lists_rebuilt_from_offsets(array: Any) -> Any:
    """``array`` with every list, at any depth, rebuilt from its offsets and values alone:
    a null list comes back as an empty one (its offsets are equal)."""
    import pyarrow as pa

    t = array.type
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        cls = pa.ListArray if pa.types.is_list(t) else pa.LargeListArray
        offsets = array.offsets  # this slice's offsets, into the whole child
        start, stop = offsets[0].as_py(), offsets[-1].as_py()
        child = _lists_rebuilt_from_offsets(array.values.slice(start, stop - start))
        rebased = pa.compute.subtract(offsets, pa.scalar(start, offsets.type))
        return cls.from_arrays(rebased, child, type=t)
    if pa.types.is_struct(t):
        fields = [_lists_rebuilt_from_offsets(array.field(i)) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(fields, fields=list(t), mask=array.is_null())
    return array


def _null_lists_empty(table: Any, on: Sequence[str] = ()) -> Any:
    """The output with its lists' nulls read as empty lists."""
    import pyarrow as pa

    t = _to_arrow(table)
    for i, f in enumerate(t.schema):
        if pa.types.is_nested(f.type):
            fixed = [_lists_rebuilt_from_offsets(c) for c in t.column(i).chunks]
            t = t.set_column(i, f, pa.chunked_array(fixed, f.type))
    return t


class NullListsAsEmpty(_BrokenShuffle):
    """Rebuilds list columns from their offsets and values, forgetting the lists' own
    validity: a null list, at any depth of lists and structs, comes back as an empty one
    (the null-vs-empty slip of a hand-written nested reader)."""

    name = "broken-shuffle-null-lists-as-empty"
    violates = ("14.22",)
    finish = staticmethod(_null_lists_empty)


# which conformance ID must catch which bug
# 32 ----------------------------------------------------------------------------- 14.23
def _index_renumbered(table: Any, on: Sequence[str] = ()) -> Any:
    """The output through pandas, its index labels renumbered 0..n-1 under the same name,
    as ``pd.concat(pieces, ignore_index=True)`` of the pieces would leave them."""
    import pandas as pd
    import pyarrow as pa

    t = _to_arrow(table)
    index = [c for c in (t.schema.pandas_metadata or {}).get("index_columns", ()) if isinstance(c, str)]
    if not index:
        return t
    frame = t.to_pandas(types_mapper=pd.ArrowDtype)
    frame.index = pd.RangeIndex(len(frame), name=frame.index.name)
    out = pa.Table.from_pandas(frame, schema=t.schema, preserve_index=True)
    return out.replace_schema_metadata(t.schema.metadata)


class RenumbersTheIndex(_BrokenShuffle):
    """A frame front end that concatenates each output's pieces with ``ignore_index=True``:
    every row arrives, with every column but its index label (an index of strings fails to
    convert back). Without a pandas index in the inputs it is the control."""

    name = "broken-shuffle-renumbers-the-index"
    violates = ("14.23",)
    finish = staticmethod(_index_renumbered)


# 33 ----------------------------------------------------------------------------- 14.25
class SelectsByCount(_BrokenShuffle):
    """Asked for some outputs before computing, builds the first as many instead (the lazy
    reference's mutant: a selection taken as its length)."""

    name = "broken-shuffle-selects-by-count"
    violates = ("14.25",)

    @staticmethod
    def selected(which: list[int]) -> list[int]:
        return list(range(len(which)))


EXPECTED: dict[str, tuple[type, str]] = {
    "drops_empty": (DropsEmptyOutputs, "SHUF-COUNT-001"),
    "worker_order": (WorkerOrder, "SHUF-DET-002"),
    "float_bits": (HashesFloatBits, "SHUF-KEYS-001"),
    "int_nulls_float": (IntsWithNullsToFloat, "SHUF-SCHEMA-001"),
    "one_worker": (CoalescesOnOneWorker, "SHUF-BOUND-001"),
    "partial_after_loss": (PartialAfterWorkerLoss, "SHUF-FAULT-001"),
    "missing_file_empty": (MissingFileReadsAsEmpty, "SHUF-FAULT-003"),
    "leaves_files": (LeavesOutputFiles, "SHUF-CLEAN-001"),
    "keeps_device_outputs": (KeepsDeviceOutputs, "SHUF-CLEAN-001"),
    "input_order": (DictionaryCodes, "SHUF-DET-001"),
    "drops_null_keys": (DropsNullKeys, "SHUF-NULL-001"),
    "overlapping_pieces": (OverlappingPieces, "SHUF-ROWS-001"),
    "unpack_copy": (ConcatCopyOnUnpack, "SHUF-BOUND-002"),
    "no_spill": (FitsInDeviceMemory, "SHUF-SPILL-001"),
    "shared_schema": (SchemaOnTheAdapter, "SHUF-CONC-001"),
    "cancels_inputs": (CancelsInputsOnError, "SHUF-INPUT-001"),
    "lenient_npartitions": (LenientNpartitions, "SHUF-INPUT-002"),
    "empty_on_all_columns": (EmptyOnMeansAllColumns, "SHUF-INPUT-003"),
    "casts_schemas": (CastsToFirstSchema, "SHUF-INPUT-004"),
    "drops_schema_metadata": (RebuildsFromColumns, "SHUF-STATE-001"),
    "drops_timezone": (DropsTimezone, "SHUF-STATE-001"),
    "plan_left_on_failure": (PlanLeftOnFailure, "SHUF-STATE-001"),
    "result_cache": (ResultCacheByInputs, "SHUF-STATE-001"),
    "truncated_file_short": (TruncatedFileReadsShort, "SHUF-STATE-001"),
    "lost_output_waits": (LostOutputWaits, "SHUF-FAULT-004"),
    "keeps_host_copies": (KeepsHostCopies, "SHUF-BOUND-003"),
    "gives_up_at_first_loss": (GivesUpAtFirstLoss, "SHUF-FAULT-001"),
    "recovers_once": (RecoversOnlyOnce, "SHUF-FAULT-005"),
    "decimals_through_float": (DecimalsThroughFloat, "SHUF-DTYPE-001"),
    "decodes_dictionaries": (DecodesDictionaries, "SHUF-DTYPE-001"),
    "stringifies": (StringifiesWhatItCannotHold, "SHUF-DTYPE-002"),
    "ignores_offsets": (IgnoresArrayOffsets, "SHUF-ROWS-001"),
    "reads_one_batch": (ReadsOneBatch, "SHUF-ROWS-002"),
    "null_lists_as_empty": (NullListsAsEmpty, "SHUF-DTYPE-003"),
    "renumbers_the_index": (RenumbersTheIndex, "SHUF-INDEX-001"),
    "skips_lost_inputs": (SkipsLostInputs, "SHUF-FAULT-006"),
    "selects_by_count": (SelectsByCount, "SHUF-SELECT-001"),
}

for _attr, (_cls, _cid) in EXPECTED.items():
    globals()[_attr] = _cls  # --impl=broken_shuffles:<attr> (a zero-argument factory)
