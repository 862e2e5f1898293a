"""The worker side of the shuffle: one extension per worker, holding what is worker-wide.

``ShuffleWorkerPlugin`` installs one ``ShuffleExtension`` per worker, which holds:

- ``runs``: one :class:`~.run.ShuffleRun` per active shuffle id (each run owns its
  shards, sends, unpacked outputs and failure; nothing here changes them);
- ``closed``: what it remembers of closed runs, to refuse what comes late;
- ``room`` and ``budget`` (:mod:`.limiter`): device bytes reserved against the store's
  limit, host bytes the received shards of all runs may hold before they go to files;
- ``transport`` (:mod:`.comms`): the RPC and this worker's bytes in flight;
- the handlers: ``device_shuffle_receive`` (an RPC: packed shards in, handed to their
  run) and the scheduler's ``device_shuffle_close`` stream message.
"""

from __future__ import annotations

import gc
import os
import threading
import traceback
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import dask.config
import distributed
from distributed.diagnostics.plugin import WorkerPlugin
from distributed.utils import offload

from reference_impl.device import parse_bytes
from reference_impl.store import ProxifyHostFile

from .comms import RECEIVE_OP, Transport
from .errors import RunSuperseded, ShuffleClosedError
from .limiter import HOST_DEFAULT, HOST_FLOOR, HOST_MAX, DeviceRoom, HostBudget, return_freed_memory
from .messages import CLOSE_OP, GET_RUN_OP, ask, run_from
from .run import RunContext, ShuffleRun
from .spec import RunSpec, ShuffleSpec
from .worker_device import worker_device

EXTENSION = "device_shuffle"
MAX_IN_FLIGHT = 64 * 2**20  # per worker at most; config key reference-impl.shuffle.max-in-flight
MIN_IN_FLIGHT = 2**20
_CLOSED_REMEMBERED = 10_000


def _config_bytes(key: str, default: Any) -> int:
    return parse_bytes(dask.config.get(f"reference-impl.shuffle.{key}", default), what=key)


def _config_optional_bytes(key: str, default: int | None) -> int | None:
    value = dask.config.get(f"reference-impl.shuffle.{key}", default)
    return None if value is None else parse_bytes(value, what=key)


@dataclass(frozen=True)
class Closed:
    """What a worker remembers of a shuffle's closed runs, to refuse what comes late."""

    run_id: int | None  # runs up to this one are closed; None: every run (the shuffle ended)
    reason: str = "the shuffle ended"
    phase: str | None = None  # of the lost worker that ended it, if one did
    worker: str | None = None
    superseded: bool = False  # a newer run replaced it: the tasks that meet it run again

    def covers(self, run_id: int) -> bool:
        return self.run_id is None or run_id <= self.run_id

    def merge(self, earlier: Closed | None) -> Closed:
        """This close, over an earlier one of the same shuffle: the shuffle's end stays."""
        if earlier is None:
            return self
        if earlier.run_id is None or (self.run_id is not None and self.run_id < earlier.run_id):
            return earlier
        return self

    def error(self, shuffle_id: str, phase: str, me: str) -> ShuffleClosedError:
        cls = RunSuperseded if self.superseded and self.run_id is not None else ShuffleClosedError
        return cls(shuffle_id, self.phase or phase, self.worker or me, self.reason)


