"""The store keeps a clean copy: a value read back from disk keeps its file until evicted again.

Only values of an immutable type (``DeviceType.immutable``: the reference Table) keep one; a
device array is written in place (SPEC 13.1), so its file goes when it is read back. A clean
copy counts in ``disk_bytes`` while it exists (it is a file in the spill directory, SPEC 3.5)
and is reused by the value's next spill to disk: nothing serialized, nothing written. Every
test here ties the store's totals to the files and the ledger with the reference's own
invariant check (``store_invariants.check_store``).

A host value keeps no clean copy (the caller may change it in place unseen), but during the
read that brings it back its file is kept: a host limit too small for it sends it straight
back, on that file, before the caller has it (the tests at the end).
"""

from __future__ import annotations

import gc
import os
import random

import numpy as np
import pyarrow as pa
import pytest
from store_invariants import check_store

from conftest import NB
from reference_impl import ProxifyHostFile, Table
from reference_impl.store import SpillIntegrityError, SpillWarning, state_of
from reference_impl.store.disk import SpillDir
from reference_impl.store.dispatch import ArrayType
from reference_impl.table.spill import TableType

ROWS = 300
BIG = 1 << 30


def _arrow(seed: int, rows: int = ROWS) -> pa.Table:
    return pa.table(
        {
            "k": pa.array([None if (i + seed) % 7 == 0 else i * (seed + 1) for i in range(rows)]),
            "x": pa.array([float(i) / (seed + 3) for i in range(rows)], pa.float64()),
            "s": pa.array([None if i % 11 == 0 else f"s{seed}-{i}" * (i % 4) for i in range(rows)]),
        }
    )


def _table(dev, seed: int, rows: int = ROWS) -> Table:
    return Table.from_arrow(_arrow(seed, rows), dev)


def _paths(s) -> list[str]:
    return sorted(os.path.join(s.spill_dir, f) for f in os.listdir(s.spill_dir))


def _stamp(path: str) -> tuple[int, ...]:
    st = os.stat(path)
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _check(s, dev) -> None:
    """The invariant, with the ledger: call only while the test holds no raw device object."""
    try:
        check_store(s, dev.bytes_in_use())
    except AssertionError:
        gc.collect()  # cyclic garbage may still hold device memory (as the harness does)
        check_store(s, dev.bytes_in_use())


def _flip(path: str, at: int = 100) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x5A]))


@pytest.fixture
def kept(dev, make_store):
    """A store holding table "t" back on the device after a round trip to disk: its file kept."""
    s = make_store(device_memory_limit=BIG, memory_limit=0)
    s["t"] = _table(dev, 1)
    assert s.evict(1) > 0 and s.tier_of("t") == "disk"
    (path,) = _paths(s)
    assert s["t"].to_arrow().equals(_arrow(1))
    assert s.tier_of("t") == "device" and _paths(s) == [path], "the read kept no clean copy"
    st = s.stats()
    assert st["disk_clean_bytes"] == st["disk_bytes"] == os.path.getsize(path)
    _check(s, dev)
    return s, path


# --- reuse ---------------------------------------------------------------------------------
def test_a_table_read_back_from_disk_is_evicted_again_without_a_write(dev, kept):
    s, path = kept
    written, stamp = s.stats()["disk_written_bytes"], _stamp(path)
    assert written == os.path.getsize(path)
    assert s.evict(1) > 0 and s.tier_of("t") == "disk"
    st = s.stats()
    assert st["disk_written_bytes"] == written, "evicting a clean table wrote it again"
    assert (st["disk_reused_bytes"], st["disk_reuse_count"]) == (written, 1)
    assert _paths(s) == [path] and _stamp(path) == stamp, "the kept file was rewritten"
    assert (st["host_bytes"], st["disk_bytes"], st["disk_clean_bytes"]) == (0, written, 0)
    _check(s, dev)
    assert s["t"].to_arrow().equals(_arrow(1))
    _check(s, dev)


