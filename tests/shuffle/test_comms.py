"""Bytes in flight come back whatever ends a send (``shuffle/comms.py``, ``shuffle/run.py``).

Found by mutation testing (a survivor in what is now ``ShuffleRun.cancel``): a send cancelled before its
task's first step never ran the coroutine's ``finally``, so its bytes stayed in flight for
good and later sends of the worker could wait for room that never came back. The event
loop is driven here by hand, so the interleaving (the run fails between the send's start
and its first step) is forced, not hoped for.
"""

from __future__ import annotations

import asyncio

import pytest

from reference_impl.shuffle.comms import Transport
from reference_impl.shuffle.errors import ShuffleError
from reference_impl.shuffle.limiter import DeviceRoom, HostBudget
from reference_impl.shuffle.run import RunContext, ShuffleRun


def _run(shuffle_id: str, transport: Transport) -> ShuffleRun:
    """A run with the worker-wide parts it needs to send (no store, no device)."""
    context = RunContext(
        worker="w",
        transport=transport,
        room=DeviceRoom(lambda: None),
        budget=HostBudget(lambda: None),
        device=lambda: None,
        device_limit=lambda: None,
        directory=lambda name: f"/nonexistent/{name}",
    )
    return ShuffleRun(shuffle_id, 1, context)


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
        comms = Transport(worker, lambda: 1500)
        run = _run("s", comms)
        await run._start_send("peer", (0, 0), _Batch())
        assert comms.in_flight == 1000
        run.fail(ShuffleError("s", "transfer", "peer", "it left"))
        run.cancel()  # before the send's first step
        for _ in range(5):
            await asyncio.sleep(0)
        assert worker.calls == 0, "the interleaving was not forced: the send started"
        assert comms.in_flight == 0

    asyncio.run(main())


def test_a_send_cancelled_in_flight_gives_its_bytes_back_and_wakes_a_waiting_sender():
    async def main():
        worker = _Worker(asyncio.get_running_loop())
        comms = Transport(worker, lambda: 1500)
        first, second = _run("a", comms), _run("b", comms)
        await first._start_send("peer", (0, 0), _Batch())
        await asyncio.sleep(0)
        assert worker.calls == 1  # in flight
        waiting = asyncio.ensure_future(second._start_send("peer", (0, 0), _Batch()))
        await asyncio.sleep(0)
        assert not waiting.done()  # 1000 + 1000 > 1500: it waits for room
        first.fail(ShuffleError("a", "transfer", "peer", "it left"))
        first.cancel()
        await asyncio.wait_for(waiting, 5)  # room came back: the second run's send starts
        assert comms.in_flight == 1000
        with pytest.raises(ShuffleError, match="it left"):
            await first._flush()

    asyncio.run(main())


# --------------------------------------------------- a failed connection is tried again
class _FlakyWorker:
    """An rpc whose first ``failures`` calls fail to connect, then answer ``answer``."""

    def __init__(self, failures: int, answer: str = "OK") -> None:
        self.failures, self.answer, self.calls = failures, answer, 0

    def rpc(self, address: str):
        worker = self

        class _Remote:
            async def device_shuffle_receive(self, **kwargs):
                worker.calls += 1
                if worker.calls <= worker.failures:
                    raise OSError(f"connect to {address} failed (attempt {worker.calls})")
                return worker.answer

        return _Remote()


def _send_with(worker, run=None, **config):
    import dask

    transport = Transport(worker, lambda: 1500)
    run = run or _run("s", transport)
    message = {"shuffle_id": run.id, "run_id": run.run_id, "source": (0, 0)}
    settings = {f"reference-impl.shuffle.send-retry.{k}": v for k, v in config.items()}
    with dask.config.set({"reference-impl.shuffle.send-retry.delay.min": "1ms", **settings}):
        asyncio.run(transport._send(run.check, "tcp://peer:1", message, _Batch()))


def test_a_failed_connect_is_tried_again_and_the_send_succeeds():
    worker = _FlakyWorker(failures=2)
    _send_with(worker, count=2)
    assert worker.calls == 3


def test_a_peer_that_stays_unreachable_is_lost_after_the_retries():
    from reference_impl.shuffle.errors import PeerLost

    worker = _FlakyWorker(failures=10)
    with pytest.raises(PeerLost, match=r"sending shards to it failed \(3 tries\): OSError"):
        _send_with(worker, count=2)
    assert worker.calls == 3
    no_retry = _FlakyWorker(failures=1)
    with pytest.raises(PeerLost, match=r"sending shards to it failed: OSError"):
        _send_with(no_retry, count=0)
    assert no_retry.calls == 1


def test_a_run_that_failed_between_tries_sends_nothing_more():
    worker = _FlakyWorker(failures=1)
    run = _run("s", Transport(worker, lambda: 1500))

    class _FailsTheRun(_FlakyWorker):
        def rpc(self, address):
            run.fail(ShuffleError("s", "transfer", "peer", "it left"))  # before the retry
            return worker.rpc(address)

    with pytest.raises(ShuffleError, match="it left"):
        _send_with(_FailsTheRun(0), run=run, count=3)
    assert worker.calls == 1


@pytest.mark.parametrize(
    ("key", "value", "error"),
    [
        ("count", -1, r"^reference-impl\.shuffle\.send-retry\.count must be an int >= 0, got -1$"),
        ("count", True, r"^reference-impl\.shuffle\.send-retry\.count must be an int >= 0, got True$"),
        ("delay.max", "0s", r"^reference-impl\.shuffle\.send-retry\.delay\.min \(0\.001 s\) must be"),
    ],
)
def test_bad_retry_settings_name_the_key(key, value, error):
    import dask

    from reference_impl.shuffle.comms import send_retries

    settings = {
        "reference-impl.shuffle.send-retry.delay.min": "1ms",
        f"reference-impl.shuffle.send-retry.{key}": value,
    }
    with dask.config.set(settings), pytest.raises(ValueError, match=error):
        send_retries()
