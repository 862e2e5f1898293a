"""The unpack phase: output partition i is built only when its task runs.

The task runs on the worker its output was placed on. It takes that output's buffer
from the worker's run (the run stops holding it), checks the rows against the
barrier's count, stages the output once at its exact size from the index alone, copies
the packed shards in at the rows their input order gives them, one file chunk at a time
(each checked before it is used), and uploads each buffer once, room made first. A worker
thus adds the output on the device, and the output plus one chunk in host memory.
"""

from __future__ import annotations

import traceback

import distributed
import numpy as np
from distributed.exceptions import Reschedule

from reference_impl.table import Table

from .errors import RunSuperseded, ShuffleError
from .messages import RESTART_OP, ask
from .packed import build, empty_table, latest, output_nbytes
from .plugin import get_extension
from .spec import RunSpec


def unpack(spec: RunSpec, output: int) -> Table:
    """Task: output partition ``output`` as one Table on this worker's device.

    Handed a run that a newer one replaced (the barrier's result of a run that a lost
    worker ended), it asks the coordinator to start again (if no restart released that
    result already) and is rescheduled."""
    worker = distributed.get_worker()
    ext = get_extension(worker)
    me = worker.address
    placed = spec.placement[output]
    if placed != me:
        raise ShuffleError(
            spec.id, "unpack", placed, f"output {output} ran on {me}, not where its shards are"
        )
    assert spec.rows is not None, "unpack runs on the barrier's spec"
    expected = spec.rows[output]
    try:
        if output not in spec.wanted:  # the run kept it from an earlier run; it was lost since
            raise RunSuperseded(spec.id, "unpack", me, f"run {spec.run_id} does not build output {output}")
        run = ext.get_run(spec.id, spec.run_id, "unpack")
        buf = run.take(output)
    except RunSuperseded as exc:
        _start_again(worker, spec, exc.reason)
    try:
        index = buf.rows() if buf is not None else np.zeros((0, 1), np.int64)
        counted = index[latest(index)]
        got = int(counted[:, 2].sum()) if len(counted) else 0
        if got != expected:
            raise ShuffleError(
                spec.id, "unpack", me,
                f"output {output} received {got} rows from {len(counted)} shards, expected {expected}",
            )  # fmt: skip
        if buf is None:
            table = empty_table(spec.schema, ext.device)
        else:
            with ext.room(output_nbytes(spec.schema, counted)):
                table = build(spec.schema, index, run.buffers.read(output, buf), ext.device)
            run.buffers.remove(output)
    except Exception as exc:
        if buf is not None:
            run.buffers.remove(output)
        buf = None  # the shards go now, not with the erred task's traceback
        traceback.clear_frames(exc.__traceback__)
        if run.superseded():  # replaced while this output was built: its files are gone
            _start_again(worker, spec, f"run {spec.run_id} was replaced during unpack")
        if isinstance(exc, ShuffleError):
            raise
        raise ShuffleError(
            spec.id, "unpack", me, f"output {output}: {type(exc).__name__}: {exc}"
        ) from exc
    if set(spec.outputs_on(me)) <= run.unpacked:
        ext.close_run(spec.id, spec.run_id, "every output on this worker was unpacked", collect=False)
    return table


def _start_again(worker: distributed.Worker, spec: RunSpec, reason: str) -> None:
    """The run this task was handed is over: the coordinator restarts the shuffle if the
    barrier's stale result is still what the unpacks would get, and the task runs again."""
    ask(worker, RESTART_OP, shuffle_id=spec.id, run_id=spec.run_id, reason=reason)
    get_extension(worker).collect_at_next_close(spec.id)
    raise Reschedule()
