"""Values come back exactly from every tier: dtype (byte order included), shape, content and
memory order of arrays, 0-d and zero-size arrays, views, and the containers around them."""

from __future__ import annotations

import dataclasses
from collections import namedtuple

import numpy as np
import pyarrow as pa

from conformance import conformance_id, not_exercised, requires
from conformance.api import evict
from conformance.store.harness import (
    LIMIT,
    digest,
    host_bytes,
    seed_digest,
    value_digest,
)

Pair = namedtuple("Pair", "left right")


@dataclasses.dataclass
class Record:
    name: str
    data: object
    extra: object = None


def _dtypes(device_kind):
    names = ["u1", "i8", "<f8", "f2", "c16", "?"]
    if device_kind == "sim":  # CuPy holds neither datetimes nor a non-native byte order
        names += ["M8[ns]", "m8[us]", ">i4", ">f8", ">u2", ">c8", ">M8[ns]"]
    return names


def _host(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    raw = rng.integers(0, 1 << 30, n)
    if np.dtype(dtype).kind == "b":
        data = raw % 2 == 1
    elif np.dtype(dtype).kind == "c":
        data = raw + 1j * raw[::-1]
    elif np.dtype(dtype).kind == "f":
        data = raw / 7.0
    else:
        data = raw % 200
    return np.asarray(data).astype(dtype).reshape(shape)


def _tier_stores(impl, make_store, host_limit=0):
    """(tier name, harness): a store whose spilled values sit on host, and one on disk."""
    out = [("host", make_store())]
    if {"store.limit.host", "store.spill.disk"} <= impl.capabilities:
        out.append(("disk", make_store(host_limit=host_limit)))
    return out


def _push_out(h, keys, sizes=None):
    """A value of exactly the limit evicts every other device value (zero-size ones may stay:
    they take no room); then it is deleted. Returns the keys still on the device."""
    h.store["__pressure__"] = h.value(LIMIT, seed=1)
    snap = h.check(set(keys) | {"__pressure__"})
    sizes = sizes or {}
    still = sorted(repr(k) for k in keys if snap.tiers[k] == "device" and sizes.get(k, 1))
    del h.store["__pressure__"]
    return still


def _same_array(h, got, want, where):
    """None when ``got`` (from the store) is ``want`` (a host array) exactly, else why not."""
    if not h.device.is_device_array(got):
        return f"{where}: came back as {type(got).__name__}, not a device array"
    host = h.device.to_host(got)
    if host.dtype.str != want.dtype.str:
        return f"{where}: dtype {host.dtype.str}, stored {want.dtype.str}"
    if host.shape != want.shape:
        return f"{where}: shape {host.shape}, stored {want.shape}"
    if np.ascontiguousarray(host).tobytes() != np.ascontiguousarray(want).tobytes():
        return f"{where}: content differs"
    return None


@conformance_id("STORE-VALUE-001", clause=("2.1", "2.3"))
@requires("store")
def test_arrays_come_back_exactly_from_every_tier(impl, make_store, device_kind):
    """Arrays of every numeric dtype (both byte orders on sim), 0-d, zero-size and 2-D arrays,
    and strided, reversed and transposed views of a larger allocation are stored, pushed off
    the device (to host, then with a host limit of 0 to disk) and read back: each must be a
    device array with the stored dtype (byte order included), shape and content."""
    for tier, h in _tier_stores(impl, make_store):
        s = h.store
        want = {}
        for i, dt in enumerate(_dtypes(device_kind)):
            for shape in ((), (0,), (3, 0), (7,), (5, 6)):
                want[f"{dt}{shape}"] = _host(dt, shape, seed=i)
        for k, w in want.items():
            s[k] = h.device.asarray(w)
        base = _host("<i4", (8, 10), seed=99)
        views = {
            "step2": (slice(None, None, 2), slice(None)),
            "reverse": (slice(None, None, -1), slice(None, None, -3)),
            "block": (slice(2, 6), slice(3, 9)),
        }
        dev_base = h.device.asarray(base)
        for name, idx in views.items():
            s[name] = dev_base[idx]
            want[name] = base[idx]
        s["transpose"] = dev_base.T
        want["transpose"] = base.T
        del dev_base
        still = _push_out(h, want, {k: w.nbytes for k, w in want.items()})
        assert not still, f"{tier}: a value of exactly the limit left {still} on the device"
        wrong = [
            why
            for k, w in want.items()
            if (why := _same_array(h, s[k], w, f"{k!r} from {tier}")) is not None
        ]
        assert not wrong, f"{len(wrong)} of {len(want)} values came back changed: " + "; ".join(
            wrong[:8]
        )
        h.check(want)


@conformance_id("STORE-VALUE-002", clause="2.2")
@requires("store")
def test_memory_order_survives_every_tier(impl, make_store):
    """A C-contiguous array comes back C-contiguous, a Fortran-contiguous one (here the
    transpose of a C array) Fortran-contiguous, from host and from disk."""
    for tier, h in _tier_stores(impl, make_store):
        c = _host("<f8", (6, 9), seed=1)
        h.store["c"] = h.device.asarray(c)
        h.store["f"] = h.device.asarray(np.ascontiguousarray(c.T)).T  # F-contiguous on device
        assert h.store["f"].flags.f_contiguous, "setup: the device array is not F-contiguous"
        still = _push_out(h, ["c", "f"])
        assert not still, f"{tier}: {still} stayed on the device"
        got_c, got_f = h.store["c"], h.store["f"]
        assert _same_array(h, got_c, c, "c") is None and _same_array(h, got_f, c, "f") is None
        assert got_c.flags.c_contiguous, f"a C-contiguous array came back from {tier} otherwise"
        assert got_f.flags.f_contiguous, (
            f"a Fortran-contiguous array came back from {tier} with flags "
            f"C={got_f.flags.c_contiguous} F={got_f.flags.f_contiguous}"
        )
        del got_c, got_f
        h.check({"c", "f"})


def _containers(h):
    """(value to store, expected: the same structure with host arrays for device arrays)."""
    a, b, c = (_host("<i4", (1024,), seed=s) for s in (1, 2, 3))
    d = lambda x: h.device.asarray(x)  # noqa: E731
    store = {
        "tuple": (d(a), "meta", 5),
        "list": [d(a), [d(b), 2.5], None],
        "dict": {"x": d(a), "y": {"z": d(b)}, "n": 1},
        "namedtuple": Pair(d(a), Pair("h", d(b))),
        "dataclass": Record("r", d(a), extra=[d(b), {"c": d(c)}]),
        "mixed": {"rows": [Pair(d(a), Record("in", (d(b), b"raw")))], "t": (d(c),)},
    }
    want = {
        "tuple": (a, "meta", 5),
        "list": [a, [b, 2.5], None],
        "dict": {"x": a, "y": {"z": b}, "n": 1},
        "namedtuple": Pair(a, Pair("h", b)),
        "dataclass": Record("r", a, extra=[b, {"c": c}]),
        "mixed": {"rows": [Pair(a, Record("in", (b, b"raw")))], "t": (c,)},
    }
    return store, want


def _compare(h, got, want, path):
    if isinstance(want, np.ndarray):
        return [] if (why := _same_array(h, got, want, path)) is None else [why]
    if type(got) is not type(want):
        return [f"{path}: {type(got).__name__}, stored {type(want).__name__}"]
    if dataclasses.is_dataclass(want):
        return [
            e
            for f in dataclasses.fields(want)
            for e in _compare(h, getattr(got, f.name), getattr(want, f.name), f"{path}.{f.name}")
        ]
    if isinstance(want, (list, tuple)):
        if len(got) != len(want):
            return [f"{path}: length {len(got)}, stored {len(want)}"]
        return [
            e
            for i, (g, w) in enumerate(zip(got, want, strict=True))
            for e in _compare(h, g, w, f"{path}[{i}]")
        ]
    if isinstance(want, dict):
        if set(got) != set(want):
            return [f"{path}: keys {sorted(got)}, stored {sorted(want)}"]
        return [e for k in want for e in _compare(h, got[k], want[k], f"{path}[{k!r}]")]
    return [] if got == want else [f"{path}: {got!r}, stored {want!r}"]


@conformance_id("STORE-VALUE-003", clause=("2.4", "3.1"))
@requires("store")
def test_containers_come_back_exactly_from_every_tier(impl, make_store):
    """Tuples, lists, dicts, namedtuples and dataclass instances, nested in any mix, holding
    device arrays and host members: counted on the device while there (the ledger agrees),
    pushed off it, and read back with the same types, structure, host members and arrays."""
    # The host members (strings, numbers) stay in memory with their structure: a host limit
    # of 4 KiB holds them, while every 4 KiB array goes on to disk.
    for tier, h in _tier_stores(impl, make_store, host_limit=4096):
        store, want = _containers(h)
        h.store.update(store)
        del store
        h.check(want)  # device arrays inside any container are the store's: ledger == inspect
        still = _push_out(h, want)
        assert not still, f"{tier}: {still} stayed on the device (their arrays never spilled?)"
        wrong = [e for k in want for e in _compare(h, h.store[k], want[k], k)]
        assert not wrong, f"from {tier}: " + "; ".join(wrong[:8])
        h.check(want)


@conformance_id("STORE-ALIAS-002", clause=("2.6", "3.2"))
@requires("store", "store.alias.dedup")
def test_aliases_spill_and_come_back_consistently(harness):
    h, s = harness, harness.store
    base = h.value(LIMIT // 2, seed=1)
    s["base"], s["view"] = base, base[: LIMIT // 4]
    del base
    for i in range(4):  # push the pair out
        s[f"f{i}"] = h.value(LIMIT // 3, seed=10 + i)
        h.check({"base", "view"} | {f"f{j}" for j in range(i + 1)})
    keys = {"base", "view"} | {f"f{j}" for j in range(4)}
    got = s["view"]
    assert value_digest(h.device, got) == digest(host_bytes(1, LIMIT // 2)[: LIMIT // 4])
    del got
    h.check(keys)
    got = s["base"]
    assert value_digest(h.device, got) == seed_digest(1, LIMIT // 2)
    del got
    h.check(keys)


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


ROWS = 600


def _arrow(seed: int) -> pa.Table:
    ints = [None if (i + seed) % 7 == 0 else i * (seed + 1) for i in range(ROWS)]
    return pa.table(
        {
            "k": pa.array(ints, pa.int64()),
            "x": pa.array([float(i) / (seed + 3) for i in range(ROWS)], pa.float64()),
            "s": pa.array([None if i % 11 == 0 else f"s{seed}-{i}" * (i % 4) for i in range(ROWS)]),
        }
    )


def _table(h, seed: int):
    from reference_impl import Table

    return Table.from_arrow(_arrow(seed), h.device)


def _allocs(t) -> int:
    return sum(n for _aid, n in t.allocations())


@conformance_id("STORE-TABLE-001", clause=("2.7", "3.8", "3.1"))
@requires("store", "store.table", "store.evict.manual")
def test_tables_come_back_from_every_tier_counted_once(impl, make_store):
    """Tables of int64 with nulls, float64 and strings with nulls are stored, spilled (to host,
    and to disk where the store has one) and read back equal. Each counts the sum of its distinct
    device allocations, and a zero-copy slice and a column selection of a stored table, stored
    under other keys, share its buffers: counted once (3.2)."""
    disk = {"store.limit.host", "store.spill.disk"} <= impl.capabilities
    h = make_store(host_limit=LIMIT // 2) if disk else make_store()
    s = h.store
    tables = {f"t{i}": _table(h, i) for i in range(3)}
    need = sum(_allocs(t) for t in tables.values())
    if need > h.limit:
        not_exercised(f"three tables need {need:,} device bytes, over the limit {h.limit:,}")
    for k in tables:
        s[k] = tables[k]
    s["t0-rows"] = tables["t0"].slice(100, 400)
    s["t1-cols"] = tables["t1"].select(["s", "k"])
    keys = set(tables) | {"t0-rows", "t1-cols"}
    snap = h.check(keys)
    assert snap.device_bytes == need, (
        f"three tables of {need:,} device bytes in all (a slice and a selection sharing their "
        f"buffers) are counted as {snap.device_bytes:,}"
    )
    expect = {k: _arrow(i) for i, k in enumerate(tables)}
    expect["t0-rows"] = expect["t0"].slice(100, 300)
    expect["t1-cols"] = expect["t1"].select(["s", "k"])
    del tables
    tiers_seen = set()
    for _round in range(2):
        evict(h.adapter, s, 4 * LIMIT)
        tiers_seen |= set(h.snapshot().tiers.values())
        h.check(keys)
        for k, want in expect.items():
            got = s[k].to_arrow()
            assert got.equals(want), f"table {k} came back different after a spill to {tiers_seen}"
        h.check(keys)
    if tiers_seen <= {"device"}:
        not_exercised("evict moved no table off the device")


@conformance_id("STORE-TABLE-002", clause=("2.7", "3.8", "3.1", "6.1"))
@requires("store", "store.table", "store.evict.manual")
def test_tables_without_rows_or_columns_come_back(impl, make_store):
    """A table without rows (buffers of 0 bytes) and one without columns (no device buffer at
    all: what a partition is once every column was projected away) are stored, spilled (to
    disk where the store has one) and read back equal, counting the 0 device bytes they hold;
    under a device limit of 0, read back, the one without columns is on the device (it fits).
    (Mutants of the reference failed to store a value of no allocation at all, and sized it 1
    byte, so that it never came back to a device limit of 0.)"""
    from reference_impl import Table

    disk = {"store.limit.host", "store.spill.disk"} <= impl.capabilities
    h = make_store(host_limit=0) if disk else make_store()
    s = h.store
    expect = {"no-rows": _arrow(0).slice(0, 0), "no-columns": pa.table({})}
    for k, want in expect.items():
        s[k] = Table.from_arrow(want, h.device)
    s["rows"] = _table(h, 1)
    keys = set(expect) | {"rows"}
    h.check(keys)
    for _round in range(2):
        evict(h.adapter, s, 4 * LIMIT)
        h.check(keys)
        for k, want in expect.items():
            got = s[k].to_arrow()
            assert got.equals(want), f"table {k} came back as {got.schema} with {got.num_rows} rows"
        h.check(keys)
    for k in keys:
        del s[k]
    snap = h.check(set())
    assert (snap.device_bytes, snap.host_bytes, snap.disk_bytes) == (0, 0, 0), snap
    if "store.unspill.on_access" in impl.capabilities:
        # 0 device bytes fit a device limit of 0: read back, the table is on the device (6.1)
        zero = make_store(device_limit=0, capacity=4 * LIMIT)
        zero.store["no-columns"] = Table.from_arrow(pa.table({}), zero.device)
        evict(zero.adapter, zero.store, 1)
        assert zero.store["no-columns"].to_arrow().equals(pa.table({}))
        tier = zero.check({"no-columns"}).tiers["no-columns"]
        assert tier == "device", (
            f"a table of 0 device bytes, read back under a device limit of 0, is on {tier}: it fits"
        )
