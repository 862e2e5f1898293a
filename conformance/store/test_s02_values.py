"""Values come back exactly from every tier: dtype (byte order included), shape, content and
memory order of arrays, 0-d and zero-size arrays, views, and the containers around them."""

from __future__ import annotations

import dataclasses
from collections import namedtuple

import numpy as np

from conformance import conformance_id, requires
from conformance.store.harness import LIMIT

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
