"""Bytes in flight come back whatever ends a send (``shuffle/comms.py``).

Found by mutation testing (a survivor in ``Comms.cancel``): a send cancelled before its
task's first step never ran the coroutine's ``finally``, so its bytes stayed in flight for
good and later sends of the worker could wait for room that never came back. The event
loop is driven here by hand, so the interleaving (the run fails between the send's start
and its first step) is forced, not hoped for.
"""

from __future__ import annotations

import asyncio

import pytest

from reference_impl.shuffle.comms import Comms
from reference_impl.shuffle.errors import ShuffleError
from reference_impl.shuffle.run import ShuffleRun


class _Batch:
    nbytes = 1000


class _Worker:
    """What Comms asks of a worker: a loop for callbacks, an rpc that never answers."""

    def __init__(self, loop: asyncio.AbstractEventLoop, at_once: bool = False) -> None:
        self.loop = _Loop(loop, at_once)
        self.calls = 0

    def rpc(self, address: str):
        worker = self

        class _Remote:
            async def device_shuffle_receive(self, **kwargs):
                worker.calls += 1
                await asyncio.Event().wait()  # a receiver that is slow: the send is in flight

        return _Remote()


class _Loop:
    """``add_callback`` queues (as tornado does) or, ``at_once``, runs the callback now: the
    order in which a callback from another thread lands ahead of a new task's first step."""

    def __init__(self, loop: asyncio.AbstractEventLoop, at_once: bool) -> None:
        self._loop, self._at_once = loop, at_once

    def add_callback(self, fn) -> None:
        fn() if self._at_once else self._loop.call_soon(fn)


def test_a_send_cancelled_before_it_starts_gives_its_bytes_back():
    async def main():
        worker = _Worker(asyncio.get_running_loop(), at_once=True)
        comms = Comms(worker, lambda: 1500)
        run = ShuffleRun("s", 1, "w", buffers=None)
        await comms._start_send(run, "peer", (0, 0), _Batch())
        assert comms.in_flight == 1000
        run.fail(ShuffleError("s", "transfer", "peer", "it left"))
        comms.cancel(run)  # before the send's first step
        for _ in range(5):
            await asyncio.sleep(0)
        assert worker.calls == 0, "the interleaving was not forced: the send started"
        assert comms.in_flight == 0

    asyncio.run(main())


def test_a_send_cancelled_in_flight_gives_its_bytes_back_and_wakes_a_waiting_sender():
    async def main():
        worker = _Worker(asyncio.get_running_loop())
        comms = Comms(worker, lambda: 1500)
        first, second = ShuffleRun("a", 1, "w", buffers=None), ShuffleRun("b", 1, "w", buffers=None)
        await comms._start_send(first, "peer", (0, 0), _Batch())
        await asyncio.sleep(0)
        assert worker.calls == 1  # in flight
        waiting = asyncio.ensure_future(comms._start_send(second, "peer", (0, 0), _Batch()))
        await asyncio.sleep(0)
        assert not waiting.done()  # 1000 + 1000 > 1500: it waits for room
        first.fail(ShuffleError("a", "transfer", "peer", "it left"))
        comms.cancel(first)
        await asyncio.wait_for(waiting, 5)  # room came back: the second run's send starts
        assert comms.in_flight == 1000
        with pytest.raises(ShuffleError, match="it left"):
            await comms._flush(first)

    asyncio.run(main())
