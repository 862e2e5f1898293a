"""Rule 9: per-store locks, finalizers on any thread, iteration while writing."""

from __future__ import annotations

import gc
import random
import threading
import time

from conftest import NB

from reference_impl import ProxifyHostFile, get_device


def test_no_class_level_lock(make_store):
    s1, s2 = make_store(), make_store()
    assert s1._lock is not s2._lock
    assert not any(isinstance(v, type(threading.RLock())) for v in vars(ProxifyHostFile).values())


def test_thread_hammer_with_deadline(tmp_path):
    dev = get_device("sim", "1 MiB")
    s = ProxifyHostFile(
        device=dev, device_memory_limit=4 * NB, memory_limit=3 * NB, local_directory=str(tmp_path)
    )
    errors: list[BaseException] = []
    stop = time.monotonic() + 2.0

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        held = []
        try:
            while time.monotonic() < stop:
                k = rng.randrange(12)
                op = rng.random()
                if op < 0.35:
                    a = dev.empty(NB // 8)
                    a.view("float64")[:] = k
                    s[k] = a
                    del a
                elif op < 0.6:
                    try:
                        v = s[k]
                    except KeyError:
                        continue
                    assert float(v[0]) == k
                elif op < 0.7:
                    s.pop(k, None)
                elif op < 0.8:
                    p = s.register_external(dev.zeros(NB // 16))
                    if rng.random() < 0.5:
                        held.append(p)
                    if len(held) > 3:
                        held.pop(0)
                elif op < 0.85:
                    s.evict(rng.randrange(3 * NB))
                elif op < 0.9:
                    gc.collect()
                else:
                    for key in s:  # iterate while others write
                        s.tier_of(key) if key in s else None
        except KeyError:
            pass
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "deadlock: a worker thread never finished"
    assert not errors, errors
    gc.collect()
    snap = s.snapshot()
    assert snap.device_bytes <= 4 * NB
    assert snap.device_bytes == dev.bytes_in_use()
    for k in list(s):
        assert float(s[k][0]) == k
    s.close()


def test_finalizer_on_another_thread_while_locked(arr, make_store):
    """A proxy dying on another thread while this one holds the store lock must not block."""
    s = make_store()
    box = [s.register_external(arr(1))]
    done = threading.Event()

    def drop() -> None:
        box.clear()  # the proxy's finalizer runs here, on this thread
        done.set()

    with s._lock:
        t = threading.Thread(target=drop)
        t.start()
        assert done.wait(5), "finalizer blocked on the store lock"
    t.join()
    assert s.snapshot().n_externals == 0
