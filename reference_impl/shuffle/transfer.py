"""The transfer phase: partition local inputs, send shards straight to their workers.

One task per worker that holds inputs (no task per shard). For each input, one
at a time: make room, ``partition_table`` it, keep this worker's shards (compact
copies), copy the others to host and send them, one message per destination,
over distributed's comms (``worker.rpc(addr).device_shuffle_receive``). Sends
run on the worker's event loop while the task partitions the next input; the
bytes in flight per worker are bounded by the extension.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import distributed
from distributed.protocol import serialize
from distributed.protocol.serialize import dask_deserialize, dask_serialize

from reference_impl.store.proxy import unwrap
from reference_impl.table import Table
from reference_impl.table.partition import partition_table

from .errors import ShuffleError
from .plugin import get_extension

PARTITION_OVERHEAD = 1.1  # the partitioned copy, plus its row ids and counts


class HostShards:
    """Shards of one input for one destination worker, as host frames.

    It crosses the comms as those frames and is decoded onto the receiver's
    device only in the handler, after the receiver has made room for it.
    """

    __slots__ = ("outputs", "headers", "frames")

    def __init__(self, outputs: list[int], headers: list[dict], frames: list[list[Any]]) -> None:
        self.outputs, self.headers, self.frames = outputs, headers, frames

    @classmethod
    def from_tables(cls, items: Sequence[tuple[int, Table]]) -> HostShards:
        """d2h copies of ``items`` (output, shard), with the Table's own serializer."""
        outputs, headers, frames = [], [], []
        for output, table in items:
            header, fr = serialize(table, serializers=("dask",), on_error="raise")
            outputs.append(output)
            headers.append(header)
            frames.append(fr)
        return cls(outputs, headers, frames)

    @property
    def nbytes(self) -> int:
        return sum(memoryview(f).nbytes for fr in self.frames for f in fr)

    def items(self) -> Iterator[tuple[int, dict, list[Any]]]:
        yield from zip(self.outputs, self.headers, self.frames, strict=True)


@dask_serialize.register(HostShards)
def _serialize_shards(batch: HostShards) -> tuple[dict, list[Any]]:
    header = {
        "outputs": batch.outputs,
        "headers": batch.headers,
        "counts": [len(fr) for fr in batch.frames],
    }
    return header, [f for fr in batch.frames for f in fr]


@dask_deserialize.register(HostShards)
def _deserialize_shards(header: dict, frames: list[Any]) -> HostShards:
    out, at = [], 0
    for n in header["counts"]:
        out.append(list(frames[at : at + n]))
        at += n
    return HostShards(header["outputs"], header["headers"], out)


def transfer(shuffle_id: str, spec: dict[str, Any], indices: list[int], *inputs: Any) -> dict:
    """Task: partition and send this worker's inputs; returns rows sent per output."""
    worker = distributed.get_worker()
    ext = get_extension(worker)
    run = ext.get_run(shuffle_id, "transfer")
    on, npartitions, placement = spec["on"], spec["npartitions"], spec["placement"]
    me = worker.address
    rows = [0] * npartitions
    try:
        for index, value in zip(indices, inputs, strict=True):
            run.check()
            table = unwrap(value)
            if not isinstance(table, Table):
                raise ShuffleError(
                    shuffle_id, "transfer", me, f"input {index} is a {type(table).__name__}"
                )
            if table.num_rows == 0:
                continue
            with ext.room(int(table.nbytes * PARTITION_OVERHEAD) + 8 * npartitions):
                parts = partition_table(table, on, npartitions)
                del table
                by_dest: dict[str, list[tuple[int, Table]]] = {}
                for output, part in enumerate(parts):
                    if part.num_rows:
                        rows[output] += part.num_rows
                        by_dest.setdefault(placement[output], []).append((output, part))
                del parts, part
                for address in sorted(by_dest):
                    items = by_dest.pop(address)
                    if address == me:
                        ext.keep_local(run, index, items)
                    else:
                        ext.send(run, address, index, HostShards.from_tables(items))
                    del items
        ext.flush(run)
    except ShuffleError:
        raise
    except Exception as exc:
        raise ShuffleError(shuffle_id, "transfer", me, f"{type(exc).__name__}: {exc}") from exc
    return {"worker": me, "rows": rows}
