"""The disk tier when the disk is full: nothing lost, no file left behind, and the host limit
back once there is room (clauses 9.6 and 9.11)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap

import pytest

from conformance import conformance_id, not_exercised, requires
from conformance.api import evict
from conformance.store.harness import LIMIT, files_under, seed_digest, value_digest

_DISK_FULL_CHILD = textwrap.dedent(
    """
    import json, resource, signal, sys, tempfile
    from conformance.runner.loader import resolve
    from conformance.store.harness import LIMIT, StoreHarness, seed_digest, value_digest
    spec, kind, root = sys.argv[1:4]
    adapter = resolve(spec)
    caps = adapter.capabilities
    h = StoreHarness(adapter, kind, root, host_limit=LIMIT // 4 if "store.limit.host" in caps else None)
    fired = []
    signal.signal(signal.SIGXFSZ, lambda *a: fired.append(1))  # caught: the write fails (EFBIG)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    out = {"put_errors": [], "lost": [], "corrupt": [], "invariant": None}
    stored = {}
    for i in range(8):
        try:
            h.store[f"k{i}"] = h.value(LIMIT // 3, seed=i)
            stored[f"k{i}"] = i
        except Exception as exc:
            out["put_errors"].append(f"k{i}: {type(exc).__name__}: {exc}")
            if f"k{i}" in h.store:
                stored[f"k{i}"] = i
    h.caps = h.caps - {"store.limit.host"}  # a full disk keeps values in host (the contract)
    try:
        h.check(set(stored))
    except AssertionError as exc:
        out["invariant"] = str(exc)
    for k, i in stored.items():
        try:
            if value_digest(h.device, h.store[k]) != seed_digest(i, LIMIT // 3):
                out["corrupt"].append(k)
        except Exception as exc:
            out["lost"].append(f"{k}: {type(exc).__name__}: {exc}")
    out["stored"] = sorted(stored)
    out["fsize_signals"] = len(fired)
    print("RESULT" + json.dumps(out))
    """
)


@conformance_id("STORE-DISK-006", clause="9.6")
@requires("store", "store.spill.disk")
def test_full_disk_loses_nothing(impl, device_kind, tmp_path):
    """A real OS limit (RLIMIT_FSIZE, SIGXFSZ caught and counted) makes every spill write fail."""
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
        PYTHONDONTWRITEBYTECODE="1",
    )
    proc = subprocess.run(
        [sys.executable, "-c", _DISK_FULL_CHILD, impl.spec, device_kind, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
    assert lines, (
        f"child failed (rc={proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    out = json.loads(lines[-1][len("RESULT") :])
    assert not out["lost"] and not out["corrupt"], f"data lost on a full disk: {out}"
    assert out["invariant"] is None, f"store inconsistent after disk errors: {out['invariant']}"
    missing = {f"k{i}" for i in range(8)} - set(out["stored"])
    assert not missing, (
        f"puts failed and the values are gone (the value must stay in memory): {out['put_errors']}"
    )
    if not out["fsize_signals"]:
        not_exercised("no write reached the file-size limit: the store never wrote a spill file")


@contextlib.contextmanager
def _files_capped_at(nbytes: int):
    """Every write past ``nbytes`` of a file fails (EFBIG), as on a full disk: the process's
    file-size limit, its SIGXFSZ caught and counted. Yields the list of signals caught."""
    import resource
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        not_exercised("a file-size limit needs the main thread (SIGXFSZ)")
    hits: list[int] = []
    old = signal.signal(signal.SIGXFSZ, lambda *a: hits.append(1))
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, hard))
    try:
        yield hits
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old)


@conformance_id("STORE-DISK-014", clause=("9.11", "9.6", "4.4"))
@requires("store", "store.spill.disk", "store.limit.host", "store.evict.manual")
@pytest.mark.filterwarnings("ignore:spilling .* failed")  # the full disk's own warnings
def test_the_host_limit_holds_again_once_the_disk_has_room(impl, make_store):
    """Four values are evicted while no file can grow (a full disk): they stay in memory, over
    the host limit of one value (9.6 allows it). Once writes succeed again, the device fills
    up, and the first set that needs room (a spill) brings host_bytes back under the limit;
    every value reads back exactly. (A mutant of the reference dropped from its cascade queue
    every value a failed write had kept in memory: the host limit never held again.)"""
    n = LIMIT // 4
    h = make_store(host_limit=n + 4096)
    s = h.store
    keys = {f"k{i}" for i in range(4)}
    with _files_capped_at(0) as hits:
        for i in range(4):
            s[f"k{i}"] = h.value(n, seed=i)
        evict(h.adapter, s, 4 * LIMIT)
    if not hits:
        not_exercised("no write reached the full disk")
    h.caps = h.caps - {"store.limit.host"}  # a full disk keeps values in memory (9.6)
    h.check(keys)
    for i in range(5):  # four fill the device; the fifth needs room: the first spill since
        s[f"after{i}"] = h.value(n, seed=10 + i)
    keys |= {f"after{i}" for i in range(5)}
    h.caps = h.caps | {"store.limit.host"}
    snap = h.check(keys)  # the host limit again
    assert snap.disk_bytes > 0, f"the disk has room again, yet nothing went there: {snap}"
    for i in range(4):
        assert value_digest(h.device, s[f"k{i}"]) == seed_digest(i, n), f"k{i} changed"
        h.check(keys)


@conformance_id("STORE-DISK-015", clause=("9.6", "3.5"))
@requires("store", "store.spill.disk", "store.limit.host", "store.evict.manual", "store.proxy")
@pytest.mark.filterwarnings("ignore:spilling .* failed")
def test_a_write_failing_part_way_through_a_value_leaves_no_file(impl, make_store):
    """A value of two device arrays, a small one and one larger than a file may grow on a full
    disk, goes to disk (host limit 0): a store that writes each array of a value to its own
    file (as a proxying store spills each proxy) writes the small one, then fails on the large
    one. The value stays in memory and no file is left behind; with room again it goes to disk
    and reads back. (A mutant of the reference's cleanup left the first file, uncounted.)"""
    h = make_store(host_limit=0)
    s = h.store
    s["pair"] = (h.value(1000, seed=1), h.value(LIMIT // 2, seed=2))
    with _files_capped_at(8192) as hits:
        evict(h.adapter, s, 4 * LIMIT)
    if not hits:
        not_exercised("no write reached the file-size limit")
    h.caps = h.caps - {"store.limit.host"}
    snap = h.check({"pair"})
    left = files_under(h.env.spill_dir)
    assert snap.tiers["pair"] != "disk" and not left, (
        f"a write failed part-way through the value: tiers {dict(snap.tiers)}, files left "
        f"{sorted(left)}, disk_bytes {snap.disk_bytes:,}"
    )
    h.caps = h.caps | {"store.limit.host"}
    evict(h.adapter, s, 0)
    snap = h.check({"pair"})
    assert snap.tiers["pair"] == "disk", f"with room again: tiers {dict(snap.tiers)}"
    small, large = s["pair"]
    assert value_digest(h.device, small) == seed_digest(1, 1000)
    assert value_digest(h.device, large) == seed_digest(2, LIMIT // 2)
    del small, large
    h.check({"pair"})
