"""The MutableMapping contract, with device values."""

from __future__ import annotations

import os

import pytest

from conformance import conformance_id, requires
from conformance.store.harness import LIMIT, files_under, seed_digest, value_digest


@conformance_id("STORE-MAP-001", clause=("1.1", "1.2", "3.3"))
@requires("store")
def test_set_get_contains_len_delete(harness):
    h, s = harness, harness.store
    sizes = {"a": 100, "b": 1000, "c": 4096}
    for i, (k, n) in enumerate(sizes.items()):
        s[k] = h.value(n, seed=i)
    h.check(sizes)
    assert len(s) == 3 and set(s) == set(sizes)
    assert "a" in s and "zzz" not in s
    for i, (k, n) in enumerate(sizes.items()):
        assert value_digest(h.device, s[k]) == seed_digest(i, n), f"{k!r} came back changed"
    del s["b"]
    assert "b" not in s and len(s) == 2
    with pytest.raises(KeyError):
        s["b"]
    with pytest.raises(KeyError):
        del s["b"]
    h.check({"a", "c"})


@conformance_id("STORE-MAP-002", clause=("1.3", "3.3"))
@requires("store")
def test_overwrite_replaces_and_frees(harness):
    h, s = harness, harness.store
    s["k"] = h.value(LIMIT // 4, seed=1)
    s["k"] = h.value(LIMIT // 2, seed=2)
    assert len(s) == 1
    assert value_digest(h.device, s["k"]) == seed_digest(2, LIMIT // 2)
    h.check({"k"})
    assert h.snapshot().device_bytes + h.snapshot().host_bytes + h.snapshot().disk_bytes > 0
    del s["k"]
    h.check(set())
    assert h.ledger() == 0, "overwritten/deleted values still hold device memory"


@conformance_id("STORE-MAP-003", clause=("1.4", "1.5", "1.6", "1.8", "1.9"))
@requires("store")
def test_mutable_mapping_api(harness):
    h, s = harness, harness.store
    s.update((f"k{i}", h.value(256, seed=i)) for i in range(4))  # update(iterator)
    s.update({"x": h.value(64, seed=9)})
    assert sorted(s.keys()) == ["k0", "k1", "k2", "k3", "x"]
    assert len(list(s.values())) == 5 and len(list(s.items())) == 5
    assert s.get("missing", "d") == "d"
    popped = s.pop("x")
    assert value_digest(h.device, popped) == seed_digest(9, 64)
    del popped
    assert s.pop("missing", None) is None
    assert "x" not in s
    assert value_digest(h.device, s.setdefault("k0", None)) == seed_digest(0, 256)
    h.check({"k0", "k1", "k2", "k3"})
    s.clear()
    assert len(s) == 0
    h.check(set())


@conformance_id("STORE-MAP-004", clause="1.11")
@requires("store")
def test_dask_style_keys(harness):
    """dask keys are str or tuples like ('x', 0); ints and bytes appear too."""
    h, s = harness, harness.store
    keys = [("x", 0), ("x", 1, 2), 7, b"raw", "plain"]
    for i, k in enumerate(keys):
        s[k] = h.value(LIMIT // 3, seed=i)  # five of these exceed the limit: some must spill
    h.check(keys)
    for i, k in enumerate(keys):
        assert value_digest(h.device, s[k]) == seed_digest(i, LIMIT // 3)
    h.check(keys)


@conformance_id("STORE-MAP-005", clause=("1.14", "1.15"))
@requires("store")
def test_unhashable_keys_rejected_cleanly(harness):
    h, s = harness, harness.store
    s["ok"] = h.value(128, seed=3)
    for bad in ([1, 2], {"a": 1}, {1}):
        with pytest.raises(TypeError):
            s[bad] = h.value(128, seed=4)
        with pytest.raises((TypeError, KeyError)):
            s[bad]
    h.check({"ok"})
    assert value_digest(h.device, s["ok"]) == seed_digest(3, 128)


@conformance_id("STORE-MAP-010", clause=("1.16", "1.15"))
@requires("store")
def test_unhashable_keys_rejected_by_every_method(harness):
    """``in``, ``pop`` (with and without a default), ``del``, ``setdefault`` and ``get`` with a
    default, given an unhashable key, reject it as 1.16 says and change nothing."""
    h, s = harness, harness.store
    s["ok"] = h.value(128, seed=3)
    before = dict(h.snapshot().tiers)
    for bad in ([1, 2], {"a": 1}, {1}):
        try:
            found = bad in s
        except TypeError:
            found = False
        assert found is False, f"{bad!r} in store returned {found!r}"
        for what, call in (
            ("pop(k)", lambda bad=bad: s.pop(bad)),
            ("pop(k, d)", lambda bad=bad: s.pop(bad, None)),
            ("del store[k]", lambda bad=bad: s.__delitem__(bad)),
        ):
            with pytest.raises((TypeError, KeyError)):
                call()
                raise AssertionError(f"{what} accepted the unhashable key {bad!r}")
        with pytest.raises(TypeError):
            s.setdefault(bad, h.value(64, seed=5))
    assert dict(h.snapshot().tiers) == before, "a rejected key changed the store"
    h.check({"ok"})
    assert value_digest(h.device, s["ok"]) == seed_digest(3, 128)


@conformance_id("STORE-MAP-009", clause=("1.10", "1.1"))
@requires("store")
def test_mutating_while_iterating(harness):
    """While iterating, delete the key just yielded, delete one not yet yielded, or add a key.
    The iteration either raises RuntimeError or yields every key present throughout exactly
    once and nothing that was never there; either way the store stays consistent."""
    h, s = harness, harness.store
    outcomes = []
    for case in ("delete the key just yielded", "delete a later key", "add a key"):
        keys = [f"k{i}" for i in range(6)]
        for i, k in enumerate(keys):
            s[k] = h.value(LIMIT // 8, seed=i)
        it = iter(s)
        seen = [next(it)]
        if case == "delete the key just yielded":
            gone = {seen[0]}
        elif case == "delete a later key":
            gone = {next(k for k in reversed(keys) if k != seen[0])}
        else:
            gone = set()
            s["new"] = h.value(10, seed=99)
        for k in gone:
            del s[k]
        try:
            seen += list(it)
        except RuntimeError:
            outcomes.append(f"{case}: RuntimeError")
        else:
            outcomes.append(f"{case}: completed")
            throughout = set(keys) - gone
            assert len(seen) == len(set(seen)), f"{case}: a key was yielded twice: {seen}"
            assert set(seen) <= set(keys) | {"new"}, f"{case}: unknown keys yielded: {seen}"
            missed = sorted(throughout - set(seen))
            assert not missed, f"{case}: keys present throughout were skipped: {missed}"
        now = (set(keys) - gone) | ({"new"} if case == "add a key" else set())
        h.check(now)
        for k in now:
            del s[k]
        h.check(set())


N = LIMIT // 3


# Groups of keys that compare and hash equal: each group must be ONE key.
EQUAL_KEYS = ((1, 1.0, True), (0, 0.0, False), (("x", 1), ("x", 1.0), ("x", True)), (2.5,))


# Keys that are all different, although their str() or repr() collide.
COLLIDING_KEYS = (
    "1",
    1,
    "('a',)",
    ("a",),
    "b'x'",
    b"x",
    "('x', 1)",
    "None",
    None,
    "1.5",
    1.5,
)


def _pressure(h, count=4, seed=1000):
    """Values that push everything stored before them off the device."""
    for i in range(count):
        h.store[f"pressure-{i}"] = h.value(N, seed=seed + i)
    return {f"pressure-{i}" for i in range(count)}


@conformance_id("STORE-KEY-001", clause=("1.12", "1.13"))
@requires("store")
def test_equal_keys_are_one_key_and_colliding_names_are_not(impl, make_store):
    """1, 1.0 and True (and 0, 0.0, False; ('x', 1), ('x', 1.0), ('x', True)) are one key: the
    last set wins, len counts one, every spelling reads it, and the overwritten values leave
    every tier. Keys whose str()/repr() collide ("1" and 1, ("a",) and "('a',)", b"x" and
    "b'x'", None and "None") are distinct keys. Both hold after the values were spilled."""
    disk = {"store.limit.host", "store.spill.disk"} <= impl.capabilities
    h = make_store(host_limit=N + 4096) if disk else make_store()
    s = h.store
    seed = 0
    last = {}
    for group in EQUAL_KEYS:
        for k in group:
            s[k] = h.value(N, seed=seed)
            last[group] = seed
            seed += 1
            keys = set(_pressure(h, seed=9000 + seed)) | {g[0] for g in last}
            h.check(keys)
    assert len(s) == len(EQUAL_KEYS) + 4, (
        f"{len(EQUAL_KEYS)} groups of equal keys and 4 others, len(store) = {len(s)}: "
        f"{sorted(map(repr, s))}"
    )
    for group, sd in last.items():
        for k in group:
            assert k in s, f"{k!r} is not in the store, though an equal key is"
            assert value_digest(h.device, s[k]) == seed_digest(sd, N), (
                f"store[{k!r}] must return the value last stored under any of {group}"
            )
    for group in EQUAL_KEYS:
        del s[group[-1]]
        assert group[0] not in s, f"deleting {group[-1]!r} must delete {group[0]!r}: it is one key"
    h.check(_pressure(h, seed=9500))
    for k in list(s):
        del s[k]
    h.check(set())

    for i, k in enumerate(COLLIDING_KEYS):
        s[k] = h.value(N, seed=500 + i)
    keys = set(COLLIDING_KEYS) | _pressure(h, seed=9700)
    h.check(keys)
    assert len(s) == len(keys), f"{len(keys)} distinct keys, len(store) = {len(s)}"
    for i, k in enumerate(COLLIDING_KEYS):
        assert value_digest(h.device, s[k]) == seed_digest(500 + i, N), (
            f"store[{k!r}] returned another key's value (its str/repr collides with another key)"
        )
    h.check(keys)


ODD_KEYS = (
    "a/b",
    "a/b/../c",
    "..",
    ".",
    "../escape",
    "../../escape",
    "/etc/passwd-like",
    "~",
    "x" * 300,
    "odd \x01\x1f\x7f é ☃ \t\n\r ",
    ("tuple", "../t", "/"),
    b"../bytes",
    "CON",
    "",
)


@conformance_id("STORE-KEY-002", clause=("1.11", "9.2"))
@requires("store", "store.spill.disk")
def test_any_key_stays_inside_spill_dir(impl, make_store, tmp_path):
    """Keys with '/', '..', an absolute-looking path, '~', 300 characters, control and
    non-ASCII characters, an empty string, tuples and bytes of those: each is stored, spilled
    to disk and read back, and no file or directory appears outside spill_dir."""
    kw = {"host_limit": 0} if "store.limit.host" in impl.capabilities else {}
    h = make_store(**kw)
    outside = tmp_path.parent

    def around():
        listing = {}
        for root, dirs, files in os.walk(outside):
            if root.startswith(h.env.spill_dir):
                dirs[:] = []
                continue
            for name in dirs + files:
                listing[os.path.join(root, name)] = None
        return set(listing)

    before = around()
    for i, k in enumerate(ODD_KEYS):
        h.store[k] = h.value(N, seed=i)
    keys = set(ODD_KEYS) | _pressure(h, count=6)
    snap = h.check(keys)
    on_disk = [k for k in ODD_KEYS if snap.tiers[k] == "disk"]
    assert on_disk or not kw, f"with a host limit of 0 the odd keys belong on disk: {snap.tiers}"
    for i, k in enumerate(ODD_KEYS):
        assert value_digest(h.device, h.store[k]) == seed_digest(i, N), f"{k!r} came back wrong"
        h.check(keys)
    for k in ODD_KEYS:
        del h.store[k]
    created = around() - before
    assert not created, f"files or directories created outside spill_dir: {sorted(created)}"
    h.check(keys - set(ODD_KEYS))
    assert all(p.startswith(h.env.spill_dir) for p in files_under(h.env.spill_dir))
