"""The scheduler side: every run of each shuffle, a restart when a worker leaves, clean-up.

``ShuffleSchedulerPlugin`` knows each shuffle's tasks (``device_shuffle_register``, called
by :func:`~reference_impl.shuffle.shuffle` before it submits them) and owns its runs. The
first transfer to ask (``device_shuffle_get_run``) starts a run: an id, the workers
running now, where each output goes (the unpack tasks are restricted to those workers)
and which outputs it builds (those not already in memory).

When a worker of the current run leaves the cluster, the run ends: the workers left drop
its shards and files, and the transfers, the barrier and every output not in memory are
released, so dask computes them again (the inputs from their lineage) in a new run on the
workers there are then. Anything of the old run that arrives later is refused by its run
id. A run ends with an error instead when an input lived only on the lost worker and
cannot be computed again (data scattered to it), or when losses exhaust
``reference-impl.shuffle.max-restarts``: the :class:`ShuffleError` names every loss in order.

The barrier confirms that every transfer ran in the current run (``device_shuffle_barrier``;
a transfer released by a restart while it ran can report the old run's result), and an
unpack handed a stale barrier result asks for a restart (``device_shuffle_restart``); such
restarts are not losses, and are bounded too. When the barrier is released (the outputs are
built, or the client let go of them) the run is closed on its workers; when it is forgotten,
the shuffle is. A client that dies between registering a shuffle and submitting its barrier
leaves no barrier to watch: then the shuffle is dropped when one of its tasks is forgotten
while the barrier does not exist, or when that client leaves with none of them.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from distributed.core import Status
from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.protocol import pickle

from .errors import ShuffleError
from .messages import BARRIER_OP, CLOSE_OP, GET_RUN_OP, REGISTER_OP, RESTART_OP
from .plan import place
from .spec import barrier_spec

logger = logging.getLogger(__name__)
MAX_RESTARTS = 3  # config reference-impl.shuffle.max-restarts (as distributed's allowed-failures)
MAX_STALE_RESTARTS = 10  # restarts for stale results, per shuffle; past it, an error
_LIVE = (Status.running, Status.paused)


@dataclass
class Run:
    """One attempt at a shuffle, on the workers there were when it started."""

    id: int
    placement: tuple[str, ...]
    wanted: frozenset[int]
    workers: set[str]  # the placement's and every worker that joined it to send

    def answer(self) -> dict:
        return {"status": "OK", "run_id": self.id, "placement": list(self.placement), "wanted": sorted(self.wanted)}


@dataclass
class ShuffleRecord:
    id: str
    npartitions: int
    barrier: str
    transfers: list[str]
    unpacks: list[str]
    client: str | None = None
    max_restarts: int = MAX_RESTARTS
    run: Run | None = None
    last_run_id: int = 0
    barrier_run_id: int | None = None  # the run the barrier confirmed last
    phase: str = "transfer"
    losses: list[tuple[str, str, int]] = field(default_factory=list)  # (worker, phase, run id)
    stale_restarts: int = 0
    ever: set[str] = field(default_factory=set)  # every worker that took part in a run
    failure: ShuffleError | None = None
    output_of: dict[str, int] = field(default_factory=dict)  # unpack key -> its output
    ended: bool = False  # its barrier was released or erred (a lost output starts a run again)

    def __post_init__(self) -> None:
        self.output_of = {key: i for i, key in enumerate(self.unpacks)}

    @property
    def keys(self) -> set[str]:
        return {*self.transfers, *self.unpacks, self.barrier}

    def losses_text(self) -> str:
        return "; ".join(f"worker {w} left the cluster during {p} (run {r})" for w, p, r in self.losses)


class ShuffleSchedulerPlugin(SchedulerPlugin):
    name = "device-shuffle-coordinator"
    idempotent = True

    def __init__(self) -> None:
        self.scheduler: Any = None
        self.shuffles: dict[str, ShuffleRecord] = {}  # until the barrier is forgotten
        self.by_key: dict[str, str] = {}
        self._restarting: set[str] = set()  # shuffles whose tasks this plugin is releasing
        # Decided as a worker's removal starts, done once its transitions are through (done
        # earlier, the removal's own recommendations would undo it: it releases a processing
        # task erred here, and a lost output has no memory -> erred). Only a lost scattered
        # input fails at once: the removal forgets it, and every task that needs it.
        self._pending: set[str] = set()  # shuffles to restart
        # shuffles to fail: (error, stimulus, the keys made from their outputs -> the clients
        # that want them, told the error if the removal forgets them: lost inputs only)
        self._failing: dict[str, tuple[ShuffleError, str, dict[Any, list[str]]]] = {}

    @property
    def active(self) -> dict[str, ShuffleRecord]:
        """The shuffles whose outputs are not all built: registered, or in a run."""
        return {sid: s for sid, s in self.shuffles.items() if not s.ended}

    async def start(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        scheduler.handlers.update(
            {
                REGISTER_OP: self.register,
                GET_RUN_OP: self.get_run,
                BARRIER_OP: self.confirm_barrier,
                RESTART_OP: self.restart_stale,
            }
        )

    async def close(self) -> None:
        if self.scheduler is not None:
            for op in (REGISTER_OP, GET_RUN_OP, BARRIER_OP, RESTART_OP):
                self.scheduler.handlers.pop(op, None)

    # --- handlers ---------------------------------------------------------------------
    def register(
        self,
        shuffle_id: str,
        npartitions: int,
        barrier: str,
        transfers: list[str],
        unpacks: list[str],
        client: str | None = None,
        max_restarts: int = MAX_RESTARTS,
    ) -> str:
        shuffle = ShuffleRecord(
            shuffle_id, npartitions, barrier, list(transfers), list(unpacks), client, int(max_restarts)
        )
        self.shuffles[shuffle_id] = shuffle
        for key in shuffle.keys:
            self.by_key[key] = shuffle_id
        return "OK"

    def get_run(self, shuffle_id: str, worker: str) -> dict:
        """A transfer joins the current run (one is started if there is none)."""
        shuffle = self.shuffles.get(shuffle_id)
        refused = self._refusal(shuffle_id, shuffle)
        if refused is not None:
            return refused
        assert shuffle is not None
        if shuffle.run is None:
            self._start_run(shuffle)
        assert shuffle.run is not None
        shuffle.run.workers.add(worker)
        shuffle.ever.add(worker)
        return shuffle.run.answer()

    def confirm_barrier(self, shuffle_id: str, run_ids: list[int]) -> dict:
        """Every transfer ran in the current run: the barrier's run. Else, a restart."""
        shuffle = self.shuffles.get(shuffle_id)
        refused = self._refusal(shuffle_id, shuffle)
        if refused is not None:
            return refused
        assert shuffle is not None
        run = shuffle.run
        if run is None or list(run_ids) != [run.id]:
            now = run.id if run is not None else "none"
            self._restart(shuffle, f"transfers of runs {list(run_ids)} met the barrier (current run: {now})")
            return {"status": "restarted"}
        shuffle.barrier_run_id = run.id
        shuffle.phase = "unpack"
        return run.answer()

    def restart_stale(self, shuffle_id: str, run_id: int, reason: str) -> dict:
        """An unpack was handed run ``run_id``'s barrier result, which cannot serve it: if
        that result is still the barrier's (a barrier released by a restart while it ran
        reports the old run), start again; otherwise a restart already released it."""
        shuffle = self.shuffles.get(shuffle_id)
        if shuffle is None or shuffle.failure is not None:
            return {"status": "closed", "reason": "the shuffle ended"}
        ts = self.scheduler.tasks.get(shuffle.barrier)
        if ts is not None and ts.state == "memory" and shuffle.barrier_run_id == run_id:
            self._restart(shuffle, f"an unpack was handed run {run_id}: {reason}")
        return {"status": "restarted"}

    def _refusal(self, shuffle_id: str, shuffle: ShuffleRecord | None) -> dict | None:
        if shuffle is None:
            return {"status": "closed", "reason": f"the shuffle {shuffle_id} ended (its outputs were released)"}
        if shuffle.failure is not None:
            exc = shuffle.failure
            return {"status": "failed", "reason": exc.reason, "phase": exc.phase, "worker": exc.worker}
        return None

    def valid_workers_downscaling(self, scheduler: Any, workers: list[Any]) -> list[Any]:
        """``workers_to_close`` (adaptive scaling, ``retire_workers``) spares the workers of
        every run in progress: closing one would restart that shuffle (P2P's rule too)."""
        busy: set[str] = set()
        for shuffle in self.active.values():
            if shuffle.run is not None:
                busy |= shuffle.run.workers
        return [ws for ws in workers if ws.address not in busy]

    # --- runs -------------------------------------------------------------------------
    def _start_run(self, shuffle: ShuffleRecord) -> None:
        tasks = self.scheduler.tasks
        workers = sorted(a for a, ws in self.scheduler.workers.items() if ws.status in _LIVE)
        workers = workers or sorted(self.scheduler.workers)
        placement = tuple(place(shuffle.npartitions, workers))
        kept = {
            i for i, key in enumerate(shuffle.unpacks)
            if (ts := tasks.get(key)) is not None and ts.state == "memory" and ts.who_has
        }  # fmt: skip
        shuffle.last_run_id += 1
        shuffle.run = Run(
            shuffle.last_run_id, placement, frozenset(range(shuffle.npartitions)) - kept, set(placement)
        )
        shuffle.ever.update(placement)
        shuffle.phase = "transfer"
        shuffle.ended = False
        for key in shuffle.unpacks:
            self._restrict(shuffle, key)

    def _restrict(self, shuffle: ShuffleRecord, key: str) -> None:
        """An output's unpack runs where the current run sends its shards."""
        ts = self.scheduler.tasks.get(key)
        run = shuffle.run
        if ts is None or run is None or ts.state == "memory":
            return
        ts.worker_restrictions = {run.placement[shuffle.output_of[key]]}
        ts.loose_restrictions = False

    def _restart(self, shuffle: ShuffleRecord, reason: str, *, lost: bool = False) -> None:
        """End the current run and compute its tasks again (those it still needs)."""
        if not lost:
            shuffle.stale_restarts += 1
            if shuffle.stale_restarts > MAX_STALE_RESTARTS:
                self._fail(shuffle, ShuffleError(
                    shuffle.id, shuffle.phase, None,
                    f"{MAX_STALE_RESTARTS} restarts for stale results did not settle it; last: {reason}",
                ), "device-shuffle-stale")  # fmt: skip
                return
        old, shuffle.run = shuffle.run, None
        if old is not None:
            self._close_on(old.workers, shuffle.id, old.id, f"run {old.id} was restarted: {reason}", superseded=True)
        logger.warning("shuffle %s restarts: %s", shuffle.id, reason)
        self._unpin_transfers(shuffle)
        recs = self._restart_recommendations(shuffle)
        stimulus = f"device-shuffle-restart-{shuffle.id}-{shuffle.last_run_id}"
        self._restarting.add(shuffle.id)
        try:
            self.scheduler.transitions(recs, stimulus_id=stimulus)
        finally:
            self._restarting.discard(shuffle.id)
        self.scheduler.stimulus_queue_slots_maybe_opened(stimulus_id=stimulus)

    def _unpin_transfers(self, shuffle: ShuffleRecord) -> None:
        """A transfer prefers the worker that held its inputs; once that worker is gone the
        preference goes. Left in place, it would strand the transfer when every worker
        left at once: distributed's scheduler moves a ``no-worker`` task to a worker that
        joins only if its restrictions name that worker, loose or not
        (``bulk_schedule_unrunnable_after_adding_worker``)."""
        for key in shuffle.transfers:
            ts = self.scheduler.tasks.get(key)
            if ts is not None and ts.worker_restrictions:
                kept = {w for w in ts.worker_restrictions if w in self.scheduler.workers}
                ts.worker_restrictions = kept or None

    def _restart_recommendations(self, shuffle: ShuffleRecord) -> dict[str, str]:
        """Release the transfers, the barrier and every output not in memory (as P2P
        does, but the outputs already built stay: a new run would build the same rows)."""
        tasks = self.scheduler.tasks
        recs: dict[str, str] = {}
        for key in (*shuffle.unpacks, shuffle.barrier, *shuffle.transfers):
            ts = tasks.get(key)
            if ts is None or ts.state in ("released", "forgotten"):
                continue
            if ts.state == "erred":
                return {}  # the shuffle failed: nothing to run again
            if key in shuffle.output_of and ts.state in ("memory", "waiting"):
                continue
            recs[key] = "released"
        return recs

    def update_graph(self, scheduler: Any, *, client: str, tasks: list, **kwargs: Any) -> None:
        """A shuffle inside a dask graph registers as the graph arrives, before any of its
        tasks is transitioned: its barrier carries the spec, with every transfer as a
        dependency. Outputs a culled graph left out are still the shuffle's, never built."""
        for key in tasks:
            ts = scheduler.tasks.get(key)
            spec = barrier_spec(ts) if ts is not None else None
            if spec is None or spec.max_restarts is None:
                continue  # not a barrier, or registered by its client before it submitted
            if spec.id in self.shuffles:
                continue  # each graph's shuffle has its own id (in_dask): seen already
            if _forget_orphans(scheduler, spec):
                continue  # the whole shuffle was another compute's: gone with its tasks
            self.register(
                spec.id,
                spec.npartitions,
                spec.barrier_key,
                transfers=sorted(str(dts.key) for dts in ts.dependencies),
                unpacks=spec.unpack_keys,
                client=None,
                max_restarts=spec.max_restarts,
            )

    # --- losing a worker ------------------------------------------------------------------
    def log_event(self, topic: str, msg: Any) -> None:
        """A worker is being removed, before its tasks are transitioned: decide here, while
        data scattered only to it is still known (the removal forgets it, and with it every
        task that needs it, which the client would see as 'lost dependencies')."""
        if topic != "all" or not isinstance(msg, dict) or msg.get("action") != "remove-worker":
            return
        worker = msg["worker"]
        stimulus = msg.get("stimulus_id", "device-shuffle-remove-worker")
        scattered = {str(k) for k in msg.get("lost-scattered-tasks", ())}
        for shuffle in list(self.shuffles.values()):
            if shuffle.failure is None:
                self._lose(shuffle, worker, scattered, stimulus)

    def _lose(self, shuffle: ShuffleRecord, worker: str, scattered: set[str], stimulus: str) -> None:
        run = shuffle.run
        involved = run is not None and worker in run.workers
        tasks = self.scheduler.tasks
        outputs_lost = any(
            (ts := tasks.get(k)) is not None and ts.state == "memory" and not ts.who_has
            for k in shuffle.unpacks
        )
        if not (involved or outputs_lost):
            return
        phase = shuffle.phase if involved else "unpack"
        if involved:
            assert run is not None
            shuffle.losses.append((worker, shuffle.phase, run.id))
        missing = self._lost_inputs(shuffle, scattered)
        if missing:
            exc = ShuffleError(shuffle.id, phase, worker, _lost_inputs_text(missing))
            self._fail(shuffle, exc, stimulus)  # now: the removal forgets the scattered data
            # and after it, for what it undid
            self._failing[shuffle.id] = (exc, stimulus, self._wanted_downstream(shuffle))
        elif involved and len(shuffle.losses) > shuffle.max_restarts:
            exc = ShuffleError(
                shuffle.id, phase, worker,
                f"{shuffle.losses_text()}; no restart left (reference-impl.shuffle.max-restarts "
                f"is {shuffle.max_restarts})",
            )  # fmt: skip
            self._failing[shuffle.id] = (exc, stimulus, {})
        elif involved:
            self._pending.add(shuffle.id)

    def _lost_inputs(self, shuffle: ShuffleRecord, scattered: set[str]) -> dict[str, str]:
        """The inputs a new run would need (the transfers' inputs, through the tasks that
        would have to run again) that nothing can compute again: key -> why. Scattered data
        lost with the worker (``"scattered"``), or a task whose holders are all gone and one of
        whose dependencies the scheduler already forgot (``"released"``: the caller released
        the data it was made from, and distributed flags it ``has_lost_dependencies``)."""
        tasks = self.scheduler.tasks
        missing: dict[str, str] = {}
        seen: set[str] = set()
        stack = [tasks[k] for k in shuffle.transfers if k in tasks]
        while stack:
            for dts in stack.pop().dependencies:
                key = str(dts.key)
                if key in seen:
                    continue
                seen.add(key)
                if key in scattered:
                    missing[key] = "scattered"
                elif dts.state == "memory" and dts.who_has:
                    continue  # still held elsewhere
                elif dts.has_lost_dependencies:
                    missing[key] = "released"
                else:
                    stack.append(dts)
        return dict(sorted(missing.items()))

    def remove_worker(self, scheduler: Any, worker: str, *, stimulus_id: str, **kwargs: Any) -> None:
        """After the removal's own transitions: fail or restart the shuffles it ended."""
        failing, self._failing = self._failing, {}
        for sid, (exc, stimulus, wanted) in sorted(failing.items()):
            shuffle = self.shuffles.get(sid)
            if shuffle is not None and shuffle.failure is None:
                self._fail(shuffle, exc, stimulus)
            elif shuffle is not None and shuffle.failure is exc:
                self._err_unbuilt(shuffle, exc, stimulus)
            self._tell_forgotten(exc, wanted)
        pending, self._pending = self._pending, set()
        for sid in sorted(pending):
            shuffle = self.shuffles.get(sid)
            if shuffle is not None and shuffle.failure is None:
                w, phase, run_id = shuffle.losses[-1]
                self._restart(shuffle, f"worker {w} left the cluster during {phase} (run {run_id})", lost=True)

    # --- ending ---------------------------------------------------------------------------
    def transition(
        self, key: Any, start: str, finish: str, *args: Any, stimulus_id: str, **kwargs: Any
    ) -> None:
        sid = self.by_key.get(key)
        shuffle = self.shuffles.get(sid) if sid is not None else None
        if shuffle is None:
            return
        loop = self.scheduler.loop
        if key == shuffle.barrier:
            if finish == "forgotten":
                loop.add_callback(self._forget, sid, "its outputs were released", shuffle)
            elif finish in ("released", "erred") and sid not in self._restarting:
                # After this transition (and a worker removal that caused it) completes.
                loop.add_callback(self._end_run, sid, f"its barrier was {finish}", shuffle)
        elif finish == "waiting" and key in shuffle.output_of:
            self._restrict(shuffle, key)  # submitted after the run started
        elif finish == "forgotten" and shuffle.barrier not in self.scheduler.tasks:
            # Released before its barrier was ever submitted: the client is gone (or
            # cancelled), and no barrier transition will come to end the shuffle.
            loop.add_callback(self._forget, sid, f"{key} was released before the barrier existed")
        elif finish == "no-worker":
            # Not from inside a transition: err it right after this one completes.
            loop.add_callback(self._fail_unrunnable, sid, stimulus_id)

    def remove_client(self, scheduler: Any, client: str) -> None:
        """A client that registered a shuffle and left before any of its tasks reached the
        scheduler: nothing else would ever end that shuffle."""
        for shuffle in list(self.shuffles.values()):
            if shuffle.client == client and not any(k in scheduler.tasks for k in shuffle.keys):
                self._forget(shuffle.id, f"its client {client} left before submitting it")

    def _end_run(self, shuffle_id: str, reason: str, record: ShuffleRecord | None = None) -> None:
        """The barrier was released or erred: the run's workers drop its state, unless the
        barrier is needed again (then the run goes on). ``record``: the shuffle this was
        decided for (a graph submitted again since registers a new one, left alone)."""
        shuffle = self.shuffles.get(shuffle_id)
        if shuffle is None or (record is not None and shuffle is not record):
            return
        ts = self.scheduler.tasks.get(shuffle.barrier)
        if ts is not None and ts.state not in ("released", "erred", "forgotten"):
            return
        run, shuffle.run = shuffle.run, None
        shuffle.ended = True
        if ts is not None and ts.state == "erred":
            self._close_on(shuffle.ever, shuffle.id, None, reason)
        elif run is not None:
            self._close_on(run.workers, shuffle.id, run.id, reason)

    def _forget(self, shuffle_id: str, reason: str, record: ShuffleRecord | None = None) -> None:
        shuffle = self.shuffles.get(shuffle_id)
        if shuffle is None or (record is not None and shuffle is not record):
            return
        del self.shuffles[shuffle_id]
        for key in shuffle.keys:
            self.by_key.pop(key, None)
        if shuffle.losses:
            reason += "; " + shuffle.losses_text()
        worker, phase = (shuffle.losses[-1][:2]) if shuffle.losses else (None, None)
        self._close_on(shuffle.ever, shuffle.id, None, reason, phase=phase, worker=worker)

    def _fail(self, shuffle: ShuffleRecord, exc: ShuffleError, stimulus_id: str) -> None:
        """End the shuffle with ``exc``: its barrier (or, once it ran, every output not
        built) errs with it, and every worker drops the shuffle."""
        shuffle.failure = exc
        shuffle.run = None
        self._pending.discard(shuffle.id)
        self._err_unbuilt(shuffle, exc, stimulus_id)
        self._close_on(shuffle.ever, shuffle.id, None, exc.reason, phase=exc.phase, worker=exc.worker)

    def _err_unbuilt(self, shuffle: ShuffleRecord, exc: ShuffleError, stimulus_id: str) -> None:
        """The barrier errs with ``exc`` (its error reaches every output waiting on it) or,
        once it ran, every output not built. An output in memory is left alone: built, or
        lost with a worker being removed, which releases it (erred after that removal)."""
        tasks = self.scheduler.tasks
        ts = tasks.get(shuffle.barrier)
        if ts is not None and ts.state not in ("memory", "erred", "forgotten"):
            self._err(ts, exc, stimulus_id)
            return
        for key in shuffle.unpacks:
            uts = tasks.get(key)
            if uts is not None and uts.state not in ("memory", "erred", "forgotten"):
                self._err(uts, exc, stimulus_id)

    def _fail_unrunnable(self, shuffle_id: str, stimulus_id: str) -> None:
        """An output that waits for a worker that is gone (a safety net: a restart moves
        every output it needs): err it, never wait forever."""
        shuffle = self.shuffles.get(shuffle_id)
        if shuffle is None:
            return
        keys = shuffle.keys
        for ts in [ts for ts in list(self.scheduler.unrunnable) if ts.key in keys]:
            if ts.state != "no-worker" or not ts.worker_restrictions:
                continue
            gone = sorted(set(ts.worker_restrictions) - set(self.scheduler.workers))
            if gone:
                self._err(ts, ShuffleError(
                    shuffle_id, shuffle.phase, gone[0], f"the worker left the cluster; {ts.key} was pinned to it"
                ), stimulus_id)  # fmt: skip

    def _wanted_downstream(self, shuffle: ShuffleRecord) -> dict[Any, list[str]]:
        """The outputs and the tasks made from them (in dask's graph: its aliases and
        projections) that a client wants: key -> those clients."""
        tasks = self.scheduler.tasks
        stack = [ts for k in shuffle.unpacks if (ts := tasks.get(k)) is not None]
        seen = {ts.key for ts in stack}
        wanted: dict[Any, list[str]] = {}
        while stack:
            ts = stack.pop()
            if ts.who_wants:
                wanted[ts.key] = [c.client_key for c in ts.who_wants]
            for dts in ts.dependents:
                if dts.key not in seen:
                    seen.add(dts.key)
                    stack.append(dts)
        return wanted

    def _tell_forgotten(self, exc: ShuffleError, wanted: dict[Any, list[str]]) -> None:
        """Outputs (or tasks made from them) the removal forgot, their inputs' data lost: each
        client that wanted one hears ``exc`` for it, after the scheduler's 'cancelled: already
        forgotten' and in the same batch, so the client's future ends erred with the reason,
        not cancelled with none. (A barrier still processing on the lost worker is released
        by the removal, which undoes the error given before it, then forgotten with every
        output.)"""
        error = pickle.dumps(exc)
        for key, clients in wanted.items():
            ts = self.scheduler.tasks.get(key)
            if ts is not None and ts.state != "forgotten":
                continue
            msg = {"op": "task-erred", "key": key, "exception": error, "traceback": None}
            for client in clients:
                comm = self.scheduler.client_comms.get(client)
                if comm is not None:
                    comm.send(msg)

    def _err(self, ts: Any, exc: ShuffleError, stimulus_id: str) -> None:
        """``ts`` errs with ``exc``, and its dependents with it (as a failed task's do)."""
        stimulus = f"{stimulus_id}-device-shuffle"
        error = {"exception": pickle.dumps(exc), "exception_text": str(exc)}
        if ts.state not in ("waiting", "released"):
            recs = self.scheduler.transition(ts.key, "erred", stimulus_id=stimulus, cause=ts.key, **error)
        else:
            # The scheduler has no waiting/released -> erred of its own (released -> erred
            # only passes on a dependency's error, and leaves the task's waiters, which then
            # release it and reset it to waiting). A task failing on a worker ends in
            # _propagate_erred: so does this one, blaming itself.
            recs = {}
            if ts.state == "waiting":
                recs = self.scheduler.transition(ts.key, "released", stimulus_id=stimulus)
                recs.pop(ts.key, None)  # not back to waiting
            more, to_clients, to_workers = self.scheduler._propagate_erred(ts, cause=ts.key, **error)
            recs |= more
            self.scheduler.send_all(to_clients, to_workers)
        self.scheduler.transitions(recs, stimulus_id=stimulus)

    def _close_on(
        self,
        workers: Iterable[str],
        shuffle_id: str,
        run_id: int | None,
        reason: str,
        *,
        superseded: bool = False,
        phase: str | None = None,
        worker: str | None = None,
    ) -> None:
        """Tell ``workers`` (those still here) to drop runs up to ``run_id`` (None: all)."""
        msg = {
            "op": CLOSE_OP,
            "shuffle_id": shuffle_id,
            "run_id": run_id,
            "reason": reason,
            "phase": phase,
            "worker": worker,
            "superseded": superseded,
        }
        live: Collection[str] = self.scheduler.workers
        self.scheduler.send_all({}, {w: [dict(msg)] for w in sorted(set(workers)) if w in live})


