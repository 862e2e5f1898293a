"""The transfer phase: partition local inputs, send shards straight to their workers.

One task per worker that holds inputs (no task per shard). For each input, one
chunk at a time (at most a quarter of the device limit): make room,
``partition_grouped`` the chunk and let the input go (so the store can really spill
it between chunks), and pack the shards to host (:mod:`.packed`): this
worker's own are appended to its output buffers, the others are sent, one message
per destination, over distributed's comms. Sends run on the worker's event loop
while the task partitions the next chunk; the bytes in flight are bounded (:mod:`.comms`).
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from typing import Any

import distributed
import pyarrow as pa
from distributed.exceptions import Reschedule
from distributed.protocol.serialize import dask_deserialize, dask_serialize

from reference_impl.device.common import once
from reference_impl.store.proxy import unwrap
from reference_impl.table import Table
from reference_impl.table.partition import partition_by_destination, partition_grouped

from .errors import PeerLost, RunSuperseded, ShuffleError
from .messages import GET_RUN_OP, ask, run_from
from .packed import pack_grouped
from .plugin import get_extension
from .spec import RunSpec, ShuffleSpec

ROW_OVERHEAD = 8  # bytes a row the partition kernels add (int32 ids, scan scratch)
CHUNK_BYTES = 64 * 2**20
VERDICT_SECONDS = 10.0  # how long a failed send waits to learn whether its run was replaced


class HostShards:
    """Packed shards of one input chunk for one destination worker: index rows and frames."""

    __slots__ = ("outputs", "rows", "frames")

    def __init__(self, outputs: list[int], rows: list[list[int]], frames: list[list[Any]]) -> None:
        self.outputs, self.rows, self.frames = outputs, rows, frames

    @classmethod
    def from_packed(cls, items: list[tuple[int, list[int], list[Any]]]) -> HostShards:
        return cls([o for o, _, _ in items], [r for _, r, _ in items], [f for _, _, f in items])

    @property
    def nbytes(self) -> int:
        return sum(memoryview(f).nbytes for fr in self.frames for f in fr)

    def items(self) -> Iterator[tuple[int, list[int], list[Any]]]:
        yield from zip(self.outputs, self.rows, self.frames, strict=True)


def _serialize_shards(batch: HostShards) -> tuple[dict, list[Any]]:
    header = {"outputs": batch.outputs, "rows": batch.rows, "counts": [len(fr) for fr in batch.frames]}
    return header, [f for fr in batch.frames for f in fr]


def _deserialize_shards(header: dict, frames: list[Any]) -> HostShards:
    out, at = [], 0
    for n in header["counts"]:
        out.append(list(frames[at : at + n]))
        at += n
    return HostShards(list(header["outputs"]), [list(r) for r in header["rows"]], out)


@once
def register_dask_serializers() -> None:
    """Called by ``reference_impl.register()``: HostShards cross the comms as their frames."""
    dask_serialize.register(HostShards)(_serialize_shards)
    dask_deserialize.register(HostShards)(_deserialize_shards)


def chunk_rows(table: Table, limit: int | None) -> int:
    """Rows partitioned at once: the partitioned copy of a whole input next to the input
    itself could not fit a device limit of twice the input, so inputs go in chunks of
    at most a quarter of the limit (and at most CHUNK_BYTES)."""
    target = CHUNK_BYTES if limit is None else max(min(CHUNK_BYTES, limit // 4), 1)
    row_bytes = max(table.nbytes // max(table.num_rows, 1), 1)
    return max(target // row_bytes, 1)


def transfer(spec: ShuffleSpec, indices: list[int], *inputs: Any) -> dict:
    """Task: partition and send this worker's inputs in the coordinator's current run;
    returns the run id and rows sent per output, or the ShuffleError that stopped it
    (raised by the barrier). A run replaced meanwhile (a worker left) reschedules it."""
    worker = distributed.get_worker()
    ext = get_extension(worker)
    me = worker.address
    try:
        run_spec = run_from(spec, ask(worker, GET_RUN_OP, shuffle_id=spec.id, worker=me), "transfer", me)
        assert run_spec is not None, "a run to join, or an error"
        run = ext.get_run(spec.id, run_spec.run_id, "transfer")
    except RunSuperseded:
        ext.collect_at_next_close(spec.id)
        raise Reschedule() from None
    except ShuffleError as exc:  # already closed here (cancelled, or its client died)
        return {"worker": me, "error": exc.copy()}
    rows = [0] * spec.npartitions
    store = ext.store
    again = False
    try:
        for index, value in zip(indices, inputs, strict=True):
            run.check()
            # a proxy answers for its Table, unspilling nothing; Arrow in host memory (dask's
            # pandas partitions, frames.to_transfer_input) goes to the device a chunk at a time
            if not isinstance(value, (Table, pa.Table)):
                raise ShuffleError(
                    spec.id, "transfer", me, f"input {index} is a {type(value).__name__}"
                )
            step = chunk_rows(value, store.device_memory_limit if store is not None else None)
            # Read back only per chunk, so the store can really spill the input meanwhile.
            for chunk, start in enumerate(range(0, value.num_rows, step)):
                _partition_and_send(ext, run, (index, chunk), value, start, start + step, run_spec, rows)
        ext.comms.flush(run)
    except Exception as exc:
        # The exception can live on after this task: raised on the event loop (a send's
        # run.check()) it also sits in a cycle there, with the tornado future that carried
        # it through sync(). Its traceback would keep this frame, and so the inputs, alive
        # until a garbage collection: clear the finished frames, then drop the traceback.
        traceback.clear_frames(exc.__traceback__)
        exc.__traceback__ = None
        # A worker that left fails the sends to it before the coordinator's restart comes.
        again = run.superseded(VERDICT_SECONDS if isinstance(exc, PeerLost) else 0.0)
        if not again:
            # Returned, not raised: distributed keeps an erred task's traceback, whose
            # frames hold every input of the task until a garbage collection.
            return {"worker": me, "error": ext.failed(run, exc)}
    if again:
        ext.collect_at_next_close(spec.id)
        raise Reschedule()
    return {"worker": me, "run_id": run.run_id, "rows": rows}


def _partition_and_send(
    ext: Any,
    run: Any,
    source: tuple[int, int],
    value: Any,
    start: int,
    stop: int,
    spec: RunSpec,
    rows: list[int],
) -> None:
    """Partition rows ``start:stop`` of the input, pack the partitions to host (then let
    go of the input and the partitions), keep or send the shards. Room is made for the
    partitioned copy; the input itself is the store's (read back if it spilled), or, for a
    host input, the chunk's copy on the device is made room for too."""
    npartitions, placement, wanted = spec.npartitions, spec.placement, spec.wanted
    me = ext.worker.address
    total = value.num_rows  # from the proxy's metadata: no unspill yet
    stop = min(stop, total)
    nbytes = value.nbytes * (stop - start) // max(total, 1)
    # the partitioned copy, the kernels' row ids and per-partition counts
    host = isinstance(value, pa.Table)
    with ext.room((1 + host) * nbytes + ROW_OVERHEAD * (stop - start) + 16 * npartitions):
        if host:
            table = rows_in = Table.from_arrow(value.slice(start, stop - start), ext.device)
        else:
            table = unwrap(value)
            rows_in = table.slice(start, stop)
        if spec.shuffle.destination:
            grouped, offsets = partition_by_destination(rows_in, spec.on[0], npartitions, keep=False)
        else:
            grouped, offsets = partition_grouped(rows_in, list(spec.on), npartitions)
        del table, rows_in
        # one d2h copy per buffer; the device copies go before anything is sent
        packed = pack_grouped(grouped, offsets, source)
        del grouped
    by_dest: dict[str, list[tuple[int, list[int], list[Any]]]] = {}
    for output, row, frames in packed:
        if output not in wanted:  # still in memory from an earlier run
            continue
        rows[output] += row[2]
        by_dest.setdefault(placement[output], []).append((output, row, frames))
    del packed
    # Another worker's first: its shards go on their way while this worker keeps its own.
    for address in sorted(by_dest, key=lambda a: (a == me, a)):
        items = by_dest.pop(address)
        if address == me:
            for output, row, frames in items:
                ext.keep(run, output, row, frames)
        else:
            ext.comms.send(run, address, source, HostShards.from_packed(items))
        del items
