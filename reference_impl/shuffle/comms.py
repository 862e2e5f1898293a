"""Sending shards: what crosses the comms (:class:`HostShards`) and one worker's
:class:`Transport`, shared by its runs.

A run (:class:`~.run.ShuffleRun`) starts a send on the worker's event loop with
:meth:`Transport.start`, which returns as soon as the batch is on its way; it waits only
while this worker already has ``max_in_flight()`` bytes out (one batch may exceed it
alone). Each batch is one RPC (``device_shuffle_receive``); a connection that fails is
tried again (:func:`send_retries`). The run keeps the send's task, and flushes or cancels
its own sends: the transport holds no run's state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import dask.config
import distributed
from distributed.protocol.serialize import dask_deserialize, dask_serialize
from distributed.utils_comm import retry

from reference_impl.device.common import once

from .errors import PeerLost, RunSuperseded, ShuffleClosedError

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


class HostShards:
    """Packed shards of one input chunk for one destination worker: index rows and frames."""

    __slots__ = ("outputs", "rows", "frames")

    def __init__(self, outputs: list[int], rows: list[list[int]], frames: list[list[Any]]) -> None:
        self.outputs, self.rows, self.frames = outputs, rows, frames

    @classmethod
    def from_packed(cls, items: list[tuple[int, list[int], list[Any]]]) -> HostShards:
        return cls([o for o, _, _ in items], [r for _, r, _ in items], [f for _, _, f in items])

    @property
    def nbytes(self) -> int:
        return sum(memoryview(f).nbytes for fr in self.frames for f in fr)

    def items(self) -> Iterator[tuple[int, list[int], list[Any]]]:
        yield from zip(self.outputs, self.rows, self.frames, strict=True)


def _serialize_shards(batch: HostShards) -> tuple[dict, list[Any]]:
    header = {"outputs": batch.outputs, "rows": batch.rows, "counts": [len(fr) for fr in batch.frames]}
    return header, [f for fr in batch.frames for f in fr]


def _deserialize_shards(header: dict, frames: list[Any]) -> HostShards:
    out, at = [], 0
    for n in header["counts"]:
        out.append(list(frames[at : at + n]))
        at += n
    return HostShards(list(header["outputs"]), [list(r) for r in header["rows"]], out)


@once
def register_dask_serializers() -> None:
    """Called by ``reference_impl.register()``: HostShards cross the comms as their frames."""
    dask_serialize.register(HostShards)(_serialize_shards)
    dask_deserialize.register(HostShards)(_deserialize_shards)


class Transport:
    """One worker's outgoing shards, over all runs: the RPC, its retries, the bytes in flight."""

    def __init__(self, worker: distributed.Worker, max_in_flight: Callable[[], int]) -> None:
        self.worker = worker
        self.max_in_flight = max_in_flight  # asked per send: the store's limits may change
        self.in_flight = 0
        self._flight: asyncio.Condition | None = None

    @property
    def loop(self) -> Any:
        return self.worker.loop

    def wake(self) -> None:
        """On the event loop: senders waiting for room look again (a run of theirs failed)."""
        if self._flight is not None:
            asyncio.ensure_future(self._notify())

    async def _notify(self) -> None:
        assert self._flight is not None
        async with self._flight:
            self._flight.notify_all()

    async def start(
        self, check: Callable[[], None], address: str, message: dict, batch: Any
    ) -> asyncio.Task:
        """Wait for room (``check`` raising ends the wait), then send ``batch`` with
        ``message`` (shuffle_id, run_id, source) to ``address``; the send's task."""
        if self._flight is None:
            self._flight = asyncio.Condition()
        nbytes = batch.nbytes
        limit = self.max_in_flight()
        async with self._flight:
            while self.in_flight and self.in_flight + nbytes > limit:
                check()
                await self._flight.wait()
            check()
            self.in_flight += nbytes
        task = asyncio.ensure_future(self._send(check, address, message, batch))
        # Released when the task ends, not in the coroutine's ``finally``: a task cancelled
        # before its first step never runs its body, and its bytes would stay in flight
        # for good, stalling every later send of this worker.
        task.add_done_callback(lambda _: self._landed(nbytes))
        return task

    def _landed(self, nbytes: int) -> None:
        self.in_flight -= nbytes
        asyncio.ensure_future(self._notify())

    async def _send(self, check: Callable[[], None], address: str, message: dict, batch: Any) -> None:
        from distributed.protocol import to_serialize

        shuffle_id, run_id = message["shuffle_id"], message["run_id"]

        async def attempt() -> str:
            check()  # a run that failed meanwhile sends nothing more
            return await getattr(self.worker.rpc(address), RECEIVE_OP)(**message, shards=to_serialize(batch))

        count, delay_min, delay_max = send_retries()
        try:
            answer = await retry(
                attempt,
                count=count,
                delay_min=delay_min,
                delay_max=delay_max,
                retry_on_exceptions=(OSError, distributed.comm.CommClosedError),
                operation=f"sending shards of shuffle {shuffle_id} to {address}",
            )
        except (OSError, distributed.comm.CommClosedError) as exc:
            tries = f" ({count + 1} tries)" if count else ""
            raise PeerLost(
                shuffle_id, "transfer", address, f"sending shards to it failed{tries}: {exc!r}"
            ) from exc
        if answer == "superseded":
            raise RunSuperseded(shuffle_id, "transfer", address, f"run {run_id} was replaced there")
        if answer != "OK":
            raise ShuffleClosedError(shuffle_id, "transfer", address, f"the shuffle is {answer} there")
