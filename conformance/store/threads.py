"""Threads that hammer a store together: started at one barrier, with many switches, and
failed as a deadlock when one outlives the deadline."""

from __future__ import annotations

import sys
import threading

import pytest

DEADLINE_S = 60.0
N_THREADS = 4


def ops_per_thread(profile: str) -> int:
    return {"ci": 500, "nightly": 2000, "stress": 10000}[profile]


def run_threads(targets, deadline=DEADLINE_S):
    barrier = threading.Barrier(len(targets))
    errors = []

    def wrap(fn):
        def run():
            try:
                barrier.wait(timeout=deadline)
                fn()
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        return run

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # many more thread switches: races show up
    try:
        threads = [
            threading.Thread(target=wrap(fn), daemon=True, name=f"hammer-{i}")
            for i, fn in enumerate(targets)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(deadline)
        stuck = [t.name for t in threads if t.is_alive()]
    finally:
        sys.setswitchinterval(old)
    if stuck:
        pytest.fail(f"deadlock: threads {stuck} still running after {deadline}s", pytrace=False)
    if errors:
        raise errors[0]
