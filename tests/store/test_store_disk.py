"""SPEC section 9: the disk tier: modes, the MAC before unpickling, partial I/O, >1024 frames, cleanup."""

from __future__ import annotations

import gc
import os
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import NB, value_of
from reference_impl import ProxifyHostFile
from reference_impl.store import SpillIntegrityError, disk, serialize


def _files(s):
    return sorted(os.path.join(s.spill_dir, f) for f in os.listdir(s.spill_dir))


def test_modes_and_disk_bytes_match_files(arr, make_store):
    s = make_store(device_memory_limit=0, memory_limit=0)
    s["a"] = arr(1)
    s["b"] = [arr(2), arr(3)]  # one file per proxy
    assert stat.S_IMODE(os.stat(s.spill_dir).st_mode) == 0o700
    files = _files(s)
    assert len(files) == 3
    assert all(stat.S_IMODE(os.stat(f).st_mode) == 0o600 for f in files)
    assert s.snapshot().disk_bytes == sum(os.path.getsize(f) for f in files)
    assert s.snapshot().tiers == {"a": "disk", "b": "disk"}


def test_one_object_twice_is_one_file(arr, make_store):
    """(x, x) in one value, or x under two keys, is written once and counted once."""
    s = make_store(device_memory_limit=10 * NB, memory_limit=0)
    x = arr(7)
    s["t"] = (x, x)
    s["a"] = x
    s["b"] = x
    del x
    assert s.evict(1) == NB  # the whole alias group goes: host limit 0 sends it to disk
    files = _files(s)
    assert len(files) == 1
    assert s.snapshot().disk_bytes == os.path.getsize(files[0])
    t = s["t"]
    assert t[0] is t[1] and np.asarray(t[0]).sum() == 7 * (NB // 8)
    del t
    for k in ("t", "a", "b"):
        del s[k]
    assert _files(s) == [] and s.snapshot().disk_bytes == 0


def test_spill_dir_is_per_store_under_local_directory(tmp_path, make_store):
    s1, s2 = make_store(), make_store()
    assert s1.spill_dir != s2.spill_dir
    assert os.path.dirname(s1.spill_dir) == str(tmp_path)


def _tamper_setup(arr, make_store):
    s = make_store(device_memory_limit=NB, memory_limit=0)
    s["victim"] = arr(1)
    s["other"] = arr(2)
    s["third"] = arr(3)
    (path,) = [f for f in _files(s)][:1]
    return s, path


def _assert_rest_intact(s):
    assert value_of(s["third"]) == 3 and value_of(s["other"]) == 2
    assert set(s) == {"victim", "other", "third"}


def test_tampered_file_is_rejected_before_unpickling(arr, make_store):
    s, path = _tamper_setup(arr, make_store)
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(
        SpillIntegrityError,
        match=r"(?s)spill file .*00000000\.spill of key 'victim' failed its MAC",
    ):
        s["victim"]
    assert s.tier_of("victim") == "disk"
    _assert_rest_intact(s)


def test_truncated_file_is_rejected(arr, make_store):
    s, path = _tamper_setup(arr, make_store)
    os.truncate(path, os.path.getsize(path) - 5)
    with pytest.raises(SpillIntegrityError, match=r"00000000\.spill of key 'victim' is truncated"):
        s["victim"]
    _assert_rest_intact(s)


def test_swapped_files_fail_the_hmac(arr, make_store):
    s = make_store(device_memory_limit=NB, memory_limit=0)
    for k in ("a", "b", "c"):
        s[k] = arr(ord(k))
    f0, f1 = _files(s)
    os.replace(f0, f0 + ".tmp")
    os.replace(f1, f0)
    os.replace(f0 + ".tmp", f1)
    with pytest.raises(SpillIntegrityError, match="key 'a' failed its MAC"):
        s["a"]
    assert value_of(s["c"]) == ord("c")


def test_a_file_from_another_store_key_fails(tmp_path):
    payload = serialize.dumps(b"x" * 100)
    d1 = disk.SpillDir(str(tmp_path), b"k1" * 16)
    d2 = disk.SpillDir(str(tmp_path), b"k2" * 16)
    f = d1.write(payload)
    assert bytes(serialize.loads(d1.read(f, "k"))) == b"x" * 100
    with pytest.raises(SpillIntegrityError, match="failed its MAC"):
        d2.read(f, "k")


def test_mac_rejects_changed_or_reordered_chunks(tmp_path):
    """Big objects are hashed on the pool while written; any change still fails the tag."""
    d = disk.SpillDir(str(tmp_path), b"k" * 32)
    data = np.random.default_rng(0).integers(0, 255, 3 * disk.CHUNK + 12345, dtype=np.uint8)
    f = d.write(serialize.dumps(data))
    assert (serialize.loads(d.read(f, "big")) == data).all()
    with open(f.path, "rb") as fh:
        original = fh.read()
    c = disk.CHUNK
    tampered = bytearray(original)
    tampered[2 * c + 7] ^= 1  # one bit in the third chunk
    swapped = original[:c] + original[2 * c : 3 * c] + original[c : 2 * c] + original[3 * c :]
    for body in (bytes(tampered), swapped):
        with open(f.path, "wb") as fh:
            fh.write(body)
        with pytest.raises(SpillIntegrityError, match="failed its MAC"):
            d.read(f, "big")


def test_more_than_iov_max_frames_round_trip(make_store):
    s = make_store(memory_limit=0)
    value = [np.full(3, i, dtype="int64") for i in range(disk.IOV_MAX + 500)]
    assert len(serialize.dumps(value).frames) > 1024
    s["wide"] = value
    assert s.tier_of("wide") == "disk"
    back = s["wide"]
    assert len(back) == len(value) and all((b == v).all() for b, v in zip(back, value, strict=True))


def test_partial_writes_and_reads_are_completed(monkeypatch, tmp_path):
    real_writev, real_readv = os.writev, os.readv
    calls = {"w": 0, "r": 0}

    def short_writev(fd, buffers):
        calls["w"] += 1
        first = memoryview(buffers[0])[:7]  # at most 7 bytes per call
        return real_writev(fd, [first])

    def short_readv(fd, buffers):
        calls["r"] += 1
        return real_readv(fd, [memoryview(buffers[0])[:5]])

    monkeypatch.setattr(os, "writev", short_writev)
    monkeypatch.setattr(os, "readv", short_readv)
    d = disk.SpillDir(str(tmp_path), b"k" * 32)
    data = [np.arange(100, dtype="int64"), np.arange(7, dtype="int8")]
    f = d.write(serialize.dumps(data))
    back = serialize.loads(d.read(f, "k"))
    assert calls["w"] > 100 and calls["r"] > 100
    assert all((b == v).all() for b, v in zip(back, data, strict=True))


def test_zero_byte_write_raises_instead_of_spinning(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "writev", lambda fd, bufs: 0)
    d = disk.SpillDir(str(tmp_path), b"k" * 32)
    with pytest.raises(OSError, match="accepts no more data"):
        d.write(serialize.dumps(b"abc"))
    assert os.listdir(tmp_path) == []  # no partial file left behind


def test_files_removed_on_delete_overwrite_close_and_gc(dev, arr, tmp_path):
    s = ProxifyHostFile(
        device=dev, device_memory_limit=0, memory_limit=0, local_directory=str(tmp_path)
    )
    s["a"] = arr(1)
    s["b"] = arr(2)
    s["h"] = list(range(100))
    assert len(_files(s)) == 3
    del s["a"]
    assert len(_files(s)) == 2
    s["b"] = arr(3)  # overwrite: old file gone, new one written
    assert len(_files(s)) == 2 and s.snapshot().disk_bytes == sum(map(os.path.getsize, _files(s)))
    spill_dir = s.spill_dir
    s.close()
    assert not os.path.exists(spill_dir)
    s2 = ProxifyHostFile(
        device=dev, device_memory_limit=0, memory_limit=0, local_directory=str(tmp_path)
    )
    s2["a"] = arr(1)
    spill_dir = s2.spill_dir
    assert os.listdir(spill_dir)
    del s2
    gc.collect()
    assert not os.path.exists(spill_dir)
    assert dev.bytes_in_use() == 0


FULL_DISK_SCRIPT = textwrap.dedent(
    """
    import resource, signal, warnings, os, numpy as np
    from reference_impl import ProxifyHostFile, get_device
    from reference_impl.store import SpillWarning
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too-big write raises EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
    dev = get_device("sim", "1 MiB")
    s = ProxifyHostFile(device=dev, device_memory_limit=0, memory_limit=0, local_directory={tmp!r})
    a = dev.empty(500); a.view(np.ndarray)[:] = 7
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s["big"] = a
    del a
    assert len(w) == 1 and issubclass(w[0].category, SpillWarning), w
    print("WARNING:", w[0].message)
    assert s.tier_of("big") == "host", s.snapshot()
    assert os.listdir(s.spill_dir) == []  # the partial file was removed
    snap = s.snapshot()
    assert snap.disk_bytes == 0 and snap.host_bytes > 4000, snap
    assert float(s["big"][3]) == 7.0
    s["small"] = dev.zeros(10)  # small files still fit
    assert s.tier_of("small") == "disk"
    print("OK", s.stats()["disk_errors"] >= 1)
    """
)


def test_full_disk_keeps_value_in_host(tmp_path):
    script = FULL_DISK_SCRIPT.format(tmp=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "File too large" in out.stdout and "stays in host memory" in out.stdout
    assert "OK True" in out.stdout


@pytest.mark.slow
def test_frame_over_2_gib_round_trips(tmp_path):
    d = disk.SpillDir(str(tmp_path), b"k" * 32)
    big = np.empty(2**31 + 4096, dtype=np.uint8)
    big[:: 2**20] = 7
    big[-1] = 9
    f = d.write(serialize.dumps(big))
    assert f.nbytes > 2**31
    back = serialize.loads(d.read(f, "big"))
    assert back.nbytes == big.nbytes and back[-1] == 9 and (back[:: 2**20] == 7).all()
