"""One shuffle's run on one worker, owned by one object (as distributed's ``ShuffleRun``).

A :class:`ShuffleRun` holds everything of one attempt at a shuffle on its worker, and is
the only thing that changes it: the shards received for this worker's outputs (one buffer
and one file per output, :mod:`.buffers`), the sends it has in flight, the outputs it has
unpacked, and its first failure. Its methods are the phases' work:

- :meth:`add_input` partitions a local input a chunk at a time, keeps this worker's
  shards and sends the others; :meth:`receive` keeps a batch another worker sent;
- :meth:`barrier` waits until every shard it sent is held by its receiver
  (:meth:`flush`), and :meth:`cancel` stops its sends;
- :meth:`get_output` builds one output from its shards;
- :meth:`close` drops every shard and file.

What is worker-wide (the run map, closed-run records, device room, host budget, the
transport) stays with the extension (:mod:`.plugin`), which hands each run its
:class:`RunContext`. The task functions (:mod:`.transfer`, :mod:`.barrier`,
:mod:`.unpack`) only find the run and call it.
"""

from __future__ import annotations

import asyncio
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from distributed.utils import sync

from reference_impl.store.proxy import unwrap
from reference_impl.table import Table
from reference_impl.table.partition import partition_by_destination, partition_grouped

from .buffers import OutputBuffer, RunBuffers
from .comms import HostShards, Transport
from .errors import RunSuperseded, ShuffleClosedError, ShuffleError
from .limiter import DeviceRoom, HostBudget
from .packed import build, empty_table, latest, output_nbytes, pack_grouped
from .spec import RunSpec

ROW_OVERHEAD = 8  # bytes a row the partition kernels add (int32 ids, scan scratch)
CHUNK_BYTES = 64 * 2**20


@dataclass(frozen=True)
class RunContext:
    """What a run uses of its worker, shared by every run there (the extension's)."""

    worker: str  # the worker's address
    transport: Transport
    room: DeviceRoom  # device bytes reserved against the store's limit
    budget: HostBudget  # host bytes of received shards, over every run
    device: Callable[[], Any]
    device_limit: Callable[[], int | None]  # the store's device limit (None: no store)
    directory: Callable[[str], str]  # where a run's shard files go, by its name
    write_failed: Callable[[int], None] = lambda n: None  # counts failed writes, worker-wide


