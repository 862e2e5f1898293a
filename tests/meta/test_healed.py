"""The shuffle machine's wait for a killed worker's restart (conformance/shuffle/machine/world.py)
is bounded by the suite, not only by distributed's own timeout: a README run sat 12 minutes in
Cluster.wait_for_workers(timeout=60). Each way it ends names itself, and the environment's
failures are EnvironmentFailures (rerun once, named in the report)."""

from __future__ import annotations

import asyncio
import threading
import time
import types

import pytest

from conformance import EnvironmentFailure
from conformance.shuffle.machine import world
from conformance.shuffle.machine.world import ClusterUnresponsive, NannyNeverRestarted, healed


class _Client:
    def __init__(self, behaviour):
        self.behaviour = behaviour
        self.calls = []

    def wait_for_workers(self, n_workers, timeout=None):
        self.calls.append((n_workers, timeout))
        self.behaviour()


def test_a_wait_that_never_returns_is_cut_by_the_suites_bound(monkeypatch):
    monkeypatch.setattr(world, "WAIT_BOUND", 0.2)
    forever = threading.Event()
    client = _Client(forever.wait)  # distributed's RPC that never answered
    start = time.monotonic()
    with pytest.raises(ClusterUnresponsive, match=r"wait_for_workers\(2, timeout=60\) did not"):
        healed(client, 2)
    assert time.monotonic() - start < 5
    assert client.calls == [(2, world.HEAL)]
    assert issubclass(ClusterUnresponsive, EnvironmentFailure)
    forever.set()


def test_distributeds_timeout_is_the_nanny_never_restarting():
    def timed_out():
        raise TimeoutError("1/2 workers")

    with pytest.raises(NannyNeverRestarted, match="never restarted") as info:
        healed(_Client(timed_out), 2)
    assert isinstance(info.value.__cause__, TimeoutError)
    assert issubclass(NannyNeverRestarted, EnvironmentFailure)


def test_any_other_error_is_raised_as_it_is_and_a_return_is_a_return():
    def broken():
        raise ValueError("not an environment failure")

    with pytest.raises(ValueError, match="not an environment failure"):
        healed(_Client(broken), 2)
    healed(_Client(lambda: None), 2)


def test_a_cut_wait_says_what_it_and_the_clients_loop_were_waiting_on(monkeypatch):
    """The hang left only an Event.wait stack once; the message now names the waiter's frames,
    each pending task on the client's loop and the in-process scheduler's workers."""
    monkeypatch.setattr(world, "WAIT_BOUND", 0.2)
    loop = asyncio.new_event_loop()
    never = threading.Event()

    async def identity_rpc_that_never_answers():
        await asyncio.Event().wait()

    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    pending = asyncio.run_coroutine_threadsafe(identity_rpc_that_never_answers(), loop)

    def scheduler_rpc():
        never.wait()

    client = _Client(scheduler_rpc)
    client.loop = types.SimpleNamespace(asyncio_loop=loop)
    worker = types.SimpleNamespace(status="running")
    client.cluster = types.SimpleNamespace(
        scheduler=types.SimpleNamespace(workers={"tcp://127.0.0.1:1": worker})
    )
    try:
        with pytest.raises(ClusterUnresponsive) as info:
            healed(client, 2)
    finally:
        never.set()
        pending.cancel()
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0.01), loop).result(5)  # let it end
        loop.call_soon_threadsafe(loop.stop)
        runner.join(5)
        loop.close()
    text = str(info.value)
    assert text.count("waiter: ") == 1 and "scheduler_rpc (test_healed.py:" in text, text
    assert "identity_rpc_that_never_answers at " in text and "1 pending" in text, text
    assert "scheduler: 1 worker(s): tcp://127.0.0.1:1 running" in text, text


def test_a_cut_wait_without_a_loop_or_scheduler_says_so(monkeypatch):
    monkeypatch.setattr(world, "WAIT_BOUND", 0.2)
    never = threading.Event()
    with pytest.raises(ClusterUnresponsive) as info:
        healed(_Client(never.wait), 2)
    never.set()
    assert "client loop: no event loop on the client" in str(info.value)
    assert "scheduler: not in this process" in str(info.value)
