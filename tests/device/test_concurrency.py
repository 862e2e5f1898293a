"""Eight threads hammer one SimDevice; frees happen on other threads than allocations."""

from __future__ import annotations

import queue
import random
import threading

import numpy as np

from reference_impl.device import DeviceOutOfMemoryError, SimDevice

THREADS = 8
ROUNDS = 400
CAPACITY = 64 * 1024


def test_ledger_stays_exact_under_eight_threads():
    dev = SimDevice(CAPACITY)
    barrier = threading.Barrier(THREADS)
    handoff: queue.SimpleQueue = queue.SimpleQueue()  # arrays freed by whoever takes them
    errors: list[BaseException] = []
    ooms = [0]

    def work(seed: int) -> None:
        rng = random.Random(seed)
        kept: list = []
        barrier.wait()
        try:
            for _ in range(ROUNDS):
                op = rng.random()
                if op < 0.45:
                    try:
                        kept.append(dev.empty(rng.randint(1, 2048), "uint8"))
                    except DeviceOutOfMemoryError:
                        ooms[0] += 1
                elif op < 0.6 and kept:
                    kept.append(kept[-1][1:])  # a view: no new bytes
                elif op < 0.7 and kept:
                    try:
                        kept.append(np.concatenate([kept[-1], kept[-1]]))
                    except DeviceOutOfMemoryError:
                        ooms[0] += 1
                elif op < 0.85 and kept:
                    handoff.put(kept.pop(rng.randrange(len(kept))))
                else:
                    try:
                        handoff.get_nowait()
                    except queue.Empty:
                        pass
                assert dev.bytes_in_use() <= CAPACITY
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "deadlock: a thread did not finish in 60 s"
    assert not errors, errors
    while not handoff.empty():
        handoff.get_nowait()
    assert dev.bytes_in_use() == 0
    assert dev.live_allocations() == {}
    assert 0 < dev.peak_bytes() <= CAPACITY
