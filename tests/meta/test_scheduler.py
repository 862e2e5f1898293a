"""The seeded scheduler (conformance.scheduler): it finds a race by seed, replays a seed
exactly, passes the turn on when a thread blocks on a lock, and reports deadlocks."""

from __future__ import annotations

import threading

from conformance.scheduler import run_scheduled


def _counter_bodies(lock: threading.Lock | None, n: int = 50):
    count = [0]

    def body():
        for _ in range(n):
            if lock is None:
                seen = count[0]
                count[0] = seen + 1  # a read-modify-write window one line wide
            else:
                with lock:
                    seen = count[0]
                    count[0] = seen + 1

    return [body, body, body], count


def test_a_one_line_window_is_entered_by_a_seed():
    lost = 0
    for seed in range(3):
        bodies, count = _counter_bodies(None)
        run = run_scheduled(bodies, seed, switch_p=0.2)
        assert not run.errors and not run.stuck
        lost += 150 - count[0]
    assert lost > 0, "no seed lost an update: the scheduler never switched inside the window"


def test_a_locked_counter_never_loses_an_update_and_blocked_threads_pass_the_turn():
    for seed in range(3):
        bodies, count = _counter_bodies(threading.Lock())
        run = run_scheduled(bodies, seed, switch_p=0.2)
        assert not run.errors and not run.stuck
        assert count[0] == 150
        assert run.switches > 0


def test_a_seed_replays_its_schedule():
    def schedule(seed):
        bodies, count = _counter_bodies(None)
        run = run_scheduled(bodies, seed, switch_p=0.2)
        return run.points, run.switches, count[0]

    assert schedule(7) == schedule(7)
    assert len({schedule(s) for s in range(4)}) > 1, "every seed gave the same schedule"


def test_errors_and_deadlocks_are_reported_not_swallowed():
    def boom():
        raise ValueError("from a scheduled thread")

    run = run_scheduled([boom, lambda: None], seed=0)
    assert [str(e) for e in run.errors] == ["from a scheduled thread"]

    a, b = threading.Lock(), threading.Lock()
    release = threading.Event()

    def ab():
        with a:
            for _ in range(200):  # lines: switch points while holding a
                pass
            if b.acquire(timeout=5):
                b.release()
            else:
                release.set()

    def ba():
        with b:
            for _ in range(200):
                pass
            if a.acquire(timeout=5):
                a.release()
            else:
                release.set()

    run = run_scheduled([ab, ba], seed=1, switch_p=0.5, deadline=20)
    assert not run.stuck and run.stalls > 0
    assert release.is_set(), "the scheduler never let the two lock orders interleave"

    forever = threading.Event()
    run = run_scheduled([forever.wait, lambda: None], seed=0, deadline=1)
    forever.set()
    assert run.stuck == ["scheduled-0"]


def test_a_collection_never_runs_inside_the_scheduler():
    """Finalizers that take an implementation's lock run at any collection. Were one to run
    inside the scheduler's own critical section, a thread holding that lock and waiting to
    enter the section would deadlock with it (the run came back stuck under load before
    the section turned the collector off)."""
    import gc

    held = threading.RLock()

    class Node:
        def __init__(self):
            self.cycle = self

        def __del__(self):
            with held:
                pass

    def body():
        for _ in range(300):
            with held:
                for _ in range(20):
                    Node()
            Node()

    old = gc.get_threshold()
    gc.set_threshold(50)  # a collection every few dozen allocations
    try:
        for seed in range(3):
            run = run_scheduled([body, body, body], seed, switch_p=0.3, deadline=30)
            assert not run.stuck, f"seed {seed}: {run.stuck} deadlocked"
            assert not run.errors
    finally:
        gc.set_threshold(*old)
