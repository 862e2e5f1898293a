"""Sending shards: bytes in flight per worker, the sends of a run, their flush and cancel.

A transfer task (a worker thread) hands a batch to :meth:`Comms.send`, which returns as
soon as the batch is on its way; it blocks only while this worker already has
``max_in_flight()`` bytes out (one batch may exceed it alone). The sends run on the
worker's event loop, one RPC per batch (``device_shuffle_receive``), while the task
partitions its next chunk; a connection that fails is tried again (:func:`send_retries`). ``flush`` waits for all of a run's sends and raises the first
cause of failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import dask.config
import distributed
from distributed.utils import sync
from distributed.utils_comm import retry

from .errors import PeerLost, RunSuperseded, ShuffleClosedError, ShuffleError
from .run import ShuffleRun

RECEIVE_OP = "device_shuffle_receive"
# A failed connect or a dropped connection is tried again, as P2P does
# (distributed.p2p.comm.retry.*), before the peer counts as lost. Sending a batch twice is
# harmless: the unpack keeps the last copy of each (input, chunk) (``packed.latest``).
SEND_RETRIES = 3  # config reference-impl.shuffle.send-retry.count
SEND_DELAY = ("100ms", "2s")  # config reference-impl.shuffle.send-retry.delay.min / .max


def send_retries() -> tuple[int, float, float]:
    """``(count, delay_min, delay_max)`` in seconds, from the config (checked: a typo fails
    the send with the key named, never retries forever)."""
    from dask.utils import parse_timedelta

    key = "reference-impl.shuffle.send-retry"
    count = dask.config.get(f"{key}.count", SEND_RETRIES)
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise ValueError(f"{key}.count must be an int >= 0, got {count!r}")
    lo = parse_timedelta(dask.config.get(f"{key}.delay.min", SEND_DELAY[0]), default="s")
    hi = parse_timedelta(dask.config.get(f"{key}.delay.max", SEND_DELAY[1]), default="s")
    if not 0 <= lo <= hi:
        raise ValueError(f"{key}.delay.min ({lo} s) must be >= 0 and <= delay.max ({hi} s)")
    return count, lo, hi


class Comms:
    """One worker's outgoing shards, over all runs."""

    def __init__(self, worker: distributed.Worker, max_in_flight: Callable[[], int]) -> None:
        self.worker = worker
        self.max_in_flight = max_in_flight  # asked per send: the store's limits may change
        self.in_flight = 0
        self._flight: asyncio.Condition | None = None

    # --- called from a task thread ----------------------------------------------------
    def send(self, run: ShuffleRun, address: str, source: tuple[int, int], batch: Any) -> None:
        """Start sending ``batch``; blocks only while this worker has too much in flight."""
        sync(self.worker.loop, self._start_send, run, address, source, batch)

    def flush(self, run: ShuffleRun) -> None:
        """Wait for every send this worker started for ``run``; raise the first failure."""
        sync(self.worker.loop, self._flush, run)

    # --- from anywhere ------------------------------------------------------------------
    def cancel(self, run: ShuffleRun) -> None:
        """Stop ``run``'s sends and wake senders waiting for room (they see its failure)."""

        def cancel() -> None:
            for task in run.sends:
                task.cancel()
            if self._flight is not None:  # this run's senders waiting behind another run's
                asyncio.ensure_future(self._notify())  # sends see the failure at once

        self.worker.loop.add_callback(cancel)

    # --- on the event loop ----------------------------------------------------------------
    async def _notify(self) -> None:
        assert self._flight is not None
        async with self._flight:
            self._flight.notify_all()

    async def _start_send(
        self, run: ShuffleRun, address: str, source: tuple[int, int], batch: Any
    ) -> None:
        if self._flight is None:
            self._flight = asyncio.Condition()
        nbytes = batch.nbytes
        limit = self.max_in_flight()
        async with self._flight:
            while self.in_flight and self.in_flight + nbytes > limit:
                run.check()
                await self._flight.wait()
            run.check()
            self.in_flight += nbytes
        task = asyncio.ensure_future(self._send(run, address, source, batch))
        # Released when the task ends, not in the coroutine's ``finally``: a task cancelled
        # before its first step never runs its body, and its bytes would stay in flight
        # for good, stalling every later send of this worker.
        task.add_done_callback(lambda _: self._landed(nbytes))
        run.sends.append(task)

    def _landed(self, nbytes: int) -> None:
        self.in_flight -= nbytes
        asyncio.ensure_future(self._notify())

    async def _send(self, run: ShuffleRun, address: str, source: tuple[int, int], batch: Any) -> None:
        from distributed.protocol import to_serialize

        async def attempt() -> str:
            run.check()  # a run that failed meanwhile sends nothing more
            return await getattr(self.worker.rpc(address), RECEIVE_OP)(
                shuffle_id=run.id, run_id=run.run_id, source=source, shards=to_serialize(batch)
            )

        count, delay_min, delay_max = send_retries()
        try:
            answer = await retry(
                attempt,
                count=count,
                delay_min=delay_min,
                delay_max=delay_max,
                retry_on_exceptions=(OSError, distributed.comm.CommClosedError),
                operation=f"sending shards of shuffle {run.id} to {address}",
            )
        except (OSError, distributed.comm.CommClosedError) as exc:
            tries = f" ({count + 1} tries)" if count else ""
            raise PeerLost(
                run.id, "transfer", address, f"sending shards to it failed{tries}: {exc!r}"
            ) from exc
        if answer == "superseded":
            raise RunSuperseded(run.id, "transfer", address, f"run {run.run_id} was replaced there")
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
                raise r.copy()
            raise ShuffleError(run.id, "transfer", run.worker, f"{type(r).__name__}: {r}")
