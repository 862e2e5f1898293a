"""The unpack phase: output partition i is built only when its task runs, on the worker
its run placed it on, by that worker's run (:meth:`~.run.ShuffleRun.get_output`). A worker
thus adds the output on the device, and the output plus one chunk in host memory.
"""

from __future__ import annotations

import distributed
from distributed.exceptions import Reschedule

from reference_impl.table import Table

from .errors import RunSuperseded, ShuffleError
from .messages import RESTART_OP, ask
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
        raise ShuffleError(spec.id, "unpack", placed, f"output {output} ran on {me}, not where its shards are")
    try:
        if output not in spec.wanted:  # the run kept it from an earlier run; it was lost since
            raise RunSuperseded(spec.id, "unpack", me, f"run {spec.run_id} does not build output {output}")
        run = ext.get_run(spec.id, spec.run_id, "unpack")
        table = run.get_output(spec, output)
    except RunSuperseded as exc:
        reason = exc.reason
    else:
        if run.unpacked_all(spec):
            ext.close_run(spec.id, spec.run_id, "every output on this worker was unpacked", collect=False)
        return table
    _start_again(worker, spec, reason)


def _start_again(worker: distributed.Worker, spec: RunSpec, reason: str) -> None:
    """The run this task was handed is over: the coordinator restarts the shuffle if the
    barrier's stale result is still what the unpacks would get, and the task runs again."""
    ask(worker, RESTART_OP, shuffle_id=spec.id, run_id=spec.run_id, reason=reason)
    get_extension(worker).collect_at_next_close(spec.id)
    raise Reschedule()
