"""The transfer phase: partition local inputs, send shards straight to their workers.

One task per worker that holds inputs eagerly, one per input partition in a dask graph
(no task per shard). It joins the coordinator's current run and hands each input to it
(:meth:`~.run.ShuffleRun.add_input`: a chunk at a time, this worker's shards kept, the
others sent), then waits until every shard it sent is held (:meth:`~.run.ShuffleRun.barrier`).
"""

from __future__ import annotations

import traceback
from typing import Any

import distributed
from distributed.exceptions import Reschedule
from distributed.metrics import context_meter

from .errors import PeerLost, RunSuperseded, ShuffleError
from .plugin import get_extension
from .spec import ShuffleSpec

VERDICT_SECONDS = 10.0  # how long a failed send waits to learn whether its run was replaced


def transfer(spec: ShuffleSpec, indices: list[int], *inputs: Any) -> dict:
    """Task: this worker's inputs into the current run; the run id and rows sent per
    output, or the ShuffleError that stopped it (raised by the barrier). A run replaced
    meanwhile (a worker left) reschedules it."""
    ext = get_extension(distributed.get_worker())
    me = ext.worker.address
    try:
        run, run_spec = ext.join(spec)
    except RunSuperseded:
        ext.collect_at_next_close(spec.id)
        raise Reschedule() from None
    except ShuffleError as exc:  # already closed here (cancelled, or its client died)
        return {"worker": me, "error": exc.copy()}
    rows = [0] * spec.npartitions
    try:
        # Without the task's metrics ledger: distributed appends every metric digested
        # inside a task to it until the task ends, and a transfer digests a few per shard
        # (partitions**2 / workers of them here, one task per worker).
        with context_meter.clear_callbacks():
            for index, value in zip(indices, inputs, strict=True):
                rows = [a + b for a, b in zip(rows, run.add_input(run_spec, index, value), strict=True)]
            run.barrier()
    except Exception as exc:
        # The exception can live on after this task (raised on the event loop, it also sits
        # in a cycle with the future that carried it through sync()); its traceback would
        # keep this frame, and so the inputs, alive until a garbage collection.
        traceback.clear_frames(exc.__traceback__)
        exc.__traceback__ = None
        # A worker that left fails the sends to it before the coordinator's restart comes.
        if not run.superseded(VERDICT_SECONDS if isinstance(exc, PeerLost) else 0.0):
            # Returned, not raised: distributed keeps an erred task's traceback, whose
            # frames hold every input of the task until a garbage collection.
            return {"worker": me, "error": run.fail_with(exc)}
    else:
        return {"worker": me, "run_id": run.run_id, "rows": rows}
    ext.collect_at_next_close(spec.id)
    raise Reschedule()
