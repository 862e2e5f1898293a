"""Device/host/disk accounting against the device's own ledger."""

from __future__ import annotations

import numpy as np

from conformance import conformance_id, not_exercised, requires
from conformance.store.harness import (
    LIMIT,
    digest,
    files_under,
    host_bytes,
    seed_digest,
    value_digest,
)
from conformance.store.tiers import disk_store, fill


@conformance_id("STORE-ACCT-001", clause=("3.1", "3.6"))
@requires("store")
def test_device_bytes_match_ledger(harness):
    h, s = harness, harness.store
    keys = []
    for i, n in enumerate([10, 1000, 5000, LIMIT // 4, 3, LIMIT // 3]):
        s[f"k{i}"] = h.value(n, seed=i)
        keys.append(f"k{i}")
        h.check(keys)


@conformance_id("STORE-ACCT-002", clause="3.3")
@requires("store")
def test_delete_returns_every_byte(harness):
    h, s = harness, harness.store
    for i in range(8):
        s[f"k{i}"] = h.value(LIMIT // 3, seed=i)  # spills some
    h.check({f"k{i}" for i in range(8)})
    for i in range(8):
        del s[f"k{i}"]
    snap = h.check(set())
    assert (snap.device_bytes, snap.host_bytes, snap.disk_bytes) == (0, 0, 0), snap
    assert h.ledger() == 0


@conformance_id("STORE-ACCT-003", clause="3.4")
@requires("store", "store.spill.host")
def test_host_bytes_reported(harness):
    """Host-tier keys are counted in host_bytes: at least their payload, at most modest overhead."""
    h, s = harness, harness.store
    n = LIMIT // 3
    for i in range(7):
        s[f"k{i}"] = h.value(n, seed=i)
    snap = h.check({f"k{i}" for i in range(7)})
    on_host = [k for k, t in snap.tiers.items() if t == "host"]
    assert on_host, f"7 values of limit/3 must spill some to host: {snap.tiers}"
    low, high = n * len(on_host), (n + 4096) * len(on_host)
    assert low <= snap.host_bytes <= high, (
        f"host_bytes={snap.host_bytes:,} for {len(on_host)} host-tier values of {n:,} bytes "
        f"(expected {low:,}..{high:,})"
    )


# --------------------------------------------------------------------------- every removal path
N = LIMIT // 4


def _filled(impl, make_store):
    """Eight device values and three host-only values of N bytes: with a host limit of two
    values, keys on the device, on host and on disk."""
    if {"store.limit.host", "store.spill.disk"} <= impl.capabilities:
        h = make_store(host_limit=2 * (N + 4096))
    else:
        h = make_store()
    for i in range(8):
        h.store[f"k{i}"] = h.value(N, seed=i)
    for i in range(3):
        h.store[f"h{i}"] = host_bytes(100 + i, N).copy()
    return h


def _expected(key):
    i = int(key[1:])
    return seed_digest(i, N) if key[0] == "k" else digest(host_bytes(100 + i, N))


def _removers(h):
    s = h.store
    tiny = b"small"

    def popitem(_key):
        k, v = s.popitem()
        got = value_digest(h.device, v) if k[0] == "k" else digest(np.asarray(v))
        assert got == _expected(k), f"popitem() returned {k!r} with the wrong value"
        return k

    def pop(key):
        v = s.pop(key)
        if key in s:
            raise AssertionError(f"pop({key!r}) returned, yet the key is still there")
        got = value_digest(h.device, v) if key[0] == "k" else digest(np.asarray(v))
        assert got == _expected(key), f"pop({key!r}) returned the wrong value"

    fns = (
        s.__delitem__,
        pop,
        lambda k: s.pop(k, None),
        popitem,
        lambda k: s.__setitem__(k, tiny),
        lambda k: s.update({k: tiny}),
    )
    return dict(zip(REMOVERS, fns, strict=True))


REMOVERS = (  # the first four remove the key, the last two overwrite it
    "del store[k]",
    "store.pop(k)",
    "store.pop(k, None)",
    "store.popitem()",
    "store[k] = <small value>",
    "store.update({k: <small value>})",
)


@conformance_id("STORE-ACCT-004", clause=("3.3", "9.4", "1.3", "1.6", "1.7", "1.8"))
@requires("store")
def test_every_removal_path_returns_every_byte(impl, make_store):
    """Keys on disk, on host and on the device are removed one at a time by each path (del,
    pop, pop with a default, popitem, overwrite, update) and all at once by clear(). After each
    removal the store's bytes over all tiers drop by about the value's size, and inspect, the
    ledger and the files under spill_dir agree; at the end every count is 0, the ledger is at
    its baseline and spill_dir is empty."""
    tried: dict[str, set[str]] = {}
    for what in (*REMOVERS, "store.clear()"):
        h = _filled(impl, make_store)
        s = h.store
        keys = set(s.keys())
        if what == "store.clear()":
            s.clear()
            keys = set()
        else:
            remove = _removers(h)[what]
            tiers = dict(h.check(keys).tiers)
            order = sorted(keys, key=lambda k: ("disk", "host", "device").index(tiers[k]))
            for key in order:
                before = h.check(keys)
                result = remove(key)
                removed = result if what == "store.popitem()" else key
                del result  # a popped value is the test's now: drop it before reading the ledger
                tried.setdefault(what, set()).add(before.tiers[removed])
                if what in REMOVERS[:4]:
                    keys.discard(removed)
                snap = h.check(keys)
                total_before = before.device_bytes + before.host_bytes + before.disk_bytes
                total = snap.device_bytes + snap.host_bytes + snap.disk_bytes
                # A store may leave host objects uncounted (SPEC 3.7); a device value counts.
                least = N // 2 if removed[0] == "k" else 0
                assert total_before - total >= least, (
                    f"{what} of {removed!r} (a {N:,}-byte value in the {before.tiers[removed]} "
                    f"tier): device + host + disk bytes went {total_before:,} -> {total:,}"
                )
            for key in sorted(keys):
                del s[key]
            keys = set()
        snap = h.check(keys)
        assert (snap.device_bytes, snap.host_bytes, snap.disk_bytes) == (0, 0, 0), (
            f"after {what} of every key: device/host/disk bytes "
            f"{snap.device_bytes:,}/{snap.host_bytes:,}/{snap.disk_bytes:,}"
        )
        assert len(s) == 0 and not list(s), f"after {what} of every key: {sorted(s)} left"
        assert h.ledger() == 0 and not files_under(h.env.spill_dir), (
            f"after {what} of every key: ledger {h.ledger():,}, files "
            f"{sorted(files_under(h.env.spill_dir))}"
        )
        h.close()
    missing = {w: t for w, t in tried.items() if len(t) < 2}
    if missing:
        not_exercised(f"some paths removed values from one tier only: {missing}")


def _host_containers(seed: int) -> dict:
    """Host-only values of about 64 KiB each, all of it inside containers."""
    rng = np.random.default_rng(seed)
    return {
        f"list{seed}": [rng.integers(0, 255, 1024, dtype=np.uint8) for _ in range(64)],
        f"dict{seed}": {
            f"f{i}": bytes(rng.integers(0, 255, 1024, dtype=np.uint8)) for i in range(64)
        },
        f"nest{seed}": (
            [rng.random(128) for _ in range(32)],
            (rng.random(128),) * 1,
            {"x": [rng.random(128) for _ in range(31)]},
        ),
    }


def _deep(value) -> int:
    """The payload a host value holds: bytes of its arrays and bytes objects, containers walked."""
    if isinstance(value, (list, tuple)):
        return sum(_deep(v) for v in value)
    if isinstance(value, dict):
        return sum(_deep(v) for v in value.values())
    if isinstance(value, np.ndarray):
        return value.nbytes
    return len(value) if isinstance(value, bytes) else 0


def _same(a, b) -> bool:
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return type(b) is dict and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, np.asarray(b))
    return a == b


@conformance_id("STORE-ACCT-005", clause="3.7")
@requires("store", "store.spill.host")
def test_host_objects_are_measured_deeply(impl, make_store):
    """Host-only containers (a list of 64 numpy arrays, a dict of 64 bytes objects, nested
    tuples, lists and dicts of arrays) count at least their contents in host_bytes and nothing
    in device_bytes; with a host limit of 100 KiB, what stays on host, measured deeply by the
    test, fits the limit. Every value reads back equal."""
    h = make_store()
    values = _host_containers(1)
    h.store.update(values)
    snap = h.check(values)
    on_host = {k for k, t in snap.tiers.items() if t == "host"}
    deep = sum(_deep(values[k]) for k in on_host)
    assert on_host and snap.host_bytes >= deep, (
        f"host_bytes {snap.host_bytes:,} for host-tier values holding {deep:,} bytes "
        f"({sorted(on_host)}): host objects must be measured deeply"
    )
    assert snap.device_bytes == 0, f"host objects counted as device bytes: {snap.device_bytes:,}"
    if {"store.limit.host", "store.spill.disk"} <= impl.capabilities:
        limit = 100 * 1024
        hl = make_store(host_limit=limit)
        more = {**_host_containers(2), **_host_containers(3)}
        for k, v in more.items():
            hl.store[k] = v
            snap = hl.check(set(hl.store))
            held = {k: _deep(more[k]) for k, t in snap.tiers.items() if t == "host"}
            assert sum(held.values()) <= limit, (
                f"host limit {limit:,}: the host tier holds {sum(held.values()):,} bytes of "
                f"payload ({held}), while the store counts host_bytes={snap.host_bytes:,}"
            )
        for k, v in more.items():
            assert _same(v, hl.store[k]), f"{k} came back changed"
    for k, v in values.items():
        assert _same(v, h.store[k]), f"{k} came back changed"


@conformance_id("STORE-DISK-007", clause="3.5")
@requires("store", "store.spill.disk")
def test_disk_bytes_equal_file_sizes(impl, make_store):
    """disk_bytes == the sizes of the files under spill_dir, after every kind of call."""
    h = disk_store(impl, make_store)  # disk accounting on: h.check() compares after each step
    keys = fill(h)
    for i in range(8):
        h.store[f"k{i}"]
        h.check(keys)
    for i in range(0, 8, 2):  # overwrite: the old file's bytes leave the tally
        h.store[f"k{i}"] = h.value(LIMIT // 3, seed=100 + i)
        h.check(keys)
    for i in range(1, 8, 2):
        del h.store[f"k{i}"]
        keys.discard(f"k{i}")
        h.check(keys)
    for k in sorted(keys):
        del h.store[k]
    snap = h.check(set())
    assert snap.disk_bytes == 0, f"disk_bytes={snap.disk_bytes:,} with no key left"
