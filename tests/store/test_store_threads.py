"""SPEC section 12: per-store locks, finalizers on any thread, iteration while writing."""

from __future__ import annotations

import gc
import random
import threading
import time

import pytest

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
                    except KeyError as exc:  # another thread deleted k: the only excuse
                        assert exc.args == (k,), f"s[{k}] raised {exc!r}"
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
                        try:
                            assert s.tier_of(key) in ("device", "host", "disk")
                        except KeyError as exc:  # deleted since the snapshot iter() took
                            assert exc.args == (key,), f"tier_of({key}) raised {exc!r}"
        except BaseException as exc:  # any other KeyError included - reported below
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


@pytest.mark.parametrize("tier", ["device", "host"])
def test_pop_with_default_is_atomic_against_a_racing_delete(arr, dev, tmp_path, tier):
    """Forced interleaving: another thread deletes the key between pop's read and its delete.

    A device value is popped without a get (read, then removed); a spilled one is read
    back through ``__getitem__`` first. The hook waits at whichever pop reaches first.
    """
    read_done, deleted = threading.Event(), threading.Event()
    popper: list[threading.Thread] = []

    def after_read() -> None:
        if popper and threading.current_thread() is popper[0] and not read_done.is_set():
            read_done.set()
            deleted.wait(1)  # a pop that holds the store lock here makes this time out

    class Hooked(ProxifyHostFile):
        def __getitem__(self, key):
            value = super().__getitem__(key)
            after_read()
            return value

        def _remove_entry(self, key):
            after_read()
            super()._remove_entry(key)

    s = Hooked(device=dev, device_memory_limit=3 * NB, local_directory=str(tmp_path))
    try:
        s["k"] = arr(1.0)
        if tier == "host":
            s.evict(NB)
        assert s.tier_of("k") == tier
        outcome: list[object] = []

        def pop() -> None:
            try:
                outcome.append(s.pop("k", None))
            except BaseException as exc:  # noqa: BLE001 - the outcome under test
                outcome.append(exc)

        def delete() -> None:
            try:
                del s["k"]
            except KeyError:
                pass  # pop won: fine
            deleted.set()

        popper.append(threading.Thread(target=pop))
        popper[0].start()
        assert read_done.wait(5), "pop never read the key"
        deleter = threading.Thread(target=delete)
        deleter.start()
        popper[0].join(10)
        deleter.join(10)
        assert len(outcome) == 1 and not isinstance(outcome[0], BaseException), (
            f"pop('k', None) raised {outcome[0]!r} while another thread deleted 'k'"
        )
        assert "k" not in s
    finally:
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
