"""Tampered or truncated spill files: an error naming the key, raised before deserializing."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from conformance import conformance_id, not_exercised, requires
from conformance.store.harness import LIMIT, files_under, seed_digest, value_digest


def _disk_keys(impl, make_store, count=6):
    h = (
        make_store(host_limit=LIMIT // 4)
        if "store.limit.host" in impl.capabilities
        else make_store()
    )
    keys = {f"key-{i}": i for i in range(count)}
    for k, i in keys.items():
        h.store[k] = h.value(LIMIT // 3, seed=i)
    snap = h.check(keys)
    on_disk = [k for k, t in snap.tiers.items() if t == "disk"]
    files = files_under(h.env.spill_dir)
    assert on_disk and files, f"nothing on disk: {dict(snap.tiers)}"
    return h, keys, on_disk, files


def _read_all(h, keys):
    """Read every key; return {key: exception} for the failures."""
    errors = {}
    for k, i in keys.items():
        try:
            v = h.store[k]
            assert value_digest(h.device, v) == seed_digest(i, LIMIT // 3), f"{k} came back wrong"
        except AssertionError:
            raise
        except Exception as exc:
            # keep only text: a live traceback would keep the failed proxy (and its file) alive
            errors[k] = f"{type(exc).__name__}: {exc}"
    return errors


def _check_damage(h, keys, errors):
    if not errors:
        not_exercised(
            "every key read back intact: the damaged file was never read, or its damage "
            "changed nothing the store returned"
        )
    assert len(errors) == 1, f"one damaged file must fail exactly one key, got {errors!r}"
    ((bad, exc),) = errors.items()
    assert bad in exc, f"the error must name the key {bad!r}: {exc}"
    del h.store[bad]
    keys.pop(bad)
    assert not _read_all(h, keys), "undamaged keys must still read back"
    h.check(keys)


@conformance_id("STORE-INTEG-001", clause=("10.1", "10.6"))
@requires("store", "store.spill.disk")
def test_flipped_byte_detected(impl, make_store):
    h, keys, on_disk, files = _disk_keys(impl, make_store)
    path = max(files, key=files.get)
    with open(path, "r+b") as f:
        f.seek(files[path] // 2)
        b = f.read(1)
        f.seek(files[path] // 2)
        f.write(bytes([b[0] ^ 0xFF]))
    _check_damage(h, keys, _read_all(h, keys))


@conformance_id("STORE-INTEG-002", clause=("10.2", "10.6"))
@requires("store", "store.spill.disk")
def test_truncated_file_detected(impl, make_store):
    h, keys, on_disk, files = _disk_keys(impl, make_store)
    path = max(files, key=files.get)
    os.truncate(path, files[path] // 3)
    errors = _read_all(h, keys)
    _check_damage(h, keys, errors)


@conformance_id("STORE-INTEG-006", clause=("10.7", "10.2", "10.6"))
@requires("store", "store.spill.disk")
@pytest.mark.parametrize("damage", ["removed", "emptied"])
def test_removed_or_emptied_file_detected(impl, make_store, damage):
    """Someone else removes a spill file, or truncates it to zero bytes (a scratch-directory
    cleaner, a full disk's repair): reading its key must raise an error naming the key, never
    return an empty or other value, and every other key still reads back."""
    h, keys, on_disk, files = _disk_keys(impl, make_store)
    path = max(files, key=files.get)
    if damage == "removed":
        os.unlink(path)
    else:
        os.truncate(path, 0)
    h.disk_accounting = False  # the store counted the file it wrote; judged after the delete
    errors = _read_all(h, keys)
    _check_damage(h, keys, errors)


class _Tripwire:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@conformance_id("STORE-INTEG-003", clause="10.5")
@requires("store", "store.spill.disk", "store.spill.authenticated")
def test_check_runs_before_deserializing(impl, make_store, tmp_path):
    h, keys, on_disk, files = _disk_keys(impl, make_store)
    marker = tmp_path / "tripwire"
    payload = pickle.dumps(_Tripwire(str(marker)))
    path = max(files, key=files.get)
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        for off in range(0, len(data) - len(payload), max(1, len(data) // 4)):
            data[off : off + len(payload)] = payload
        f.seek(0)
        f.write(bytes(data))
    errors = _read_all(h, keys)
    assert not marker.exists(), "a tampered file was deserialized before its check"
    _check_damage(h, keys, errors)
    with pytest.raises(KeyError):
        h.store[next(iter(errors))]


# --------------------------------------------------------------------------- after the header
TRIPWIRE_OFFSETS = (8, 16, 24, 32, 40, 48, 56, 64, 96, 128, "middle", "before-tag", "end")


def _offset(where, size, length):
    if where == "middle":
        off = size // 2
    elif where == "before-tag":
        off = size - length - 32
    elif where == "end":
        off = size - length
    else:
        off = where
    return off if 8 <= off <= size - length else None


def _plant(files, payload, where):
    """Write ``payload`` into every file at ``where``, keeping its first 8 bytes (the magic)."""
    planted = 0
    for path, size in files.items():
        off = _offset(where, size, len(payload))
        if off is None:
            continue
        with open(path, "r+b") as f:
            f.seek(off)
            f.write(payload)
        planted += 1
    return planted


def _reads(h, held):
    """Every path that reads spill data back, each on its own key (or held value)."""
    s = h.store

    def use(v):
        return np.asarray(v).sum()

    paths = {
        "store['g']": (lambda: s["g"], "g"),
        "store.pop('o')": (lambda: s.pop("o"), "o"),
        "store['hv'] (a host-only value)": (lambda: s["hv"], "hv"),
        "list(store.values())": (lambda: list(s.values()), None),
        "a use of a spilled value the test held": (lambda: use(held["u"]), None),
    }
    if "store.pickle" in h.caps:
        paths["pickle.dumps(spilled value), loads, use"] = (
            lambda: use(pickle.loads(pickle.dumps(held["p"]))),
            None,
        )
    return paths


@conformance_id("STORE-INTEG-004", clause=("10.5", "10.1"))
@requires("store", "store.spill.disk", "store.limit.host", "store.spill.authenticated")
def test_no_read_path_deserializes_before_authenticating(make_store, tmp_path):
    """A pickle tripwire is written into every spill file at one offset after the magic (8, 16,
    ..., 128 bytes, the middle, just before a 32-byte tag, the very end; one store per offset).
    Then every read path runs on its own key: get, pop, a host-only value, values(), the use
    of a spilled value the test held, and pickling one. Each must raise (get and pop naming
    the key); the tripwire must never run."""
    marker = tmp_path / "tripwire"
    payload = pickle.dumps(_Tripwire(str(marker)))
    third = LIMIT // 3
    ran = 0
    for where in TRIPWIRE_OFFSETS:
        h = make_store(host_limit=0)
        s = h.store
        for i, k in enumerate(("g", "o", "u", "p")):
            s[k] = h.value(third, seed=i)
        s["hv"] = np.arange(2000)  # a host-only value: with a host limit of 0, on disk
        held = {"u": s["u"], "p": s["p"]}
        for i in range(4):
            s[f"f{i}"] = h.value(third, seed=10 + i)  # push everything else out to disk
        snap = h.check(set(s))
        assert all(snap.tiers[k] == "disk" for k in ("g", "o", "u", "p", "hv")), dict(snap.tiers)
        if not _plant(files_under(h.env.spill_dir), payload, where):
            continue
        failures = []
        for what, (read, key) in _reads(h, held).items():
            try:
                got = read()
            except Exception as exc:  # noqa: BLE001 - any error is fine, as long as it is one
                text = f"{type(exc).__name__}: {exc}"
                if key is not None and key not in text:
                    failures.append(f"{what}: the error does not name the key: {text}")
            else:
                failures.append(f"{what}: returned {type(got).__name__} from a tampered file")
                del got
            assert not marker.exists(), (
                f"tripwire at offset {where!r}: {what} deserialized a tampered spill file "
                f"before authenticating it"
            )
            ran += 1
        assert not failures, f"tripwire at offset {where!r}: " + "; ".join(failures)
        held.clear()
        for k in list(s):
            del s[k]
        h.check(set())
        h.close()
    if not ran:
        not_exercised("no spill file was large enough to plant the tripwire in")


# --------------------------------------------------------------------------- bound to key, store
def _one_file_per_key(h, values):
    """Store each value straight to disk; return {key: its one new file}."""
    out = {}
    for k, v in values.items():
        before = set(files_under(h.env.spill_dir))
        h.store[k] = v
        new = set(files_under(h.env.spill_dir)) - before
        if len(new) != 1:
            not_exercised(f"storing {k!r} straight to disk made {len(new)} files, not one")
        out[k] = new.pop()
    return out


def _swap(a, b):
    with open(a, "rb") as f:
        da = f.read()
    with open(b, "rb") as f:
        db = f.read()
    with open(a, "wb") as f:
        f.write(db)
    with open(b, "wb") as f:
        f.write(da)


def _read_error(h, key, wrong_digest):
    try:
        got = value_digest(h.device, h.store[key])
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"
    assert got != wrong_digest, f"store[{key!r}] returned the value of another file"
    raise AssertionError(f"store[{key!r}] read a file that is not its own without an error")


@conformance_id("STORE-INTEG-005", clause=("10.3", "10.4"))
@requires("store", "store.spill.disk", "store.limit.host", "store.spill.authenticated")
def test_authentication_binds_content_to_key_and_store(make_store):
    """Two authentic spill files swapped between keys a and b, and a store's file replaced by
    another store's (same key, same size), must each be detected: the read raises an error
    naming the key and never returns the other value."""
    n = LIMIT // 8
    h = make_store(device_limit=0, capacity=4 * LIMIT, host_limit=0)
    files = _one_file_per_key(h, {"a": h.value(n, seed=1), "b": h.value(n, seed=2)})
    _swap(files["a"], files["b"])
    for key, other in (("a", 2), ("b", 1)):
        err = _read_error(h, key, seed_digest(other, n))
        assert repr(key) in err or key in err, f"the error must name the key {key!r}: {err}"
    for k in ("a", "b"):
        del h.store[k]
    h.check(set())

    one = make_store(device_limit=0, capacity=4 * LIMIT, host_limit=0)
    two = make_store(device_limit=0, capacity=4 * LIMIT, host_limit=0, device=one.device)
    src = _one_file_per_key(one, {"x": one.value(n, seed=3)})["x"]
    dst = _one_file_per_key(two, {"x": two.value(n, seed=4)})["x"]
    with open(src, "rb") as f:
        data = f.read()
    with open(dst, "wb") as f:
        f.write(data)
    err = _read_error(two, "x", seed_digest(3, n))
    assert "x" in err, f"the error must name the key 'x': {err}"
    assert value_digest(one.device, one.store["x"]) == seed_digest(3, n)
    del two.store["x"]
    two.check(set())