def chunk_rows(table: Table, limit: int | None) -> int:
    """Rows partitioned at once: the partitioned copy of a whole input next to the input
    itself could not fit a device limit of twice the input, so inputs go in chunks of
    at most a quarter of the limit (and at most CHUNK_BYTES)."""
    target = CHUNK_BYTES if limit is None else max(min(CHUNK_BYTES, limit // 4), 1)
    row_bytes = max(table.nbytes // max(table.num_rows, 1), 1)
    return max(target // row_bytes, 1)


class ShuffleRun:
    """What one worker holds of one run of one shuffle, from its first shard to its close."""

    def __init__(self, shuffle_id: str, run_id: int, context: RunContext) -> None:
        self.id = shuffle_id
        self.run_id = run_id
        self.worker = context.worker
        self._ctx = context
        directory = context.directory(f"{shuffle_id}-run{run_id}")
        self._buffers = RunBuffers(shuffle_id, context.worker, directory, context.budget)
        self._lock = threading.Lock()
        self._unpacked: set[int] = set()
        self._failure: ShuffleError | None = None
        self._sends: list[asyncio.Task] = []  # touched on the event loop only
        self._closed = threading.Event()  # set once the worker dropped the run

    # --- state, read-only outside ---------------------------------------------------------
    @property
    def failure(self) -> ShuffleError | None:
        return self._failure

    @property
    def write_errors(self) -> int:
        """Failed writes of shards to their files (a full disk)."""
        return self._buffers.write_errors

    @property
    def directory(self) -> str:
        return self._buffers.directory

    def n_shards(self) -> int:
        return self._buffers.n_shards()

    def output_buffers(self) -> dict[int, OutputBuffer]:
        """A snapshot of the outputs' buffers (for inspection; the run keeps the originals)."""
        return dict(self._buffers.outputs)

    def check(self) -> None:
        if self._failure is not None:
            raise self._failure.copy()

    def superseded(self, wait: float = 0.0) -> bool:
        """Whether a newer run replaced this one, waiting up to ``wait`` seconds for the
        coordinator's word (a send to a worker that died fails before that word comes)."""
        self._closed.wait(wait)
        return isinstance(self._failure, RunSuperseded)

    def unpacked_all(self, spec: RunSpec) -> bool:
        """Whether every output this run builds on this worker was unpacked."""
        with self._lock:
            return set(spec.outputs_on(self.worker)) <= self._unpacked

    # --- failing and closing ---------------------------------------------------------------
    def fail(self, exc: ShuffleError) -> bool:
        """Record the run's first failure; False if it had one already."""
        with self._lock:
            if self._failure is not None:
                return False
            self._failure = exc
            return True

    def fail_with(self, exc: Exception, phase: str = "transfer") -> ShuffleError:
        """``exc`` as the ShuffleError a task returns or raises, without a traceback; the
        run fails with it and its sends stop, so the other workers' sends stop at once."""
        if isinstance(exc, ShuffleError):
            error = exc.copy()
        else:
            error = ShuffleError(self.id, phase, self.worker, f"{type(exc).__name__}: {exc}")
        # A failure learnt from another worker ("the shuffle is failed there") stays one for
        # this worker's later tasks, so that the barrier raises the cause before it (14.26).
        cls = ShuffleClosedError if isinstance(error, ShuffleClosedError) else ShuffleError
        self.fail(cls(self.id, error.phase, error.worker, f"the {phase} failed: {error.reason}"))
        self.cancel()
        return error

    def close(self, exc: ShuffleError) -> None:
        """Fail the run (if it had not), stop its sends, drop every shard and file."""
        self.fail(exc)
        self.cancel()
        self._buffers.clear()
        self._closed.set()

    # --- the transfer phase ------------------------------------------------------------------
    def add_input(self, spec: RunSpec, index: int, value: Any) -> list[int]:
        """Partition input ``index`` (a Table, its proxy, or a host Arrow table), a chunk
        at a time, keep this worker's shards and send the others; rows per output."""
        self.check()
        # a proxy answers for its Table, unspilling nothing; Arrow in host memory (dask's
        # pandas partitions, frames.to_transfer_input) goes to the device a chunk at a time
        if not isinstance(value, (Table, pa.Table)):
            raise ShuffleError(self.id, "transfer", self.worker, f"input {index} is a {type(value).__name__}")
        rows = [0] * spec.npartitions
        step = chunk_rows(value, self._ctx.device_limit())
        # Read back only per chunk, so the store can really spill the input meanwhile.
        for chunk, start in enumerate(range(0, value.num_rows, step)):
            self._add_chunk(spec, (index, chunk), value, start, start + step, rows)
        return rows

    def _add_chunk(
        self, spec: RunSpec, source: tuple[int, int], value: Any, start: int, stop: int, rows: list[int]
    ) -> None:
        """Partition rows ``start:stop`` of the input, pack the partitions to host (then let
        go of the input and the partitions), keep or send the shards. Room is made for the
        partitioned copy; the input itself is the store's (read back if it spilled), or, for a
        host input, the chunk's copy on the device is made room for too."""
        npartitions, placement, wanted = spec.npartitions, spec.placement, spec.wanted
        me = self.worker
        total = value.num_rows  # from the proxy's metadata: no unspill yet
        stop = min(stop, total)
        nbytes = value.nbytes * (stop - start) // max(total, 1)
        # the partitioned copy, the kernels' row ids and per-partition counts
        host = isinstance(value, pa.Table)
        with self._ctx.room((1 + host) * nbytes + ROW_OVERHEAD * (stop - start) + 16 * npartitions):
            if host:
                table = rows_in = Table.from_arrow(value.slice(start, stop - start), self._ctx.device())
            else:
                table = unwrap(value)
                rows_in = table.slice(start, stop)
            if spec.shuffle.destination:
                grouped, offsets = partition_by_destination(rows_in, spec.on[0], npartitions, keep=False)
            else:
                grouped, offsets = partition_grouped(rows_in, list(spec.on), npartitions)
            del table, rows_in
            # one d2h copy per buffer; the device copies go before anything is sent
            packed = pack_grouped(grouped, offsets, source)
            del grouped
        by_dest: dict[str, list[tuple[int, list[int], list[Any]]]] = {}
        for output, row, frames in packed:
            if output not in wanted:  # still in memory from an earlier run
                continue
            rows[output] += row[2]
            by_dest.setdefault(placement[output], []).append((output, row, frames))
        del packed
        # Another worker's first: its shards go on their way while this worker keeps its own.
        for address in sorted(by_dest, key=lambda a: (a == me, a)):
            items = by_dest.pop(address)
            if address == me:
                for output, row, frames in items:
                    self._keep(output, row, frames)
            else:
                self._send(address, source, HostShards.from_packed(items))
            del items

    def receive(self, batch: HostShards) -> None:
        """Keep a batch of shards another worker sent for this worker's outputs (in a
        thread: a full buffer is written to its file here)."""
        for output, row, frames in batch.items():
            self._keep(output, row, frames)

    def _keep(self, output: int, row: list[int], frames: list) -> None:
        """Keep one shard of ``output`` (one sent again replaces its first copy at unpack)."""
        with self._lock:
            self.check()
            if output in self._unpacked:
                raise ShuffleError(
                    self.id, "transfer", self.worker,
                    f"a shard of output {output} arrived after that output was unpacked",
                )  # fmt: skip
        before = self._buffers.write_errors
        try:
            self._buffers.append(output, row, frames)
        except ShuffleError as exc:
            self.fail(exc.copy())
            raise
        finally:
            if self._buffers.write_errors != before:
                self._ctx.write_failed(self._buffers.write_errors - before)

    # --- sends ---------------------------------------------------------------------------------
    def _send(self, address: str, source: tuple[int, int], batch: HostShards) -> None:
        """Start sending ``batch`` (from a task's thread); blocks only while this worker has
        too much in flight."""
        sync(self._ctx.transport.loop, self._start_send, address, source, batch)

    async def _start_send(self, address: str, source: tuple[int, int], batch: HostShards) -> None:
        message = {"shuffle_id": self.id, "run_id": self.run_id, "source": source}
        self._sends.append(await self._ctx.transport.start(self.check, address, message, batch))

    def flush(self) -> None:
        """Wait for every send this worker started for the run; raise the first failure."""
        sync(self._ctx.transport.loop, self._flush)

    def barrier(self) -> None:
        """This worker's inputs are all in: every shard it sent is held by its receiver
        (a receiver acknowledges only after the shards are in its buffers)."""
        self.flush()
        self.check()

    def cancel(self) -> None:
        """Stop the run's sends (from any thread) and wake senders waiting for room (they
        see the run's failure)."""
        transport = self._ctx.transport

        def cancel() -> None:
            for task in self._sends:
                task.cancel()
            transport.wake()

        transport.loop.add_callback(cancel)

    async def _flush(self) -> None:
        tasks, self._sends = self._sends, []
        results = await asyncio.gather(*tasks, return_exceptions=True)
        self.check()
        # The cause first: a receiver's own failure, not a later "the shuffle is failed there".
        for r in sorted(
            (r for r in results if isinstance(r, BaseException)),
            key=lambda r: isinstance(r, (ShuffleClosedError, asyncio.CancelledError)),
        ):
            if isinstance(r, asyncio.CancelledError):
                self.check()
                raise ShuffleError(self.id, "transfer", self.worker, "a send was cancelled")
            # A copy: raised in the task's thread, the stored one would take the task's
            # frames (and its inputs) into a reference cycle with the send task.
            if isinstance(r, ShuffleError):
                raise r.copy()
            raise ShuffleError(self.id, "transfer", self.worker, f"{type(r).__name__}: {r}")

    # --- the unpack phase -------------------------------------------------------------------
    def get_output(self, spec: RunSpec, output: int) -> Table:
        """Output ``output`` as one Table on this worker's device, from its shards.

        The output's buffer leaves the run (it is no longer held here); its rows are
        checked against the barrier's count, the output is staged once at its exact size
        from the index alone, the packed shards are copied in at the rows their input order
        gives them, one file chunk at a time (each checked before it is used). Raises
        RunSuperseded when a newer run replaced this one meanwhile (its files are gone)."""
        assert spec.rows is not None, "unpack runs on the barrier's spec"
        with self._lock:
            self.check()
            self._unpacked.add(output)
        buf = self._buffers.take(output)
        try:
            index = buf.rows() if buf is not None else np.zeros((0, 1), np.int64)
            counted = index[latest(index)]
            got = int(counted[:, 2].sum()) if len(counted) else 0
            if got != spec.rows[output]:
                raise ShuffleError(
                    self.id, "unpack", self.worker,
                    f"output {output} received {got} rows from {len(counted)} shards, "
                    f"expected {spec.rows[output]}",
                )  # fmt: skip
            if buf is None:
                return empty_table(spec.schema, self._ctx.device())
            with self._ctx.room(output_nbytes(spec.schema, counted)):
                table = build(spec.schema, index, self._buffers.read(output, buf), self._ctx.device())
        except Exception as exc:
            buf = None  # the shards go now, not with the erred task's traceback
            traceback.clear_frames(exc.__traceback__)
            error = exc
        else:
            return table
        finally:
            self._buffers.remove(output)
        if self.superseded():  # replaced while this output was built: its files are gone
            raise RunSuperseded(self.id, "unpack", self.worker, f"run {self.run_id} was replaced during unpack")
        if isinstance(error, ShuffleError):
            raise error
        raise ShuffleError(self.id, "unpack", self.worker, f"output {output}: {type(error).__name__}: {error}") from error
