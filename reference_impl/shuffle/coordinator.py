"""The scheduler side: turn a lost worker into a ShuffleError, and clean up.

``ShuffleSchedulerPlugin`` knows each active shuffle's tasks and workers
(``device_shuffle_register``, called by :func:`~reference_impl.shuffle.shuffle`
before it submits them). Its transfer and unpack tasks are pinned to their
workers, so when one of those workers dies they could wait forever in
``no-worker``; the plugin errs them with a :class:`ShuffleError` naming the
phase the shuffle was in and the worker, which the output futures then raise.
During transfer it also tells the other workers to stop (their sends to the
dead worker would only wait for a connect timeout).

When the barrier task is released, forgotten or erred (the shuffle finished,
failed, or the client cancelled its outputs), every participating worker is
told to drop that shuffle's state. A client that dies between registering a
shuffle and submitting its barrier (its last messages never sent) leaves no
barrier to watch: then the shuffle is dropped when one of its tasks is forgotten
while the barrier does not exist, or when that client leaves with none of them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.protocol import pickle

from .errors import ShuffleError
from .plugin import CLOSE_OP, FAIL_OP

logger = logging.getLogger(__name__)
REGISTER_OP = "device_shuffle_register"


@dataclass
class ActiveShuffle:
    id: str
    workers: set[str]
    barrier: str
    keys: set[str]
    client: str | None = None
    phase: str = "transfer"
    lost: dict[str, str] = field(default_factory=dict)  # worker -> phase it was lost in


class ShuffleSchedulerPlugin(SchedulerPlugin):
    name = "device-shuffle-coordinator"
    idempotent = True

    def __init__(self) -> None:
        self.scheduler: Any = None
        self.active: dict[str, ActiveShuffle] = {}
        self.by_key: dict[str, str] = {}
        # Outputs of finished shuffles, until forgotten: one lost with its worker would be
        # recomputed on that (gone) worker and wait forever; it is erred instead.
        self.finished: dict[str, str] = {}  # key -> shuffle id

    async def start(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        scheduler.handlers[REGISTER_OP] = self.register

    async def close(self) -> None:
        if self.scheduler is not None:
            self.scheduler.handlers.pop(REGISTER_OP, None)

    def register(
        self, shuffle_id: str, workers: list[str], barrier: str, keys: list[str], client: str | None = None
    ) -> str:
        shuffle = ActiveShuffle(shuffle_id, set(workers), barrier, set(keys) | {barrier}, client)
        self.active[shuffle_id] = shuffle
        for key in shuffle.keys:
            self.by_key[key] = shuffle_id
        return "OK"

    def transition(
        self, key: Any, start: str, finish: str, *args: Any, stimulus_id: str, **kwargs: Any
    ) -> None:
        sid = self.by_key.get(key)
        shuffle = self.active.get(sid) if sid is not None else None
        if shuffle is None:
            done = self.finished.get(key)
            if done is not None and finish == "forgotten":
                del self.finished[key]
            elif done is not None and finish == "no-worker":
                self.scheduler.loop.add_callback(self._fail_lost_output, key, done, stimulus_id)
            return
        if key == shuffle.barrier:
            if finish == "memory":
                shuffle.phase = "unpack"
            elif finish in ("released", "forgotten", "erred"):
                # After this transition (and a worker removal that caused it) completes,
                # so the reason can name a lost worker.
                self.scheduler.loop.add_callback(self._finish, sid, f"its barrier was {finish}")
        elif finish == "forgotten" and shuffle.barrier not in self.scheduler.tasks:
            # Released before its barrier was ever submitted: the client is gone (or
            # cancelled), and no barrier transition will come to end the shuffle.
            self.scheduler.loop.add_callback(self._finish, sid, f"{key} was released before the barrier existed")
        elif finish == "no-worker" and shuffle.lost:
            # Not from inside a transition: err it right after this one completes.
            self.scheduler.loop.add_callback(self._fail_unrunnable, sid, stimulus_id)

    def remove_client(self, scheduler: Any, client: str) -> None:
        """A client that registered a shuffle and left before any of its tasks reached the
        scheduler: nothing else would ever end that shuffle."""
        for shuffle in list(self.active.values()):
            if shuffle.client == client and not any(k in scheduler.tasks for k in shuffle.keys):
                self._finish(shuffle.id, f"its client {client} left before submitting it")

    def remove_worker(self, scheduler: Any, worker: str, *, stimulus_id: str, **kwargs: Any) -> None:
        for shuffle in list(self.active.values()):
            if worker not in shuffle.workers or worker in shuffle.lost:
                continue
            shuffle.lost[worker] = shuffle.phase
            if shuffle.phase == "transfer":
                reason = "a worker of the shuffle left the cluster during transfer"
                msgs = {
                    w: [
                        {
                            "op": FAIL_OP,
                            "shuffle_id": shuffle.id,
                            "phase": "transfer",
                            "worker": worker,
                            "reason": reason,
                        }
                    ]
                    for w in shuffle.workers
                    if w != worker and w in scheduler.workers
                }
                scheduler.send_all({}, msgs)
            self._fail_unrunnable(shuffle.id, stimulus_id)

    def _fail_unrunnable(self, shuffle_id: str, stimulus_id: str) -> None:
        """Err this shuffle's tasks that wait for a worker that is gone."""
        shuffle = self.active.get(shuffle_id)
        if shuffle is None or not shuffle.lost:
            return
        scheduler = self.scheduler
        worker, phase = next(iter(shuffle.lost.items()))
        stuck = [ts for ts in list(scheduler.unrunnable) if ts.key in shuffle.keys]
        for ts in stuck:
            if ts.state != "no-worker":
                continue
            exc = ShuffleError(
                shuffle_id, phase, worker, f"the worker left the cluster; {ts.key} was pinned to it"
            )
            self._err(ts, exc, stimulus_id)

    def _fail_lost_output(self, key: str, shuffle_id: str, stimulus_id: str) -> None:
        """A task of a finished shuffle is needed again (an output was lost with its
        worker) and can run only on a worker that is gone: err it, never wait forever."""
        ts = self.scheduler.tasks.get(key)
        if ts is None or ts.state != "no-worker":
            return
        (worker,) = ts.worker_restrictions or {None}
        self._err(ts, ShuffleError(
            shuffle_id, "unpack", worker,
            f"an output was lost with its worker after the shuffle finished, and {key} that "
            "would recompute it can run only there; run the shuffle again",
        ), stimulus_id)  # fmt: skip

    def _err(self, ts: Any, exc: ShuffleError, stimulus_id: str) -> None:
        stimulus = f"{stimulus_id}-device-shuffle"
        recs = self.scheduler.transition(
            ts.key,
            "erred",
            stimulus_id=stimulus,
            exception=pickle.dumps(exc),
            cause=ts.key,
            exception_text=str(exc),
        )
        self.scheduler.transitions(recs, stimulus_id=stimulus)

    def _finish(self, shuffle_id: str, reason: str) -> None:
        shuffle = self.active.pop(shuffle_id, None)
        if shuffle is None:
            return
        if shuffle.lost:
            reason += "; " + ", ".join(
                f"worker {w} left the cluster during {phase}" for w, phase in shuffle.lost.items()
            )
        for key in shuffle.keys:
            self.by_key.pop(key, None)
            ts = self.scheduler.tasks.get(key)
            # Every task of the run, released ones too: an output lost after the shuffle
            # is recomputed through its barrier and the transfers, pinned to their workers.
            if ts is not None and ts.state != "forgotten":
                self.finished[key] = shuffle_id
        lost_worker, lost_phase = next(iter(shuffle.lost.items()), (None, None))
        msgs = {
            w: [
                {
                    "op": CLOSE_OP,
                    "shuffle_id": shuffle.id,
                    "reason": reason,
                    "phase": lost_phase,
                    "worker": lost_worker,
                }
            ]
            for w in shuffle.workers
            if w in self.scheduler.workers
        }
        self.scheduler.send_all({}, msgs)
