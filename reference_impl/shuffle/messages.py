"""The coordinator's handlers as a worker's tasks call them, and its answers.

The scheduler side (:mod:`.coordinator`) owns every run of a shuffle: a transfer asks it
which run to join (its id, where each output goes), the barrier asks it to confirm that
every transfer ran in that run, and an unpack that was handed a stale run's barrier asks
it to start again. Each answer is a dict with a ``status``; this module turns it into a
:class:`~.spec.RunSpec` or the error it stands for.
"""

from __future__ import annotations

from typing import Any

from distributed.utils import sync

from .errors import ShuffleClosedError, ShuffleError
from .spec import RunSpec, ShuffleSpec

REGISTER_OP = "device_shuffle_register"  # client -> scheduler, before any task is submitted
GET_RUN_OP = "device_shuffle_get_run"  # transfer -> scheduler: the run to join
BARRIER_OP = "device_shuffle_barrier"  # barrier -> scheduler: the transfers' run ids
RESTART_OP = "device_shuffle_restart"  # unpack -> scheduler: it was handed a stale run
CLOSE_OP = "device_shuffle_close"  # scheduler -> worker stream: drop a run's state


def ask(worker: Any, op: str, /, **kwargs: Any) -> dict:
    """From a task's thread: call the coordinator's handler ``op`` and wait for it."""
    return sync(worker.loop, getattr(worker.scheduler, op), **kwargs)


def run_from(spec: ShuffleSpec, answer: dict, phase: str, me: str) -> RunSpec | None:
    """The run an answer names; None when the coordinator restarted the shuffle instead.
    A shuffle that ended or failed raises what it ended with."""
    status = answer["status"]
    if status == "OK":
        return RunSpec.from_coordinator(spec, answer)
    if status == "restarted":
        return None
    cls = ShuffleClosedError if status == "closed" else ShuffleError
    raise cls(spec.id, answer.get("phase") or phase, answer.get("worker") or me, answer["reason"])
