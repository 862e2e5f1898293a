"""The disk tier: files inside spill_dir only, accounted, private, cleaned up, full-disk safe."""

from __future__ import annotations

import gc
import json
import os
import stat
import subprocess
import sys
import textwrap

from conformance import conformance_id, requires
from conformance.harness import LIMIT, files_under, seed_digest, value_digest


def disk_store(impl, make_store):
    """A store whose spilled values end up on disk."""
    if "store.limit.host" in impl.capabilities:
        return make_store(host_limit=LIMIT // 4)
    return make_store()


def fill(h, count=8, n=LIMIT // 3):
    keys = set()
    for i in range(count):
        h.store[f"k{i}"] = h.value(n, seed=i)
        keys.add(f"k{i}")
    snap = h.check(keys)
    assert "disk" in snap.tiers.values(), f"nothing reached disk: {dict(snap.tiers)}"
    return keys


@conformance_id("STORE-DISK-001")
@requires("store", "store.spill.disk")
def test_disk_round_trip_and_accounting(impl, make_store):
    h = disk_store(impl, make_store)
    keys = fill(h)
    for i in range(8):
        assert value_digest(h.device, h.store[f"k{i}"]) == seed_digest(i, LIMIT // 3)
        h.check(keys)


@conformance_id("STORE-DISK-002")
@requires("store", "store.spill.disk")
def test_files_removed_on_delete(impl, make_store):
    h = disk_store(impl, make_store)
    keys = fill(h)
    for k in sorted(keys):
        del h.store[k]
    h.check(set())
    assert not files_under(h.env.spill_dir), (
        f"files left after deleting every key: {files_under(h.env.spill_dir)}"
    )


@conformance_id("STORE-DISK-003")
@requires("store", "store.spill.disk")
def test_files_removed_on_close(impl, make_store):
    h = disk_store(impl, make_store)
    fill(h)
    h.close()  # checks: ledger at baseline, spill_dir empty


@conformance_id("STORE-DISK-004")
@requires("store", "store.spill.disk")
def test_files_removed_on_garbage_collection(impl, make_store):
    h = disk_store(impl, make_store)
    fill(h)
    h.closed = True  # never closed: dropped
    h.store = None
    gc.collect()
    left = files_under(h.env.spill_dir)
    assert not left, f"a store dropped without close() left files behind: {sorted(left)}"
    assert h.ledger() == 0


@conformance_id("STORE-DISK-005")
@requires("store", "store.spill.disk")
def test_spill_files_are_private(impl, make_store):
    h = disk_store(impl, make_store)
    fill(h)
    files = files_under(h.env.spill_dir)
    bad = {
        p: oct(stat.S_IMODE(os.stat(p).st_mode))
        for p in files
        if stat.S_IMODE(os.stat(p).st_mode) != 0o600
    }
    dirs = {os.path.dirname(p) for p in files}
    bad_dirs = {
        d: oct(stat.S_IMODE(os.stat(d).st_mode))
        for d in dirs
        if stat.S_IMODE(os.stat(d).st_mode) != 0o700
    }
    assert not bad and not bad_dirs, (
        f"spill files must be 0600 and their directory 0700: {bad} {bad_dirs}"
    )


_DISK_FULL_CHILD = textwrap.dedent(
    """
    import json, resource, signal, sys, tempfile
    from conformance.loader import resolve
    from conformance.harness import LIMIT, StoreHarness, seed_digest, value_digest
    spec, kind, root = sys.argv[1:4]
    adapter = resolve(spec)
    caps = adapter.capabilities
    h = StoreHarness(adapter, kind, root, host_limit=LIMIT // 4 if "store.limit.host" in caps else None)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
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
    print("RESULT" + json.dumps(out))
    """
)


@conformance_id("STORE-DISK-006")
@requires("store", "store.spill.disk", "store.faults.disk")
def test_full_disk_loses_nothing(impl, device_kind, tmp_path):
    """A real OS limit (RLIMIT_FSIZE, SIGXFSZ ignored) makes every spill write fail."""
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
