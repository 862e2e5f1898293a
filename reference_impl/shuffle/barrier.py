"""The barrier: every transfer task has finished, so every shard is at its worker.

A transfer task returns only after its sends were acknowledged, and a receiver
acknowledges only after the shards are in its output buffers. The barrier checks with
the coordinator that every transfer ran in its current run (a transfer released by a
restart while it ran can report the old run's result), then adds up the rows sent to each
output; unpack checks it received exactly that many, so a lost or duplicated shard is an
error, never a wrong result.
"""

from __future__ import annotations

import distributed
from distributed.exceptions import Reschedule

from .errors import ShuffleClosedError
from .messages import BARRIER_OP, ask, run_from
from .spec import RunSpec, ShuffleSpec


def barrier(spec: ShuffleSpec, *results: dict) -> RunSpec:
    """Task: the run with the rows expected per output, which unpack checks.

    A transfer that failed returned its ShuffleError; the first cause is raised here
    (a worker's own failure before another's "the shuffle is failed there"). Transfers
    of an earlier run make the coordinator start again, and this task with it."""
    errors = [r["error"] for r in results if "error" in r]
    if errors:
        errors.sort(key=lambda e: isinstance(e, ShuffleClosedError))
        raise errors[0].copy()
    worker = distributed.get_worker()
    run_ids = sorted({r["run_id"] for r in results})
    answer = ask(worker, BARRIER_OP, shuffle_id=spec.id, run_ids=run_ids)
    run = run_from(spec, answer, "barrier", worker.address)
    if run is None:
        raise Reschedule()
    rows = [0] * spec.npartitions
    for r in results:
        for i, n in enumerate(r["rows"]):
            rows[i] += n
    return run.with_rows(rows)
