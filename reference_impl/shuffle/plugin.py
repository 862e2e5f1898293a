"""The worker-side shuffle extension: per-shuffle state, the comm handlers, room.

``ShuffleWorkerPlugin`` installs one ``ShuffleExtension`` per worker. It owns:

- ``runs``: one :class:`ShuffleRun` per active shuffle id, holding the shards
  received for this worker's outputs. Each shard is registered with the
  worker's ProxifyHostFile through ``register_external``, so it counts toward
  the device limit and spills to host and disk under pressure; the run holds
  the only strong reference, so dropping it frees the shard (and its file).
- the handlers: ``device_shuffle_receive`` (an RPC: shards in, host frames
  decoded onto this worker's device after room is made) and the scheduler's
  ``device_shuffle_close`` / ``device_shuffle_fail`` stream messages.
- room: bytes the shuffle is about to allocate outside the store (a
  partitioned input, an arriving batch, an output being assembled) are reserved
  here and the store spills first, so store + reservations stay under its limit.
- bytes in flight: sends wait while this worker has ``max_in_flight`` bytes out.
- a full disk: the store keeps a value it cannot write in host memory (beyond its
  ``memory_limit``, with a SpillWarning); a shuffle whose shards could not spill fails
  instead, with a ShuffleError naming the phase, the worker and the spill directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import traceback
import warnings
from collections import OrderedDict, deque
from collections.abc import Iterator
from typing import Any

import dask.config
import distributed
from distributed.diagnostics.plugin import WorkerPlugin
from distributed.utils import offload, sync

from reference_impl.device import get_device, parse_bytes
from reference_impl.store import ProxifyHostFile, SpillWarning

from .errors import ShuffleClosedError, ShuffleError
from .shards import ShardMeta, copy_table, describe

EXTENSION = "device_shuffle"
RECEIVE_OP = "device_shuffle_receive"
CLOSE_OP = "device_shuffle_close"
FAIL_OP = "device_shuffle_fail"
MAX_IN_FLIGHT = "64 MiB"  # per worker; config key reference-impl.shuffle.max-in-flight
_CLOSED_REMEMBERED = 10_000
_SPILL_WARNINGS: deque[str] = deque(maxlen=4)  # the store's last SpillWarnings, this process
_HOOKED = False


def _capture_spill_warnings() -> None:
    """Keep the text of the store's SpillWarnings (file, OS error) for a disk-full error."""
    global _HOOKED
    if _HOOKED:
        return
    _HOOKED = True
    previous = warnings.showwarning

    def showwarning(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, SpillWarning):
            _SPILL_WARNINGS.append(str(message))
        return previous(message, category, filename, lineno, file, line)

    warnings.showwarning = showwarning


class ShuffleRun:
    """One shuffle's state on one worker: shards by output, then by input index."""

    def __init__(self, shuffle_id: str, worker: str, disk_errors: int = 0) -> None:
        self.id = shuffle_id
        self.worker = worker
        self.disk_errors = disk_errors  # the store's failed disk writes when the run began
        self.lock = threading.Lock()
        self.shards: dict[int, dict[tuple[int, int], tuple[ShardMeta, Any]]] = {}
        self.unpacked: set[int] = set()
        self.failure: ShuffleError | None = None
        self.sends: list[asyncio.Task] = []

    def check(self) -> None:
        if self.failure is not None:
            raise self.error()

    def error(self) -> ShuffleError:
        """A fresh copy of the failure to raise: a stored exception raised would keep
        the traceback of every raise, and with it the frames (and the inputs and shards
        they hold) of the tasks that hit it, in a cycle only a garbage collection frees."""
        f = self.failure
        assert f is not None
        return type(f)(f.shuffle_id, f.phase, f.worker, f.reason)

    def add(self, output: int, meta: ShardMeta, obj: Any) -> None:
        """Keep a shard; one sent again (a rerun input) replaces the first copy."""
        with self.lock:
            self.check()
            if output in self.unpacked:
                raise ShuffleError(
                    self.id, "transfer", self.worker,
                    f"a shard of output {output} arrived after that output was unpacked",
                )
            self.shards.setdefault(output, {})[meta.source] = (meta, obj)

    def take(self, output: int) -> list[tuple[ShardMeta, Any]]:
        """Output ``output``'s shards in input order, handed over (no longer held here)."""
        with self.lock:
            self.check()
            self.unpacked.add(output)
            got = self.shards.pop(output, {})
        return [got[i] for i in sorted(got)]

    def n_shards(self) -> int:
        with self.lock:
            return sum(len(s) for s in self.shards.values())


