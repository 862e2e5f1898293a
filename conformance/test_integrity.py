"""Tampered or truncated spill files: an error naming the key, raised before deserializing."""

from __future__ import annotations

import os
import pickle

import pytest

from conformance import conformance_id, not_exercised, requires
from conformance.harness import LIMIT, files_under, seed_digest, value_digest


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
@requires("store", "store.spill.disk", "store.integrity")
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
@requires("store", "store.spill.disk", "store.integrity")
def test_truncated_file_detected(impl, make_store):
    h, keys, on_disk, files = _disk_keys(impl, make_store)
    path = max(files, key=files.get)
    os.truncate(path, files[path] // 3)
    errors = _read_all(h, keys)
    _check_damage(h, keys, errors)


class _Tripwire:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@conformance_id("STORE-INTEG-003", clause="10.5")
@requires("store", "store.spill.disk", "store.integrity")
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