class ShuffleExtension:
    """Installed on a worker by :class:`ShuffleWorkerPlugin` as ``worker.extensions[EXTENSION]``."""

    def __init__(self, worker: distributed.Worker) -> None:
        self.worker = worker
        self.runs: dict[str, ShuffleRun] = {}
        self.closed: OrderedDict[str, Closed] = OrderedDict()
        self.transport = Transport(worker, self.max_in_flight)
        self.room = DeviceRoom(lambda: self.store)
        self.budget = HostBudget(
            lambda: self.store,
            floor=_config_bytes("host-floor", HOST_FLOOR),
            default=_config_bytes("host-buffer", HOST_DEFAULT),
            most=_config_optional_bytes("host-buffer-max", HOST_MAX),
        )
        self.context = RunContext(
            worker=worker.address,
            transport=self.transport,
            room=self.room,
            budget=self.budget,
            device=lambda: self.device,
            device_limit=lambda: getattr(self.store, "device_memory_limit", None),
            directory=self.shard_directory,
            write_failed=self._count_write_errors,
        )
        self.write_errors = 0  # failed writes of shards to their files, over all runs
        self.unclean: set[str] = set()  # shuffles a task of which is rescheduled here
        self._lock = threading.Lock()
        worker.handlers[RECEIVE_OP] = self.receive
        worker.stream_handlers[CLOSE_OP] = self.close_run

    def uninstall(self) -> None:
        for sid in list(self.runs):
            self.close_run(sid, None, "the shuffle plugin was removed")
        for table, op in ((self.worker.handlers, RECEIVE_OP), (self.worker.stream_handlers, CLOSE_OP)):
            table.pop(op, None)
        self.worker.extensions.pop(EXTENSION, None)

    # --- where things live ----------------------------------------------------------
    @property
    def store(self) -> ProxifyHostFile | None:
        data = self.worker.data
        return data if isinstance(data, ProxifyHostFile) else None

    @property
    def device(self) -> Any:
        return worker_device(self.worker)

    def max_in_flight(self) -> int:
        """Bytes this worker may have on their way: the config key if set, else a quarter
        of the store's host limit (between 1 and 64 MiB). Sent bytes are held twice, by
        the sender until acknowledged and by the receiver until appended, and both are
        host memory outside the store: they must scale with the host limit."""
        if dask.config.get("reference-impl.shuffle.max-in-flight", None) is not None:
            return _config_bytes("max-in-flight", None)
        limit = getattr(self.store, "memory_limit", None)
        if limit is None:
            return MAX_IN_FLIGHT
        return min(max(limit // 4, MIN_IN_FLIGHT), MAX_IN_FLIGHT)

    @property
    def in_flight(self) -> int:
        return self.transport.in_flight

    @property
    def reserved(self) -> int:
        return self.room.reserved

    def shard_directory(self, shuffle_id: str) -> str:
        """Where a run's shard files go: beside the store's spill files (its disk)."""
        store = self.store
        base = store.spill_dir if store is not None else self.worker.local_directory
        return os.path.join(base, shuffle_id)

    def _count_write_errors(self, n: int) -> None:
        with self._lock:
            self.write_errors += n

    # --- runs -------------------------------------------------------------------------
    def join(self, spec: ShuffleSpec) -> tuple[ShuffleRun, RunSpec]:
        """The coordinator's current run of ``spec`` for a transfer on this worker (one is
        started if there is none), and this worker's state of it. Raises what the
        coordinator ended the shuffle with, or RunSuperseded."""
        me = self.worker.address
        run_spec = run_from(spec, ask(self.worker, GET_RUN_OP, shuffle_id=spec.id, worker=me), "transfer", me)
        assert run_spec is not None, "a run to join, or an error"
        return self.get_run(spec.id, run_spec.run_id, "transfer"), run_spec

    def get_run(self, shuffle_id: str, run_id: int, phase: str) -> ShuffleRun:
        """This worker's state of run ``run_id`` of ``shuffle_id``, made on first use.

        A worker holds one run per shuffle: a newer run replaces an older one (its shards
        and files go first), and a closed run, or one older than the newest seen, raises
        (:class:`RunSuperseded` when a newer run replaced it)."""
        me = self.worker.address
        replaced = None
        with self._lock:
            closed = self.closed.get(shuffle_id)
            if closed is not None and closed.covers(run_id):
                raise closed.error(shuffle_id, phase, me)
            run = self.runs.get(shuffle_id)
            if run is not None and run.run_id > run_id:
                raise RunSuperseded(
                    shuffle_id, phase, me, f"run {run_id} was replaced by run {run.run_id}"
                )
            if run is not None and run.run_id < run_id:
                replaced = self.runs.pop(shuffle_id)
                self._remember(shuffle_id, Closed(replaced.run_id, f"run {run_id} replaced it", superseded=True))
                run = None
            if run is None:
                run = self.runs[shuffle_id] = ShuffleRun(shuffle_id, run_id, self.context)
        if replaced is not None:
            self._drop(replaced, self.closed[shuffle_id], collect=True)
        return run

    def close_run(
        self,
        shuffle_id: str,
        run_id: int | None = None,
        reason: str = "the shuffle ended",
        phase: str | None = None,
        worker: str | None = None,
        superseded: bool = False,
        collect: bool = True,
    ) -> None:
        """Forget runs up to ``run_id`` of ``shuffle_id`` (every run: ``None``, the shuffle
        ended): drop their shards and files, stop their sends, and refuse anything that
        still arrives for them. ``phase`` and ``worker`` name a lost worker that ended
        the shuffle, for the errors raised here later; ``superseded``: a newer run takes
        over (tasks that meet the old one are rescheduled). When it was the worker's last
        run, the C allocator's free pages go back to the OS.

        Unless the run ended in success (``collect=False``) and no task of the shuffle
        was rescheduled here since the last close, a garbage collection follows:
        an exception that went through distributed's ``sync``, or left a task (its
        ``_run_task_simple`` frame keeps it in a local, and its traceback keeps the
        frame), sits in a reference cycle with the task's inputs until a collection.
        A task rescheduled by a restart raises after its run was closed, so the next
        close of the shuffle collects (:meth:`collect_at_next_close`)."""
        closed = Closed(run_id, reason, phase, worker, superseded)
        with self._lock:
            self._remember(shuffle_id, closed)
            unclean = shuffle_id in self.unclean
            self.unclean.discard(shuffle_id)
            run = self.runs.get(shuffle_id)
            if run is not None and closed.covers(run.run_id):
                del self.runs[shuffle_id]
            else:
                run = None
        if run is not None:
            self._drop(run, closed, collect or unclean)
        elif unclean:
            _collect_soon(collect=True, last=False)

    def _remember(self, shuffle_id: str, closed: Closed) -> None:
        """Under the lock: what is closed of ``shuffle_id`` from now on."""
        self.closed[shuffle_id] = closed.merge(self.closed.pop(shuffle_id, None))
        while len(self.closed) > _CLOSED_REMEMBERED:
            self.closed.popitem(last=False)

    def collect_at_next_close(self, shuffle_id: str) -> None:
        """A task of ``shuffle_id`` is about to be rescheduled here: see :meth:`close_run`."""
        with self._lock:
            self.unclean.add(shuffle_id)

    def _drop(self, run: ShuffleRun, closed: Closed, collect: bool) -> None:
        run.close(closed.error(run.id, "unpack", run.worker))
        last = not self.runs
        if collect or last:
            _collect_soon(collect, last)

    # --- receiving ------------------------------------------------------------------------
    async def receive(
        self, shuffle_id: str, run_id: int, source: tuple[int, int], shards: Any
    ) -> str:
        """RPC handler: packed shards of one input chunk for this worker's outputs."""
        try:
            run = self.get_run(shuffle_id, run_id, "transfer")
        except RunSuperseded:
            return "superseded"
        except ShuffleClosedError:
            return "closed"
        if run.failure is not None:
            return "failed"
        try:
            await offload(run.receive, shards)
        except Exception as exc:
            traceback.clear_frames(exc.__traceback__)
            if isinstance(exc, ShuffleClosedError):  # closed while this batch was kept
                return "closed"
            raise  # the sender's error: a full disk here, say
        return "OK"


def _collect_soon(collect: bool, last: bool) -> None:
    """In a thread: a full collection takes long on a worker holding many objects."""
    threading.Thread(target=_after_close, args=(collect, last), name="device-shuffle-gc", daemon=True).start()


def _after_close(collect: bool, last: bool) -> None:
    if collect:
        gc.collect()
    if last:
        return_freed_memory()


def get_extension(worker: distributed.Worker | None = None) -> ShuffleExtension:
    worker = worker or distributed.get_worker()
    ext = worker.extensions.get(EXTENSION)
    if ext is None:
        raise RuntimeError(
            f"worker {worker.address} has no shuffle extension: register "
            "reference_impl.shuffle.ShuffleWorkerPlugin, or start it with "
            "--preload reference_impl.shuffle.preload"
        )
    return ext


def install_extension(worker: distributed.Worker) -> ShuffleExtension:
    """Idempotent: a worker keeps one extension (and its runs) however often this is called."""
    ext = worker.extensions.get(EXTENSION)
    if ext is None:
        ext = worker.extensions[EXTENSION] = ShuffleExtension(worker)
    return ext


class ShuffleWorkerPlugin(WorkerPlugin):
    """Installs the shuffle's worker extension; removing the plugin removes it."""

    name = "device-shuffle"
    idempotent = True

    def setup(self, worker: distributed.Worker) -> None:
        install_extension(worker)

    def teardown(self, worker: distributed.Worker) -> None:
        ext = worker.extensions.get(EXTENSION)
        if ext is not None:
            ext.uninstall()
