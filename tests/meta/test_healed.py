"""The shuffle machine's wait for a killed worker's restart (conformance/shuffle/machine/world.py)
asks the scheduler itself, with a deadline, until the killed worker is gone and the count is back.
A README run sat 12 minutes in distributed's Cluster.wait_for_workers(timeout=60); a count alone
once called a cluster healed while the scheduler still listed the dead worker, and every later
load of the machine waited a minute for a worker that never came. Each way the wait ends names
itself, and the environment's failures are EnvironmentFailures (rerun once, named in the
report)."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import types

import pytest

from conformance import EnvironmentFailure
from conformance.shuffle import workers
from conformance.shuffle.machine import world
from conformance.shuffle.machine.world import ClusterUnresponsive, NannyNeverRestarted, healed

DEAD, ALIVE, NEW = "tcp://127.0.0.1:1", "tcp://127.0.0.1:2", "tcp://127.0.0.1:3"


@pytest.fixture
def scheduler(monkeypatch):
    """``scheduler(*answers)``: the identity calls answer these worker lists in turn (the last
    one again and again); an answer that is an exception is raised, a callable is called."""
    calls = []

    def install(*answers):
        seq = itertools.chain(answers, itertools.repeat(answers[-1]))

        def worker_addresses(client):
            calls.append(client)
            answer = next(seq)
            if isinstance(answer, BaseException):
                raise answer
            return answer() if callable(answer) else list(answer)

        monkeypatch.setattr(workers, "worker_addresses", worker_addresses)
        return calls

    monkeypatch.setattr(world, "HEAL", 0.5)
    monkeypatch.setattr(world, "POLL", 0.01)
    return install


def test_the_dead_worker_still_listed_is_not_a_healed_cluster(scheduler):
    calls = scheduler([DEAD, ALIVE])  # the count is right, the dead worker is not gone
    start = time.monotonic()
    with pytest.raises(NannyNeverRestarted, match="the killed tcp://127.0.0.1:1 still among") as info:
        healed(object(), 2, killed=[DEAD])
    assert time.monotonic() - start >= world.HEAL and len(calls) > 3
    assert isinstance(info.value.__cause__, TimeoutError)
    assert issubclass(NannyNeverRestarted, EnvironmentFailure)


def test_one_worker_back_of_two_is_the_nanny_never_restarting(scheduler):
    scheduler([DEAD, ALIVE], [ALIVE])
    with pytest.raises(NannyNeverRestarted, match=r"1 listed: tcp://127.0.0.1:2\)"):
        healed(object(), 2, killed=[DEAD])


def test_healed_once_the_dead_one_is_gone_and_a_new_one_came(scheduler):
    calls = scheduler([DEAD, ALIVE], [ALIVE], TimeoutError("identity"), [ALIVE, NEW], [])
    healed(object(), 2, killed=[DEAD])
    assert len(calls) == 4  # it stopped asking at the first whole answer


def test_a_scheduler_that_never_answers_in_time_ends_at_the_deadline(scheduler):
    scheduler(TimeoutError("identity"))
    with pytest.raises(NannyNeverRestarted, match="the scheduler never answered"):
        healed(object(), 2, killed=[DEAD])


def test_any_other_error_is_raised_as_it_is(scheduler):
    scheduler(ValueError("not an environment failure"))
    with pytest.raises(ValueError, match="not an environment failure"):
        healed(object(), 2, killed=[DEAD])


def test_a_wait_that_never_returns_is_cut_by_the_suites_bound(scheduler, monkeypatch):
    monkeypatch.setattr(world, "WAIT_BOUND", 0.2)
    forever = threading.Event()
    scheduler(forever.wait)  # an RPC that never answered, its own bound broken
    start = time.monotonic()
    with pytest.raises(ClusterUnresponsive, match=r"the wait for 2 workers \(timeout=0\) did not"):
        healed(object(), 2, killed=[DEAD])
    assert time.monotonic() - start < 5
    assert issubclass(ClusterUnresponsive, EnvironmentFailure)
    forever.set()


def test_a_cut_wait_says_what_it_and_the_clients_loop_were_waiting_on(scheduler, monkeypatch):
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

    scheduler(scheduler_rpc)
    client = types.SimpleNamespace(loop=types.SimpleNamespace(asyncio_loop=loop))
    worker = types.SimpleNamespace(status="running")
    client.cluster = types.SimpleNamespace(
        scheduler=types.SimpleNamespace(workers={"tcp://127.0.0.1:1": worker})
    )
    try:
        with pytest.raises(ClusterUnresponsive) as info:
            healed(client, 2, killed=[DEAD])
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


def test_a_cut_wait_without_a_loop_or_scheduler_says_so(scheduler, monkeypatch):
    monkeypatch.setattr(world, "WAIT_BOUND", 0.2)
    never = threading.Event()
    scheduler(never.wait)
    with pytest.raises(ClusterUnresponsive) as info:
        healed(object(), 2, killed=[DEAD])
    never.set()
    assert "client loop: no event loop on the client" in str(info.value)
    assert "scheduler: not in this process" in str(info.value)


def test_every_rule_starts_on_a_whole_cluster(scheduler):
    """A worker gone that nobody killed (or whose nanny died with it): the machine's next rule
    raises the environment's failure at once, instead of running with a minute's wait in each
    of its loads."""
    from collections import Counter

    from conformance.shuffle.machine.schedule import step

    ran = []

    @step
    def rule(machine):
        ran.append(machine)

    cluster = types.SimpleNamespace(client=object(), env=types.SimpleNamespace(n_workers=2))
    machine = types.SimpleNamespace(
        cluster=cluster, counts=Counter(), world=types.SimpleNamespace(seconds=Counter()), clean=True
    )
    scheduler([ALIVE, NEW])
    rule(machine)
    assert ran == [machine] and machine.counts["rule"] == 1
    scheduler([ALIVE])
    with pytest.raises(NannyNeverRestarted, match="never restarted a worker that left the cluster"):
        rule(machine)
    assert ran == [machine], "the rule ran on a cluster missing a worker"
