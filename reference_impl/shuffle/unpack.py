"""The unpack phase: output partition i is assembled only when its task runs.

The task runs on the worker its output was placed on. It takes that output's
shards from the worker's shuffle state (the state stops holding them), checks
the row count against the barrier's, allocates the output once at its exact
size (room made first), and copies the shards in, input order, one at a time:
each is read back from wherever it spilled and dropped right after its copy.
A worker thus unpacks at most one output per thread, and one output adds its
own size plus one shard, not a multiple of it.
"""

from __future__ import annotations

import traceback
from typing import Any

import distributed

from reference_impl.table import Table

from .errors import ShuffleError
from .plugin import get_extension
from .shards import assemble, output_nbytes


def unpack(shuffle_id: str, output: int, info: dict[str, Any]) -> Table:
    """Task: output partition ``output`` as one Table on this worker's device."""
    worker = distributed.get_worker()
    ext = get_extension(worker)
    me = worker.address
    placed = info["placement"][output]
    if placed != me:
        raise ShuffleError(
            shuffle_id, "unpack", placed, f"output {output} ran on {me}, not where its shards are"
        )
    schema, expected = info["schema"], info["rows"][output]
    run = ext.get_run(shuffle_id, "unpack")
    pieces = run.take(output)
    try:
        got = sum(m.rows for m, _ in pieces)
        if got != expected:
            raise ShuffleError(
                shuffle_id, "unpack", me,
                f"output {output} received {got} rows from {len(pieces)} shards, expected {expected}",
            )
        with ext.room(output_nbytes(schema, [m for m, _ in pieces]), run, "unpack"):
            table = assemble(schema, pieces, ext.device)
        ext.check_disk(run, "unpack")
    except Exception as exc:
        pieces.clear()  # the shards go now, not with the erred task's traceback
        traceback.clear_frames(exc.__traceback__)
        if isinstance(exc, ShuffleError):
            raise
        raise ShuffleError(
            shuffle_id, "unpack", me, f"output {output}: {type(exc).__name__}: {exc}"
        ) from exc
    mine = {i for i, w in enumerate(info["placement"]) if w == me}
    if mine <= run.unpacked:
        ext.close_run(shuffle_id, "every output on this worker was unpacked", collect=False)
    return table