def test_a_clean_table_goes_straight_to_disk_even_with_room_on_host(dev, kept):
    s, path = kept
    s.memory_limit = BIG
    freed = s.evict(1)
    st = s.stats()
    assert freed > 0 and s.tier_of("t") == "disk" and st["host_bytes"] == 0
    assert st["disk_reuse_count"] == 1 and st["spill_count"] == 2
    _check(s, dev)


def test_reading_every_output_back_writes_nothing(dev, make_store):
    """The issue's case: outputs on disk, read back one by one on a device that holds two;
    each read evicts an older one, which goes back to its own file."""
    size = _table(dev, 0).nbytes
    s = make_store(device_memory_limit=2 * size + size // 2, memory_limit=0)
    for i in range(6):
        s[f"t{i}"] = _table(dev, i)
    s.evict(BIG)
    assert set(s.snapshot().tiers.values()) == {"disk"}
    written, files = s.stats()["disk_written_bytes"], _paths(s)
    stamps = [_stamp(p) for p in files]
    for _pass in range(2):
        for i in range(6):
            assert s[f"t{i}"].to_arrow().equals(_arrow(i))
            _check(s, dev)
    st = s.stats()
    assert st["disk_written_bytes"] == written, "reading the outputs back wrote them again"
    assert st["disk_reuse_count"] >= 10
    assert _paths(s) == files and [_stamp(p) for p in files] == stamps
    assert st["disk_bytes"] == sum(os.path.getsize(p) for p in files)


def test_a_cascade_reuses_the_clean_member_and_writes_the_other(dev, arr, make_store):
    """One key holding a table and an array: back on the device only the table keeps its file,
    so the key goes to host whole (never split over two tiers), and the cascade then reuses the
    table's file and writes the array's."""
    s = make_store(device_memory_limit=BIG, memory_limit=0)
    s["k"] = (_table(dev, 2), arr(5.0))
    s.evict(1)
    assert s.tier_of("k") == "disk" and len(_paths(s)) == 2
    written = s.stats()["disk_written_bytes"]
    got = s["k"]
    assert got[0].to_arrow().equals(_arrow(2)) and float(np.asarray(got[1])[0]) == 5.0
    del got
    (table_file,) = _paths(s)
    clean = s.stats()["disk_clean_bytes"]
    assert clean == os.path.getsize(table_file)
    _check(s, dev)
    s.memory_limit = BIG
    s.evict(1)
    assert s.tier_of("k") == "host" and s.stats()["disk_clean_bytes"] == clean
    _check(s, dev)
    s.memory_limit = 0
    s.evict(0)  # the cascade
    st = s.stats()
    assert s.tier_of("k") == "disk"
    assert (st["disk_reused_bytes"], st["disk_reuse_count"]) == (clean, 1)
    assert st["disk_written_bytes"] == written + (written - clean), "only the array is written"
    assert table_file in _paths(s) and len(_paths(s)) == 2
    _check(s, dev)
    got = s["k"]
    assert got[0].to_arrow().equals(_arrow(2)) and float(np.asarray(got[1])[0]) == 5.0


def test_an_immutable_alias_keeps_the_clean_copy(dev, kept):
    """A zero-copy slice stored under another key shares the table's buffers: the group goes
    to host (the slice has no file), the table keeps its file for the cascade."""
    s, path = kept
    s["rows"] = s["t"].slice(10, 200)
    assert _paths(s) == [path] and s.stats()["disk_clean_bytes"] == os.path.getsize(path)
    _check(s, dev)
    s.evict(1)
    st = s.stats()
    assert s.tier_of("t") == s.tier_of("rows") == "disk"
    assert st["disk_reuse_count"] == 1 and path in _paths(s)
    _check(s, dev)
    assert s["rows"].to_arrow().equals(_arrow(1).slice(10, 190))
    assert s["t"].to_arrow().equals(_arrow(1))


def test_the_invariant_names_a_clean_copy_that_drifted(dev, arr, kept):
    """The check can fail: each clean-copy fact it ties, broken behind the store's back."""
    s, path = kept
    rec = s._entries["t"].rec
    state = state_of(rec())
    s._accounting.clean_bytes += 1
    with pytest.raises(AssertionError, match="clean_bytes"):
        check_store(s)
    s._accounting.clean_bytes -= 1
    rec.clean_nbytes += 1
    with pytest.raises(AssertionError, match="its clean copy has"):
        check_store(s)
    rec.clean_nbytes -= 1
    stray = os.path.join(s.spill_dir, "stray.spill")
    open(stray, "wb").close()
    with pytest.raises(AssertionError, match="spill_dir holds"):
        check_store(s)
    os.unlink(stray)
    s["a"] = arr(1.0)
    a_state = state_of(s._entries["a"].rec())
    a_state.clean = state.clean
    with pytest.raises(AssertionError, match="a mutable value keeps a clean copy"):
        check_store(s)
    a_state.clean = None
    check_store(s)


# --- in-place writes (SPEC 13.1) ----------------------------------------------------------------
def _written_in_place_then_evicted(s, arr, through_proxy: bool = True) -> np.ndarray:
    """An array read back from disk, written in place (through the proxy, and through a ufunc
    that writes into the raw array), then evicted and read again: what comes back."""
    s["a"] = arr(1.0)
    s.evict(1)
    assert s.tier_of("a") == "disk"
    v = s["a"]
    if through_proxy:
        v[:4] = 9.0  # ProxyObject.__setitem__: the store hears of it (_mutated)
    np.add(v, 1.0, out=v)  # __array_ufunc__ hands out= the raw array: the store sees nothing
    del v
    s.evict(1)
    assert s.tier_of("a") == "disk"
    return np.asarray(s["a"]).copy()


def test_an_array_read_back_keeps_no_clean_copy_and_its_writes_survive(dev, arr, make_store):
    s = make_store(device_memory_limit=BIG, memory_limit=0)
    s["a"] = arr(1.0)
    s.evict(1)
    written = s.stats()["disk_written_bytes"]
    v = s["a"]
    assert _paths(s) == [] and s.stats()["disk_clean_bytes"] == 0, "an array kept its file"
    del v, s["a"]
    want = np.full(NB // 8, 2.0)
    want[:4] = 10.0
    got = _written_in_place_then_evicted(s, arr)
    np.testing.assert_array_equal(got, want)
    assert s.stats()["disk_written_bytes"] > 2 * written  # written anew after the writes
    assert s.stats()["disk_reuse_count"] == 0
    _check(s, dev)


def test_a_clean_copy_of_an_array_would_lose_its_writes(arr, make_store, monkeypatch):
    """Why arrays keep none: declared immutable, the array's file outlives a ufunc's write into
    it (the store drops a clean copy on the proxy's own writes, but this one never passes
    through the proxy). The test above fails so."""
    monkeypatch.setattr(ArrayType, "immutable", True)
    s = make_store(device_memory_limit=BIG, memory_limit=0)
    got = _written_in_place_then_evicted(s, arr, through_proxy=False)
    assert s.stats()["disk_reuse_count"] == 1
    assert got[5] == 1.0, "the write survived: the hazard this test shows is gone"


def test_a_write_through_the_proxy_drops_the_clean_copy(dev, kept):
    """A Table has no mutating API, but its proxy still reports any attribute write: the store
    drops the file rather than trust the type (belt and braces)."""
    s, path = kept
    v = s["t"]
    v._metadata = {b"note": b"changed"}  # a private slot, set through the proxy
    del v
    assert not os.path.exists(path) and s.stats()["disk_clean_bytes"] == 0
    s.evict(1)
    assert s.stats()["disk_reuse_count"] == 0
    assert s["t"].metadata == {b"note": b"changed"}
    _check(s, dev)


def test_a_mutable_alias_of_a_clean_table_drops_its_copy(dev, kept):
    """A column buffer of the table stored as an array shares its memory: a write through it
    changes the table, so the table's file would go stale. It is dropped at once."""
    s, path = kept
    data = s["t"].column("x").data
    s["x"] = data
    del data
    assert _paths(s) == [] and s.stats()["disk_clean_bytes"] == 0, "the clean copy stayed"
    _check(s, dev)
    x = s["x"]
    x[0] = 99.0
    del x
    s.evict(BIG)
    assert s.tier_of("t") == "disk" and s.stats()["disk_reuse_count"] == 0
    assert s["t"].to_arrow().column("x")[0].as_py() == 99.0, "the write through the alias was lost"


# --- the file goes with the value -------------------------------------------------------------
@pytest.mark.parametrize("how", ["del", "pop", "replace", "clear", "popitem", "held", "close"])
def test_the_kept_file_goes_with_the_key(how, dev, kept):
    s, path = kept
    if how == "del":
        del s["t"]
    elif how == "pop":
        assert s.pop("t").to_arrow().equals(_arrow(1))
    elif how == "replace":
        s["t"] = _table(dev, 2)
    elif how == "clear":
        s.clear()
    elif how == "popitem":
        assert s.popitem()[0] == "t"
    elif how == "held":  # the value outlives its key: its file does not (SPEC 9.4)
        v = s["t"]
        del s["t"]
        assert not os.path.exists(path)
        assert v.to_arrow().equals(_arrow(1))
        del v
    else:
        s.close()
        assert not os.path.exists(s.spill_dir)
        return
    assert not os.path.exists(path), f"{how}: the kept file stayed"
    assert s.stats()["disk_bytes"] == 0 and s.stats()["disk_clean_bytes"] == 0
    _check(s, dev)


def test_the_kept_file_of_an_external_goes_when_it_dies(dev, make_store):
    s = make_store(device_memory_limit=BIG, memory_limit=0)
    e = s.register_external(_table(dev, 4))
    s.evict(1)
    assert e.num_rows == ROWS and len(_paths(s)) == 1  # metadata: still on disk
    assert e.to_arrow().equals(_arrow(4))  # a real use brings it back, keeping its file
    assert len(_paths(s)) == 1 and s.stats()["disk_clean_bytes"] > 0
    del e
    assert _paths(s) == [], "the file outlived its proxy"  # at once: no store call between
    _check(s, dev)
    assert s.stats()["disk_bytes"] == 0


def test_a_collected_store_leaves_no_kept_file(dev, tmp_path):
    s = ProxifyHostFile(
        device=dev, device_memory_limit=BIG, memory_limit=0, local_directory=str(tmp_path)
    )
    s["t"] = _table(dev, 1)
    s.evict(1)
    assert s["t"].num_rows == ROWS and s["t"].to_arrow().num_rows == ROWS
    spill_dir = s.spill_dir
    assert os.listdir(spill_dir)
    del s
    gc.collect()
    assert not os.path.exists(spill_dir)


# --- integrity (SPEC 10) ----------------------------------------------------------------------
def test_a_kept_file_changed_behind_the_store_is_written_anew(dev, kept):
    """The value is intact in memory: a kept file someone changed is not reused."""
    s, path = kept
    written = s.stats()["disk_written_bytes"]
    _flip(path)
    s.evict(1)
    st = s.stats()
    assert st["disk_reuse_count"] == 0 and st["disk_written_bytes"] == 2 * written
    assert path not in _paths(s) and len(_paths(s)) == 1
    _check(s, dev)
    assert s["t"].to_arrow().equals(_arrow(1))


def test_a_kept_file_tampered_unseen_is_caught_when_read(dev, kept, monkeypatch):
    """The stat check is only a shortcut: a change it misses (here: it is told to see none)
    is caught by the MAC when the value is read, before anything is unpickled."""
    s, path = kept
    monkeypatch.setattr(SpillDir, "unchanged", lambda self, file: True)
    s["other"] = _table(dev, 5)
    _flip(path)
    s.evict(1)
    assert s.tier_of("t") == "disk" and s.stats()["disk_reuse_count"] == 1
    with pytest.raises(SpillIntegrityError, match="'t'"):
        s["t"]
    assert s["other"].to_arrow().equals(_arrow(5))  # SPEC 10.6: only its own key
    del s["t"]
    _check(s, dev)


def test_a_reused_file_tampered_on_disk_is_caught_when_read(dev, kept):
    s, path = kept
    s.evict(1)
    assert s.stats()["disk_reuse_count"] == 1
    _flip(path, at=os.path.getsize(path) - 40)
    with pytest.raises(SpillIntegrityError, match="'t'"):
        s["t"]


# --- a full disk -------------------------------------------------------------------------------
@pytest.mark.parametrize("fails", [1, 2])
def test_a_full_disk_takes_the_clean_copies_first(fails, dev, arr, kept, monkeypatch):
    """Clean copies are only a cache: a write the disk refuses drops them all and is tried once
    more, so the space they held never keeps a value in memory (SPEC 9.6 otherwise)."""
    s, path = kept
    s.memory_limit = BIG
    s["a"] = arr(3.0)
    assert s["t"].num_rows == ROWS and s["t"].to_arrow().num_rows == ROWS  # "a" is the oldest
    s.evict(1)
    assert s.tier_of("a") == "host" and s.tier_of("t") == "device" and os.path.exists(path)
    write, calls = SpillDir.write, []

    def full(self, payload):
        calls.append(1)
        if len(calls) <= fails:
            raise OSError(28, "No space left on device")
        return write(self, payload)

    monkeypatch.setattr(SpillDir, "write", full)
    s.memory_limit = 0
    if fails == 1:
        s.evict(0)  # the cascade
        assert s.tier_of("a") == "disk" and s.stats()["disk_errors"] == 0
    else:
        with pytest.warns(SpillWarning, match="'a'"):
            s.evict(0)
        assert s.tier_of("a") == "host" and s.stats()["disk_errors"] == 1
    assert len(calls) == 2 and not os.path.exists(path) and s.stats()["disk_clean_bytes"] == 0
    assert s.tier_of("t") == "device"
    _check(s, dev)
    assert s["t"].to_arrow().equals(_arrow(1))
    assert float(np.asarray(s["a"])[0]) == 3.0


# --- accounting under a random workload ------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_accounting_stays_exact_under_random_use(seed, dev, arr, make_store):
    """Tables, table slices and arrays (written in place) set, read, deleted and evicted under
    changing host limits, with externals: after every step the invariant (files, totals and
    ledger) holds and every read gives back what the model says."""
    rng = random.Random(seed)
    size = _table(dev, 0, 100).nbytes
    s = make_store(device_memory_limit=3 * size, memory_limit=size)
    want: dict[str, object] = {}
    externals: list[tuple[object, pa.Table]] = []
    for _step in range(300):
        op = rng.choice(["table", "table", "slice", "array", "get", "get", "get", "write",
                         "del", "evict", "limit", "external"])  # fmt: skip
        key = f"k{rng.randrange(8)}"
        if op == "table":
            t = rng.randrange(1000)
            s[key] = _table(dev, t, 100)
            want[key] = _arrow(t, 100)
        elif op == "slice" and isinstance(want.get(key), pa.Table):
            other = f"k{rng.randrange(8)}"
            s[other] = s[key].slice(5, 60)
            want[other] = want[key].slice(5, 55)
        elif op == "array":
            v = float(rng.randrange(100))
            s[key] = arr(v)
            want[key] = np.full(NB // 8, v)
        elif op == "get" and key in want:
            got = s[key]
            if isinstance(want[key], pa.Table):
                assert got.to_arrow().equals(want[key]), f"step {_step}: {key} came back wrong"
            else:
                np.testing.assert_array_equal(np.asarray(got), want[key])
            del got
        elif op == "write" and isinstance(want.get(key), np.ndarray):
            got = s[key]
            np.multiply(got, 2.0, out=got)
            want[key] = want[key] * 2.0
            del got
        elif op == "del" and key in want:
            del s[key], want[key]
        elif op == "evict":
            s.evict(rng.choice([1, size, BIG]))
        elif op == "limit":
            s.memory_limit = rng.choice([0, size, 3 * size, None])
        elif op == "external":
            if externals and rng.random() < 0.5:
                externals.pop(rng.randrange(len(externals)))
            else:
                t = rng.randrange(1000)
                externals.append((s.register_external(_table(dev, t, 100)), _arrow(t, 100)))
            for e, expect in externals:
                if rng.random() < 0.3:
                    assert e.to_arrow().equals(expect)
        _check(s, dev)  # externals are the store's: the ledger counts them as its own
    assert s.stats()["disk_reuse_count"] > 0, "the workload never reused a clean copy"


def test_the_feature_switch_is_the_type(dev, make_store, monkeypatch):
    """A Table declared mutable keeps no file: the same read writes it again when evicted."""
    monkeypatch.setattr(TableType, "immutable", False)
    s = make_store(device_memory_limit=BIG, memory_limit=0)
    s["t"] = _table(dev, 1)
    s.evict(1)
    written = s.stats()["disk_written_bytes"]
    assert s["t"].num_rows == ROWS and s["t"].to_arrow().num_rows == ROWS
    assert _paths(s) == []
    s.evict(1)
    assert s.stats()["disk_written_bytes"] == 2 * written
    _check(s, dev)


# --- a host value's read: the file it came from, kept until the read returns -------------
def _host_value() -> list[int]:
    return list(range(20_000))


def test_a_host_value_too_big_for_the_host_limit_goes_back_on_its_own_file(dev, make_store):
    """The read brings it into memory, the host limit sends it straight back to disk before
    the caller has it: on the file it was read from, nothing written (SHUF-BOUND-003's
    cluster wrote each frame again on every read, ~90 MiB a worker per 12 MiB shuffled)."""
    s = make_store(memory_limit=1)
    s["h"] = _host_value()
    (path,) = _paths(s)
    stamp, written = _stamp(path), s.stats()["disk_written_bytes"]
    assert s["h"] == _host_value()
    stats = s.stats()
    assert s.tier_of("h") == "disk" and _paths(s) == [path] and _stamp(path) == stamp
    assert stats["disk_written_bytes"] == written
    assert (stats["disk_reuse_count"], stats["disk_reused_bytes"]) == (1, os.path.getsize(path))
    _check(s, dev)


def test_a_host_value_kept_in_memory_loses_its_file(dev, make_store):
    """No clean copy for a host value: the caller may change it in place unseen."""
    s = make_store(memory_limit=1)
    s["h"] = _host_value()
    s.memory_limit = None
    value = s["h"]
    assert s.tier_of("h") == "host" and _paths(s) == [] and s.stats()["disk_reuse_count"] == 0
    value.append(-1)  # changed in place: the next spill must write what the store now holds
    s.memory_limit = 1
    s.evict(1)
    assert s["h"] == [*_host_value(), -1]
    _check(s, dev)


def test_a_file_changed_during_the_read_is_not_reused(dev, make_store, monkeypatch):
    """A file that changed under the read (the cheap stamp check says so) is removed and the
    value, intact in memory, is written anew: nothing is lost, nothing left behind."""
    s = make_store(memory_limit=1)
    s["h"] = _host_value()
    (old,) = _paths(s)
    monkeypatch.setattr(SpillDir, "unchanged", lambda self, file: False)
    written = s.stats()["disk_written_bytes"]
    assert s["h"] == _host_value()
    stats = s.stats()
    assert stats["disk_reuse_count"] == 0 and stats["disk_written_bytes"] == 2 * written
    (new,) = _paths(s)
    assert new != old and s.tier_of("h") == "disk"
    assert s["h"] == _host_value()
    _check(s, dev)
