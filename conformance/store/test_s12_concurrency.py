"""Thread safety: barrier-started hammers, quiescent invariants, deadlines, per-store locks."""

from __future__ import annotations

import gc
import queue
import random
import sys
import threading
import time

import pytest

from conformance import conformance_id, not_exercised, requires
from conformance.store.harness import LIMIT, seed_digest, value_digest
from conformance.store.threads import DEADLINE_S, N_THREADS, ops_per_thread, run_threads

ROUNDS = {"ci": 3, "nightly": 10, "stress": 50}


@conformance_id("STORE-THREAD-001", clause="12.1")
@requires("store", "store.threadsafe")
def test_hammer_distinct_keys(harness, conformance_profile):
    h, s = harness, harness.store
    n_ops = ops_per_thread(conformance_profile)
    models: list[dict] = [{} for _ in range(N_THREADS)]

    def worker(t):
        rng = random.Random(t)
        model = models[t]

        def run():
            for op in range(n_ops):
                k = f"t{t}-{rng.randrange(5)}"
                r = rng.random()
                if r < 0.5:
                    n = rng.choice([64, 1000, LIMIT // 3])
                    seed = t * 100_000 + op
                    s[k] = h.value(n, seed)
                    model[k] = (seed, n)
                elif r < 0.85 and k in model:
                    seed, n = model[k]
                    assert value_digest(h.device, s[k]) == seed_digest(seed, n), f"{k} changed"
                elif k in model:
                    del s[k]
                    del model[k]

        return run

    run_threads([worker(t) for t in range(N_THREADS)])
    keys = {k for m in models for k in m}
    h.check(keys)
    for m in models:
        for k, (seed, n) in m.items():
            assert value_digest(h.device, s[k]) == seed_digest(seed, n)
    h.check(keys)


@conformance_id("STORE-THREAD-002", clause="12.1")
@requires("store", "store.threadsafe")
def test_hammer_shared_keys(harness, conformance_profile):
    h, s = harness, harness.store
    n_ops = ops_per_thread(conformance_profile)
    written: dict[str, set] = {f"s{i}": set() for i in range(4)}
    lock = threading.Lock()

    def worker(t, rnd):
        rng = random.Random(1000 * rnd + t)

        def run():
            for op in range(n_ops):
                k = f"s{rng.randrange(4)}"
                r = rng.random()
                if r < 0.5:
                    seed, n = (
                        rnd * 10_000_000 + t * 100_000 + op,
                        rng.choice([64, 1000, LIMIT // 3]),
                    )
                    digest = seed_digest(seed, n)  # before the write: a reader may see it
                    with lock:
                        written[k].add(digest)
                    s[k] = h.value(n, seed)
                elif r < 0.9:
                    try:
                        v = s[k]
                    except KeyError:
                        continue
                    d = value_digest(h.device, v)
                    with lock:  # a set of digests: rereading every seed ever written
                        ok = d in written[k]  # made nightly runs quadratic (300 s, "deadlock")
                    assert ok, f"{k} holds bytes nobody wrote"
                else:
                    try:
                        del s[k]
                    except KeyError:
                        pass

        return run

    for rnd in range(ROUNDS[conformance_profile]):  # races are probabilistic: several rounds
        run_threads([worker(t, rnd) for t in range(N_THREADS)])
        h.check(set(s.keys()))
    keys = set(s.keys())
    h.check(keys)
    for k in keys:
        assert value_digest(h.device, s[k]) in written[k], f"{k} holds bytes nobody wrote"
    h.check(keys)


def _gated_device_class(entered, release):
    """A SimDevice whose to_host/empty block, for one chosen thread, until released."""
    from reference_impl import SimDevice

    class GatedDevice(SimDevice):
        gated: threading.Thread | None = None

        def _gate(self):
            if threading.current_thread() is self.gated:
                self.gated = None
                entered.set()
                release.wait(DEADLINE_S)

        def to_host(self, arr):
            self._gate()
            return super().to_host(arr)

        def empty(self, shape, dtype="float64"):
            self._gate()
            return super().empty(shape, dtype)

    return GatedDevice


@conformance_id("STORE-THREAD-003", clause="12.2")
@requires("store", "store.threadsafe")
def test_each_store_has_its_own_lock(impl, make_store, device_kind):
    """While one store is stuck inside a device call, another store still makes progress."""
    if device_kind != "sim":
        pytest.skip("needs a gated simulated device")
    entered, release = threading.Event(), threading.Event()
    GatedDevice = _gated_device_class(entered, release)
    dev_a = GatedDevice(4 * LIMIT)
    a = make_store(device=dev_a)
    b = make_store()
    for i in range(2):
        a.store[f"a{i}"] = a.value(LIMIT // 3, seed=i)
    busy_errors = []

    def busy():
        try:
            for i in range(2, 6):  # spills a's values: to_host / empty under a's lock
                v = a.value(LIMIT // 3, seed=i)
                dev_a.gated = threading.current_thread()
                a.store[f"a{i}"] = v
                dev_a.gated = None
                del v
        except BaseException as exc:  # noqa: BLE001
            busy_errors.append(exc)

    t = threading.Thread(target=busy, daemon=True)
    t.start()
    try:
        if not entered.wait(10):
            not_exercised("store A never called its device (to_host/empty) while spilling")
        done = threading.Event()

        def other():
            for i in range(6):
                b.store[f"b{i}"] = b.value(LIMIT // 3, seed=i)
            b.store["b0"]
            done.set()

        t2 = threading.Thread(target=other, daemon=True)
        t2.start()
        ok = done.wait(10)
    finally:
        release.set()
        t.join(DEADLINE_S)
    assert ok, "store B was blocked while store A was busy: the stores share a lock"
    t2.join(DEADLINE_S)
    assert not busy_errors, busy_errors
    a.check({f"a{i}" for i in range(6)})
    b.check({f"b{i}" for i in range(6)})


@conformance_id("STORE-THREAD-004", clause="12.3")
@requires("store", "store.threadsafe")
def test_delete_racing_a_spill_stays_consistent(make_store, device_kind):
    """Deterministic race: thread 1 is stopped inside the spill of k0 (in a device call);
    thread 2 deletes k0. Whatever the order the store picks, it must end consistent."""
    if device_kind != "sim":
        pytest.skip("needs a gated simulated device")
    entered, release = threading.Event(), threading.Event()
    dev = _gated_device_class(entered, release)(4 * LIMIT)
    h = make_store(device=dev)
    for i in range(3):
        h.store[f"k{i}"] = h.value(LIMIT // 3, seed=i)
    errors = []

    def spill():
        try:
            v = h.value(LIMIT // 3, seed=3)
            dev.gated = threading.current_thread()
            h.store["k3"] = v  # evicts k0: stops inside the device call
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def delete():
        try:
            del h.store["k0"]
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    t1 = threading.Thread(target=spill, daemon=True)
    t1.start()
    try:
        if not entered.wait(10):
            not_exercised("the store never called its device (to_host/empty) while spilling")
        t2 = threading.Thread(target=delete, daemon=True)
        t2.start()
        t2.join(0.5)  # a locked store makes it wait; an unlocked one races ahead
    finally:
        release.set()
    t1.join(DEADLINE_S)
    t2.join(DEADLINE_S)
    assert not t1.is_alive() and not t2.is_alive(), "deadlock"
    assert not errors, errors
    keys = {"k1", "k2", "k3"}
    h.check(keys)
    for i in (1, 2, 3):
        assert value_digest(h.device, h.store[f"k{i}"]) == seed_digest(i, LIMIT // 3)
    for k in keys:
        del h.store[k]
    snap = h.check(set())
    assert (snap.device_bytes, snap.host_bytes, snap.disk_bytes) == (0, 0, 0), (
        f"bytes still accounted after every key was deleted: {snap}"
    )


FINALIZER_DEADLINE_S = 30.0


def _n_externals(profile: str) -> int:
    return {"ci": 150, "nightly": 600, "stress": 3000}[profile]


class _FinalizerRace:
    """STORE-THREAD-005's threads: an owner registers externals and keeps the store busy;
    droppers let the externals die (plainly, or in cycles only gc.collect() frees)."""

    def __init__(self, harness, n_ext: int, n_droppers: int = 3) -> None:
        self.h, self.s = harness, harness.store
        self.n_ext, self.n_droppers = n_ext, n_droppers
        self.handoff: queue.SimpleQueue = queue.SimpleQueue()
        self.errors: list[BaseException] = []
        self.progress = {"registered": 0, "dropped": 0, "collected": 0, "ops": 0}
        self.keys: set[str] = set()

    def threads(self) -> list[threading.Thread]:
        threads = [threading.Thread(target=self.owner, daemon=True, name="finalizer-owner")]
        threads += [
            threading.Thread(target=self.dropper, args=(t,), daemon=True, name=f"finalizer-drop-{t}")
            for t in range(self.n_droppers)
        ]
        return threads

    def owner(self) -> None:
        """Registers every external, keeps the store busy, never holds a proxy long."""
        h, s, keys, progress = self.h, self.s, self.keys, self.progress
        rng = random.Random(5)
        try:
            for i in range(self.n_ext):
                p = h.adapter.register_external(s, h.value(rng.choice([256, 4096, LIMIT // 8]), i))
                self.handoff.put(p)
                del p
                progress["registered"] += 1
                k = f"k{rng.randrange(6)}"
                r = rng.random()
                if r < 0.5:
                    s[k] = h.value(rng.choice([512, LIMIT // 4]), seed=10_000 + i)
                    keys.add(k)
                elif r < 0.8 and k in keys:
                    s[k]
                elif k in keys:
                    del s[k]
                    keys.discard(k)
                progress["ops"] += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(exc)
        finally:
            for _ in range(self.n_droppers):
                self.handoff.put(None)

    def dropper(self, t: int) -> None:
        """Takes each external from the owner and lets its last reference die here."""
        rng = random.Random(100 + t)
        try:
            while (p := self.handoff.get()) is not None:
                if rng.random() < 0.4:  # a cycle: only the collector can free it
                    cell: list = [p]
                    cell.append(cell)
                    del cell
                else:
                    del p  # the last reference dies here, on this thread
                p = None
                self.progress["dropped"] += 1
                if rng.random() < 0.15:
                    gc.collect()
                    self.progress["collected"] += 1
        except BaseException as exc:  # noqa: BLE001
            self.errors.append(exc)


def _still_running(threads: list[threading.Thread], deadline_s: float) -> list[str]:
    """Start ``threads`` with many switches and join them all by one deadline: the names of
    those still running then."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        for t in threads:
            t.start()
        end = time.monotonic() + deadline_s
        for t in threads:
            t.join(max(0.0, end - time.monotonic()))
    finally:
        sys.setswitchinterval(old)
    return [t.name for t in threads if t.is_alive()]


@conformance_id("STORE-THREAD-005", clause=("12.4", "7.5"))
@requires("store", "store.external", "store.threadsafe")
def test_finalizers_on_other_threads_do_not_deadlock(harness, conformance_profile):
    """Externals registered on one thread die on others (plain drops, and reference cycles
    broken by gc.collect() on worker threads) while that thread keeps using the store.
    A finalizer that takes the store's lock, or waits for the registering thread, hangs:
    the deadline turns the hang into a failure."""
    h, s = harness, harness.store
    race = _FinalizerRace(h, _n_externals(conformance_profile))
    stuck = _still_running(race.threads(), FINALIZER_DEADLINE_S)
    if stuck:
        h.closed = True  # closing would take the lock the stuck threads hold: leak it instead
        pytest.fail(
            f"deadlock: {stuck} still running after {FINALIZER_DEADLINE_S}s ({race.progress})",
            pytrace=False,
        )
    if race.errors:
        raise race.errors[0]
    keys = race.keys
    gc.collect()
    h.check(keys)
    gc.collect()
    for k in sorted(keys):
        s[k]
    h.check(keys)
