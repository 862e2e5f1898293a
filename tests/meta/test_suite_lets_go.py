"""The suite lets go of a failed shuffle's inputs at once (SHUF-STATE-001's leftover).

The reference's manifest kept SHUF-STATE-001 ``flaky`` for a leftover after a shuffle that
failed because its spill files were removed: every input task still held on the workers
when clause 14.11 was judged, a replay clean. The holder was the suite, not the shuffle:
``call_with_timeout`` returned the error while its pool's thread was still inside
``_WorkItem.run``, whose frame keeps the call (and the inputs it closes over). The
machine's ``forget_error`` cannot clear an executing frame, so once that thread let go, the
inputs sat in the error's reference cycle until a garbage collection the judge never ran.

The hook here forces that interleaving on every run: the pool's thread stays in ``run``
for a while after handing over the error, so the old ``call_with_timeout`` (which did not
wait for its thread) fails this test every time, and the fixed one (it waits) passes.
"""

from __future__ import annotations

import concurrent.futures
import gc
import threading
import time
import weakref

import pytest

from conformance.shuffle.harness import call_with_timeout, forget_error

LINGER_S = 0.3  # how long the pool's thread stays in ``_WorkItem.run`` after the error


class Inputs:
    """Stands for the input futures a shuffle call closes over."""


@pytest.fixture
def lingering_pool_thread(monkeypatch):
    """``Future.set_exception`` in a pool thread returns only after ``LINGER_S``: the caller
    has the error while the thread's ``_WorkItem.run`` frame still holds the call."""
    original = concurrent.futures.Future.set_exception
    lingered = []

    def set_exception(self, exc):
        original(self, exc)
        if threading.current_thread().name.startswith("conformance-shuffle"):
            lingered.append(exc)
            time.sleep(LINGER_S)

    monkeypatch.setattr(concurrent.futures.Future, "set_exception", set_exception)
    return lingered


def _shuffle(inputs: Inputs) -> None:
    raise RuntimeError(f"failed with {inputs!r}")


def _run(inputs: Inputs) -> None:
    """As ``ShuffleCluster.shuffle`` calls an adapter: a lambda over the inputs."""
    call_with_timeout(lambda: _shuffle(inputs), 10.0)


def test_a_failed_call_lets_go_of_what_it_closed_over(lingering_pool_thread):
    inputs = Inputs()
    held = weakref.ref(inputs)
    gc.disable()  # the judge must not depend on a collection that happens to come later
    try:
        with pytest.raises(RuntimeError) as info:
            _run(inputs)
        assert lingering_pool_thread, "hook not exercised: the pool's thread never lingered"
        exc = info.value
        del info, inputs
        forget_error(exc)  # clears the frames it can, then collects once (as the machine)
        del exc
        lingering_pool_thread.clear()
        assert held() is None, (
            "the inputs a failed call closed over are still alive after the error was "
            "forgotten: call_with_timeout returned while its thread held them"
        )
    finally:
        gc.enable()