class ShuffleExtension:
    """Installed on a worker by :class:`ShuffleWorkerPlugin` as ``worker.extensions[EXTENSION]``."""

    def __init__(self, worker: distributed.Worker) -> None:
        self.worker = worker
        self.runs: dict[str, ShuffleRun] = {}
        self.closed: OrderedDict[str, tuple[str, str | None, str | None]] = OrderedDict()
        self.max_in_flight = parse_bytes(
            dask.config.get("reference-impl.shuffle.max-in-flight", MAX_IN_FLIGHT),
            what="max-in-flight",
        )
        self.in_flight = 0
        self.reserved = 0
        self._lock = threading.Lock()
        self._room_lock = threading.Lock()
        self._flight: asyncio.Condition | None = None
        worker.handlers[RECEIVE_OP] = self.receive
        worker.stream_handlers[CLOSE_OP] = self.close_run
        worker.stream_handlers[FAIL_OP] = self.fail_run

    def uninstall(self) -> None:
        for sid in list(self.runs):
            self.close_run(sid, "the shuffle plugin was removed")
        for table, op in (
            (self.worker.handlers, RECEIVE_OP),
            (self.worker.stream_handlers, CLOSE_OP),
            (self.worker.stream_handlers, FAIL_OP),
        ):
            table.pop(op, None)
        self.worker.extensions.pop(EXTENSION, None)

    # --- where things live ----------------------------------------------------------
    @property
    def store(self) -> ProxifyHostFile | None:
        data = self.worker.data
        return data if isinstance(data, ProxifyHostFile) else None

    @property
    def device(self) -> Any:
        store = self.store
        return store.device if store is not None else get_device("auto")

    # --- runs -------------------------------------------------------------------------
    def get_run(self, shuffle_id: str, phase: str) -> ShuffleRun:
        """This worker's state of ``shuffle_id``, made on first use; a closed id raises."""
        with self._lock:
            closed = self.closed.get(shuffle_id)
            if closed is not None:
                reason, lost_phase, lost_worker = closed
                raise ShuffleClosedError(
                    shuffle_id, lost_phase or phase, lost_worker or self.worker.address, reason
                )
            run = self.runs.get(shuffle_id)
            if run is None:
                store = self.store
                failed = store.stats()["disk_errors"] if store is not None else 0
                run = ShuffleRun(shuffle_id, self.worker.address, failed)
                self.runs[shuffle_id] = run
            return run

    def close_run(
        self,
        shuffle_id: str,
        reason: str = "the shuffle ended",
        phase: str | None = None,
        worker: str | None = None,
        collect: bool = True,
    ) -> None:
        """Forget ``shuffle_id``: drop its shards (the store forgets them, files go), stop
        its sends, and refuse anything that still arrives for it. ``phase`` and ``worker``
        name a lost worker that ended the shuffle, for the errors raised here later.

        Unless the run ended in success (``collect=False``), a garbage collection
        follows: an exception that went through distributed's ``sync`` or an erred task
        sits in reference cycles with the frames of the tasks it passed, and those
        frames hold the inputs and shards until a collection."""
        with self._lock:
            self.closed[shuffle_id] = (reason, phase, worker)
            while len(self.closed) > _CLOSED_REMEMBERED:
                self.closed.popitem(last=False)
            run = self.runs.pop(shuffle_id, None)
        if run is None:
            return
        with run.lock:
            if run.failure is None:
                run.failure = ShuffleClosedError(
                    shuffle_id, phase or "unpack", worker or run.worker, reason
                )
            run.shards.clear()
        self._cancel_sends(run)
        if collect:
            threading.Thread(target=gc.collect, name="device-shuffle-gc", daemon=True).start()

    def fail_run(self, shuffle_id: str, phase: str, worker: str | None, reason: str) -> None:
        """The scheduler says the shuffle failed (a worker left): stop work on it here."""
        with self._lock:
            run = self.runs.get(shuffle_id)
        if run is None:
            return
        with run.lock:
            if run.failure is None:
                run.failure = ShuffleError(shuffle_id, phase, worker, reason)
        self._cancel_sends(run)

    def _cancel_sends(self, run: ShuffleRun) -> None:
        def cancel() -> None:
            for task in run.sends:
                task.cancel()
            if self._flight is not None:
                self._wake()

        self.worker.loop.add_callback(cancel)

    # --- room on the device -------------------------------------------------------------
    def check_disk(self, run: ShuffleRun, phase: str, stats: dict | None = None) -> None:
        """Raise (and fail ``run``) if the store failed to write anything to disk since
        ``run`` began: its shards are stuck in host memory, over the store's limit."""
        store = self.store
        if store is None:
            return
        stats = stats if stats is not None else store.stats()
        failed = stats["disk_errors"] - run.disk_errors
        if failed <= 0:
            return
        last = f"; the store said: {_SPILL_WARNINGS[-1]}" if _SPILL_WARNINGS else ""
        exc = ShuffleError(
            run.id, phase, self.worker.address,
            f"the disk is full: {failed} spill write(s) to {store.spill_dir} failed, so shards "
            f"could not leave host memory (memory_limit {store.memory_limit:,} bytes){last}",
        )
        with run.lock:
            if run.failure is None:
                run.failure = exc
        raise run.error()

    @contextlib.contextmanager
    def room(
        self, nbytes: int, run: ShuffleRun | None = None, phase: str = "transfer"
    ) -> Iterator[None]:
        """Reserve ``nbytes`` of the store's device limit for an allocation the store
        does not see yet, spilling least recently used data first to make it. With
        ``run``, a spill that failed to reach disk (since the run began) raises first."""
        store = self.store
        nbytes = max(int(nbytes), 0)
        if store is None or nbytes == 0:
            yield
            return
        with self._room_lock:
            stats = store.stats()
            if run is not None:
                self.check_disk(run, phase, stats)
            used = stats["device_bytes"]
            excess = used + self.reserved + nbytes - store.device_memory_limit
            if excess > 0 and used:
                store.evict(min(excess, used))
            self.reserved += nbytes
        try:
            yield
        finally:
            with self._room_lock:
                self.reserved -= nbytes

    def keep(self, run: ShuffleRun, output: int, meta: ShardMeta, table: Any) -> None:
        """Hold a shard for ``output``: registered with the store, so it can spill."""
        store = self.store
        obj = store.register_external(table) if store is not None else table
        run.add(output, meta, obj)

    def keep_local(
        self, run: ShuffleRun, source: tuple[int, int], items: list[tuple[int, Any]]
    ) -> None:
        """Shards for this worker's own outputs: compact copies, no comms."""
        for output, shard in items:
            with self.room(shard.nbytes, run):
                meta, table = copy_table(shard, source)
                self.keep(run, output, meta, table)
            del table
        self.check_disk(run, "transfer")

    # --- receiving ------------------------------------------------------------------------
    async def receive(self, shuffle_id: str, source: tuple[int, int], shards: Any) -> str:
        """RPC handler: shards of one input for this worker's outputs, as host frames."""
        try:
            run = self.get_run(shuffle_id, "transfer")
        except ShuffleClosedError:
            return "closed"
        if run.failure is not None:
            return "failed"
        try:
            await offload(self._decode_and_keep, run, tuple(source), shards)
        except Exception as exc:
            # Its frames hold the decoded (registered) shards: they must not live on with
            # the exception until a garbage collection.
            traceback.clear_frames(exc.__traceback__)
            if isinstance(exc, ShuffleClosedError):  # closed while this batch was decoded
                return "closed"
            raise  # the sender's error: a full disk here, say
        return "OK"

    def _decode_and_keep(self, run: ShuffleRun, source: tuple[int, int], batch: Any) -> None:
        from distributed.protocol import deserialize

        for output, header, frames in batch.items():
            with self.room(sum(memoryview(f).nbytes for f in frames), run):
                table = deserialize(header, frames)  # onto this process's (the worker's) device
                self.keep(run, output, describe(table, source), table)
            del table
        self.check_disk(run, "transfer")

    # --- sending (called from a task thread) ------------------------------------------------
    def send(self, run: ShuffleRun, address: str, source: tuple[int, int], batch: Any) -> None:
        """Start sending ``batch``; blocks only while this worker has too much in flight."""
        sync(self.worker.loop, self._start_send, run, address, source, batch)

    def flush(self, run: ShuffleRun) -> None:
        """Wait for every send this worker started for ``run``; raise the first failure."""
        sync(self.worker.loop, self._flush, run)

    def _wake(self) -> None:
        async def notify() -> None:
            assert self._flight is not None
            async with self._flight:
                self._flight.notify_all()

        asyncio.ensure_future(notify())

    async def _start_send(
        self, run: ShuffleRun, address: str, source: tuple[int, int], batch: Any
    ) -> None:
        if self._flight is None:
            self._flight = asyncio.Condition()
        nbytes = batch.nbytes
        async with self._flight:
            while self.in_flight and self.in_flight + nbytes > self.max_in_flight:
                run.check()
                await self._flight.wait()
            run.check()
            self.in_flight += nbytes
        task = asyncio.ensure_future(self._send(run, address, source, batch, nbytes))
        run.sends.append(task)

    async def _send(
        self, run: ShuffleRun, address: str, source: tuple[int, int], batch: Any, nbytes: int
    ) -> None:
        from distributed.protocol import to_serialize

        try:
            answer = await self.worker.rpc(address).device_shuffle_receive(
                shuffle_id=run.id, source=source, shards=to_serialize(batch)
            )
        except (OSError, distributed.comm.CommClosedError) as exc:
            raise ShuffleError(
                run.id, "transfer", address, f"sending shards to it failed: {exc!r}"
            ) from exc
        finally:
            self.in_flight -= nbytes
            async with self._flight:
                self._flight.notify_all()
        if answer != "OK":
            raise ShuffleClosedError(run.id, "transfer", address, f"the shuffle is {answer} there")

    async def _flush(self, run: ShuffleRun) -> None:
        tasks, run.sends = run.sends, []
        results = await asyncio.gather(*tasks, return_exceptions=True)
        run.check()
        # The cause first: a receiver's own failure, not a later "the shuffle is failed there".
        for r in sorted(
            (r for r in results if isinstance(r, BaseException)),
            key=lambda r: isinstance(r, (ShuffleClosedError, asyncio.CancelledError)),
        ):
            if isinstance(r, asyncio.CancelledError):
                run.check()
                raise ShuffleError(run.id, "transfer", run.worker, "a send was cancelled")
            # A copy: raised in the task's thread, the stored one would take the task's
            # frames (and its inputs) into a reference cycle with the send task.
            if isinstance(r, ShuffleError):
                raise type(r)(r.shuffle_id, r.phase, r.worker, r.reason)
            raise ShuffleError(run.id, "transfer", run.worker, f"{type(r).__name__}: {r}")


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
        _capture_spill_warnings()
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
