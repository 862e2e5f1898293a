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
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import dask.config
import distributed
from distributed.diagnostics.plugin import WorkerPlugin
from distributed.utils import offload, sync

from reference_impl.device import get_device, parse_bytes
from reference_impl.store import ProxifyHostFile

from .errors import ShuffleClosedError, ShuffleError
from .shards import ShardMeta, copy_table, describe

EXTENSION = "device_shuffle"
RECEIVE_OP = "device_shuffle_receive"
CLOSE_OP = "device_shuffle_close"
FAIL_OP = "device_shuffle_fail"
MAX_IN_FLIGHT = "64 MiB"  # per worker; config key reference-impl.shuffle.max-in-flight
_CLOSED_REMEMBERED = 10_000


class ShuffleRun:
    """One shuffle's state on one worker: shards by output, then by input index."""

    def __init__(self, shuffle_id: str, worker: str) -> None:
        self.id = shuffle_id
        self.worker = worker
        self.lock = threading.Lock()
        self.shards: dict[int, dict[tuple[int, int], tuple[ShardMeta, Any]]] = {}
        self.unpacked: set[int] = set()
        self.failure: ShuffleError | None = None
        self.sends: list[asyncio.Task] = []

    def check(self) -> None:
        if self.failure is not None:
            raise self.failure

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
                run = self.runs[shuffle_id] = ShuffleRun(shuffle_id, self.worker.address)
            return run

    def close_run(
        self,
        shuffle_id: str,
        reason: str = "the shuffle ended",
        phase: str | None = None,
        worker: str | None = None,
    ) -> None:
        """Forget ``shuffle_id``: drop its shards (the store forgets them, files go), stop
        its sends, and refuse anything that still arrives for it. ``phase`` and ``worker``
        name a lost worker that ended the shuffle, for the errors raised here later."""
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
    @contextlib.contextmanager
    def room(self, nbytes: int) -> Iterator[None]:
        """Reserve ``nbytes`` of the store's device limit for an allocation the store
        does not see yet, spilling least recently used data first to make it."""
        store = self.store
        nbytes = max(int(nbytes), 0)
        if store is None or nbytes == 0:
            yield
            return
        with self._room_lock:
            used = store.stats()["device_bytes"]
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
            with self.room(shard.nbytes):
                meta, table = copy_table(shard, source)
                self.keep(run, output, meta, table)
            del table

    # --- receiving ------------------------------------------------------------------------
    async def receive(self, shuffle_id: str, source: tuple[int, int], shards: Any) -> str:
        """RPC handler: shards of one input for this worker's outputs, as host frames."""
        try:
            run = self.get_run(shuffle_id, "transfer")
        except ShuffleClosedError:
            return "closed"
        if run.failure is not None:
            return "failed"
        await offload(self._decode_and_keep, run, tuple(source), shards)
        return "OK"

    def _decode_and_keep(self, run: ShuffleRun, source: tuple[int, int], batch: Any) -> None:
        from distributed.protocol import deserialize

        for output, header, frames in batch.items():
            with self.room(sum(memoryview(f).nbytes for f in frames)):
                table = deserialize(header, frames)  # onto this process's (the worker's) device
                self.keep(run, output, describe(table, source), table)
            del table

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
        for r in results:
            if isinstance(r, asyncio.CancelledError):
                run.check()
                raise ShuffleError(run.id, "transfer", run.worker, "a send was cancelled")
            if isinstance(r, BaseException):
                raise r


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
