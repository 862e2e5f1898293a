"""The MutableMapping contract, with device values."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from conformance import conformance_id, requires
from conformance.store.harness import LIMIT, seed_digest, value_digest


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


@conformance_id("STORE-MAP-006", clause="2.4")
@requires("store")
def test_nested_values_round_trip(harness):
    h, s = harness, harness.store
    a, b, c = h.value(1000, 1), h.value(2000, 2), h.value(3000, 3)
    s["nested"] = {"a": a, "rest": [b, (c, "meta", 5)]}
    del a, b, c
    out = s["nested"]
    assert (
        isinstance(out, dict)
        and isinstance(out["rest"], list)
        and isinstance(out["rest"][1], tuple)
    )
    assert out["rest"][1][1:] == ("meta", 5)
    assert value_digest(h.device, out["a"]) == seed_digest(1, 1000)
    assert value_digest(h.device, out["rest"][0]) == seed_digest(2, 2000)
    assert value_digest(h.device, out["rest"][1][0]) == seed_digest(3, 3000)
    del out
    h.check({"nested"})


@conformance_id("STORE-MAP-007", clause=("2.5", "3.7"))
@requires("store")
def test_host_objects_stay_as_they_are(harness):
    h, s = harness, harness.store
    objs = {"bytes": b"x" * 1000, "str": "hello", "dict": {"a": [1, 2]}, "np": np.arange(10)}
    s.update(objs)
    for k, v in objs.items():
        got = s[k]
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(np.asarray(got), v)
        else:
            assert got == v
    snap = h.check(objs)
    assert snap.device_bytes == 0, "host objects must not be counted as device bytes"


@conformance_id("STORE-MAP-008", clause="11.1")
@requires("store")
def test_stores_are_isolated(make_store):
    """Two stores (own spill_dir each) share no state: no class-level singletons."""
    h1, h2 = make_store(), make_store()
    for i in range(6):
        h1.store[f"k{i}"] = h1.value(LIMIT // 2, seed=i)
    h2.store["k0"] = h2.value(100, seed=99)
    h1.check({f"k{i}" for i in range(6)})
    h2.check({"k0"})
    assert value_digest(h2.device, h2.store["k0"]) == seed_digest(99, 100)
    assert value_digest(h1.device, h1.store["k0"]) == seed_digest(0, LIMIT // 2)
    assert h2.snapshot().device_bytes == 100


@conformance_id("STORE-MAP-011", clause=("11.8", "3.1", "3.4"))
@requires("store", "store.alias.dedup", "store.evict.manual")
def test_a_value_from_another_store(impl, make_store):
    """Store B (same device) is given a value store A handed out: first while A is open and
    the value on the device, then after A spilled it and was closed. Each time B must either
    refuse it, changing neither store, or hold it so that it reads back exactly and every
    allocation is counted once across both stores."""
    from conformance.api import evict

    a = make_store()
    b = make_store(device=a.device)
    n = LIMIT // 4
    a.store["k"] = a.value(n, seed=1)
    a.store["s"] = a.value(n, seed=2)
    v = a.store["k"]
    accepted = []
    try:
        b.store["x"] = v
        accepted.append("x")
    except Exception:  # refusing is allowed; changing something is not
        pass
    sb = b.check(set(accepted), held=a.snapshot().device_bytes)
    a.check({"k", "s"}, held=sb.device_bytes)
    if accepted:
        assert value_digest(b.device, b.store["x"]) == seed_digest(1, n), "B's copy reads back wrong"
    w = a.store["s"]
    evict(a.adapter, a.store, 4 * LIMIT)
    spilled_on = a.snapshot().tiers["s"]
    a.close(check=False)
    try:
        b.store["y"] = w
        accepted.append("y")
    except Exception:
        pass
    del v, w
    gc.collect()
    b.check(set(accepted))
    if "y" in accepted:
        assert value_digest(b.device, b.store["y"]) == seed_digest(2, n), (
            f"a value from a closed store (it was on {spilled_on}) reads back wrong from B"
        )


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
