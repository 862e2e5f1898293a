"""register_external: counted, spillable, weakly held, never double counted."""

from __future__ import annotations

import gc
import random

import pytest

from conformance import conformance_id, not_exercised, requires
from conformance.store.harness import LIMIT, files_under, seed_digest, value_digest
from conformance.store.threads import DEADLINE_S, N_THREADS, ops_per_thread, run_threads


@conformance_id("STORE-EXT-001", clause="7.1")
@requires("store", "store.external")
def test_external_counts_toward_device_bytes(harness):
    h = harness
    h.store["k"] = h.value(1000, seed=1)
    p = h.adapter.register_external(h.store, h.value(5000, seed=2))
    snap = h.check({"k"})
    assert snap.device_bytes == 6000, f"device_bytes={snap.device_bytes:,}, expected 6,000"
    assert value_digest(h.device, p) == seed_digest(2, 5000)
    del p


@conformance_id("STORE-EXT-002", clause="7.3")
@requires("store", "store.external")
def test_external_forgotten_when_dropped(harness):
    h = harness
    h.store["k"] = h.value(1000, seed=1)
    p = h.adapter.register_external(h.store, h.value(5000, seed=2))
    q = h.adapter.register_external(h.store, h.value(LIMIT // 3, seed=3))
    h.check({"k"})
    del p, q
    gc.collect()
    snap = h.check({"k"})
    assert snap.device_bytes == 1000, f"dropped externals still counted: {snap.device_bytes:,}"
    assert snap.host_bytes == 0 and snap.disk_bytes == 0, snap


@conformance_id("STORE-EXT-003", clause="7.2")
@requires("store", "store.external", "store.spill.host")
def test_externals_spill_and_stay_correct(harness):
    h = harness
    exts = [h.adapter.register_external(h.store, h.value(LIMIT // 3, seed=i)) for i in range(3)]
    keys = set()
    for i in range(4):
        h.store[f"k{i}"] = h.value(LIMIT // 3, seed=10 + i)
        keys.add(f"k{i}")
        snap = h.check(keys)
    assert snap.host_bytes + snap.disk_bytes >= 3 * (LIMIT // 3), "externals and keys must spill"
    for i, p in enumerate(exts):
        assert value_digest(h.device, p) == seed_digest(i, LIMIT // 3)
        h.check(keys)
    del exts, p
    gc.collect()
    h.check(keys)


@conformance_id("STORE-EXT-004", clause="7.4")
@requires("store", "store.external")
def test_stored_and_external_counted_once(harness):
    h = harness
    v = h.value(4000, seed=1)
    h.store["k"] = v
    p = h.adapter.register_external(h.store, v)
    del v
    snap = h.check({"k"})
    assert snap.device_bytes == 4000, (
        f"an object both stored and external counted {snap.device_bytes:,}"
    )
    del p
    gc.collect()
    h.check({"k"})


@conformance_id("STORE-EXT-005", clause=("7.3", "3.5"))
@requires("store", "store.external", "store.spill.host")
def test_externals_dying_while_spilled_give_every_byte_back(impl, make_store):
    """Externals pushed out to host (and, with a host limit of one value, on to disk) die
    there: host_bytes and disk_bytes drop back to what the keys hold, their files are gone,
    and the ledger holds only the keys."""
    n = LIMIT // 4
    disk = {"store.limit.host", "store.spill.disk"} <= impl.capabilities
    h = make_store(host_limit=n + 4096) if disk else make_store()
    exts = [h.adapter.register_external(h.store, h.value(n, seed=i)) for i in range(3)]
    for i in range(4):  # the keys fill the device: the externals (least recent) leave it
        h.store[f"k{i}"] = h.value(n, seed=10 + i)
    keys = {f"k{i}" for i in range(4)}
    snap = h.check(keys)
    assert snap.host_bytes > 0, f"the externals should be on host: {snap}"
    if disk:
        assert snap.disk_bytes > 0 and files_under(h.env.spill_dir), (
            f"with a host limit of one value two externals should be on disk: {snap}"
        )
    del exts
    gc.collect()
    snap = h.check(keys)
    assert (snap.host_bytes, snap.disk_bytes) == (0, 0), (
        f"the externals died while spilled, yet host_bytes={snap.host_bytes:,}, "
        f"disk_bytes={snap.disk_bytes:,} (every key is on the device: {dict(snap.tiers)})"
    )
    left = files_under(h.env.spill_dir)
    assert not left, f"the externals died on disk, yet their files remain: {sorted(left)}"
    assert snap.device_bytes == 4 * n and h.ledger() == 4 * n, (snap, h.ledger())


@conformance_id("STORE-EXT-006", clause=("7.4", "7.1", "7.3"))
@requires("store", "store.external")
def test_registered_then_stored_counted_once(harness):
    """STORE-EXT-004's other order: an object registered as an external first and stored under
    a key after (a worker storing a value it registered while computing it) is counted once.
    With the key deleted while the object lives it is an external again, counted (7.1); dropped,
    it is gone (7.3). (The reference's index once raised on this store: no test took the order.)"""
    h = harness
    h.store["other"] = h.value(1000, seed=2)
    p = h.adapter.register_external(h.store, h.value(4000, seed=1))
    h.store["k"] = p
    snap = h.check({"k", "other"})
    assert snap.device_bytes == 5000, (
        f"an external stored under a key is counted {snap.device_bytes - 1000:,} bytes, not 4,000"
    )
    assert value_digest(h.device, h.store["k"]) == seed_digest(1, 4000)
    del h.store["k"]
    snap = h.check({"other"})
    assert snap.device_bytes == 5000, (
        f"its key deleted, the registered object lives: 4,000 bytes of external, yet "
        f"device_bytes={snap.device_bytes:,} (1,000 of them the other key)"
    )
    assert value_digest(h.device, p) == seed_digest(1, 4000)
    del p
    gc.collect()
    snap = h.check({"other"})
    assert snap.device_bytes == 1000 and h.ledger() == 1000, (snap, h.ledger())


def _externals_workload(h, n_ops: int, seed: int):
    """Per-thread bodies mixing set, get and delete of the thread's own keys with
    register_external, each thread handing its externals to the next, which drops them
    (some in reference cycles broken by gc.collect() on that thread). Returns the bodies,
    the per-thread models of what each stored, and the hand-off queues."""
    import gc
    import queue

    s = h.store
    handoff: list[queue.SimpleQueue] = [queue.SimpleQueue() for _ in range(N_THREADS)]
    models: list[dict] = [{} for _ in range(N_THREADS)]
    counts = {"registered": 0, "dropped": 0}

    def worker(t):
        rng = random.Random(seed * 1000 + 600 + t)
        model = models[t]

        def run():
            for op in range(n_ops):
                k = f"t{t}-{rng.randrange(4)}"
                r = rng.random()
                if r < 0.3:
                    n = rng.choice([256, 4096, LIMIT // 4])
                    s[k] = h.value(n, seed=t * 100_000 + op)
                    model[k] = (t * 100_000 + op, n)
                elif r < 0.5 and k in model:
                    assert value_digest(h.device, s[k]) == seed_digest(*model[k]), f"{k} changed"
                elif r < 0.6 and k in model:
                    del s[k]
                    del model[k]
                elif r < 0.8:
                    p = h.adapter.register_external(s, h.value(rng.choice([512, LIMIT // 8]), op))
                    handoff[(t + 1) % N_THREADS].put(p)
                    del p
                    counts["registered"] += 1
                else:
                    try:
                        p = handoff[t].get_nowait()
                    except queue.Empty:
                        continue
                    if rng.random() < 0.3:
                        cell: list = [p]
                        cell.append(cell)
                        del cell
                    del p
                    counts["dropped"] += 1
                    if rng.random() < 0.1:
                        gc.collect()

        return run

    return [worker(t) for t in range(N_THREADS)], models, handoff, counts


def _check_externals_settle(h, models, handoff, counts, what: str) -> None:
    """Once the threads stop: no drift between the ledger and inspect; every value reads
    back; with every external dropped and every key deleted, nothing is left."""
    import gc

    s = h.store
    keys = {k for m in models for k in m}
    gc.collect()
    h.check(keys)  # externals still held in the queues: ledger == inspect, limits hold
    for q in handoff:
        while not q.empty():
            q.get_nowait()
    gc.collect()
    h.check(keys)
    for m in models:
        for k, (seed, n) in m.items():
            assert value_digest(h.device, s[k]) == seed_digest(seed, n), f"{k} changed ({what})"
    for k in keys:
        del s[k]
    gc.collect()
    snap = h.check(set())
    assert (snap.device_bytes, snap.host_bytes, snap.disk_bytes) == (0, 0, 0), (
        f"{what}: every external dropped and every key deleted, yet the store still counts "
        f"{snap} ({counts})"
    )
    assert h.ledger() == 0, f"{what}: {h.ledger():,} device bytes still in use ({counts})"


SCHEDULED_SEEDS = {"ci": 3, "nightly": 10, "stress": 50}


SCHEDULED_OPS = 40  # per thread: under the scheduler every line is a switch point


@conformance_id("STORE-THREAD-006", clause=("7.5", "12.1", "12.4"))
@requires("store", "store.external", "store.threadsafe")
def test_hammer_with_externals_on_every_thread(make_store, conformance_profile):
    """Every thread mixes set, get and delete of its own keys with register_external and
    drops the externals another thread registered. First under the seeded scheduler
    (:mod:`conformance.store.scheduler`: any Python line may hand the turn to another thread, so a
    race window a few lines wide is entered by a seed, not by the machine's load), then
    freely with a short switch interval (real parallel timing). After each run: no drift,
    every value reads back, and nothing is left once everything is dropped."""
    from conformance.store.scheduler import run_scheduled

    for seed in range(SCHEDULED_SEEDS[conformance_profile]):
        h = make_store()
        targets, models, handoff, counts = _externals_workload(h, SCHEDULED_OPS, seed)
        run = run_scheduled(targets, seed, deadline=DEADLINE_S)
        what = f"scheduled seed {seed} ({run.switches} switches)"
        if run.stuck:
            h.closed = True  # the stuck threads may hold the store's lock: leak it
            pytest.fail(f"{what}: deadlock, {run.stuck} still running", pytrace=False)
        if run.errors:
            raise AssertionError(f"{what}: a thread raised {run.errors[0]!r}") from run.errors[0]
        if not run.switches:
            not_exercised(f"{what}: the scheduler never switched threads")
        _check_externals_settle(h, models, handoff, counts, what)

    h = make_store()
    targets, models, handoff, counts = _externals_workload(
        h, ops_per_thread(conformance_profile) // 2, seed=0
    )
    run_threads(targets)
    _check_externals_settle(h, models, handoff, counts, "free-running threads")