def _forget_orphans(scheduler: Any, spec: Any) -> bool:
    """Forget the outputs of ``spec``'s shuffle that no task needs; whether its barrier went
    with them (nothing of the shuffle is needed).

    Each lowering draws a new shuffle id, but the outputs keep dask's keys: computing a
    collection again while an earlier compute of it runs sends outputs the scheduler already
    has, and it keeps their first tasks. This graph's unpacks, barrier and transfers are then
    needed by nothing, never run, and would never be forgotten either (12 tasks left on the
    scheduler for every such compute, found by SHUF-RERUN-002)."""
    orphans = [
        key
        for key in spec.unpack_keys
        if (ts := scheduler.tasks.get(key)) is not None and not ts.dependents and not ts.who_wants
    ]
    if orphans:
        scheduler.transitions(
            {key: "forgotten" for key in orphans}, stimulus_id=f"device-shuffle-orphans-{spec.id}"
        )
    return spec.barrier_key not in scheduler.tasks


_WHY_LOST = {
    "scattered": "data scattered to it",
    "released": "made from data the caller released",
}


def _lost_inputs_text(missing: dict[str, str]) -> str:
    """The error for inputs nothing can compute again, each kind named with its keys."""
    parts = []
    for why, reason in _WHY_LOST.items():
        keys = [k for k, w in missing.items() if w == why]
        if keys:
            parts.append(
                f"input{'s' if len(keys) > 1 else ''} {', '.join(keys)} lived only on the worker "
                f"that left and cannot be computed again ({reason})"
            )
    return "; ".join(parts) + "; scatter inputs to several workers and keep them, or pass a dask collection"
