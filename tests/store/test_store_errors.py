"""Bad input and faults: a clear, specific exception, and nothing lost."""

from __future__ import annotations

import os

import pytest

from conftest import NB, value_of
from reference_impl import ProxifyHostFile
from reference_impl.store import SpillDirectoryError, StoreClosedError


def _filled(make_store, arr):
    s = make_store(memory_limit=2 * NB)
    for k in range(5):
        s[k] = arr(k)
    s["h"] = "host"
    return s


def _intact(s):
    assert set(s) == {0, 1, 2, 3, 4, "h"}
    assert [value_of(s[k]) for k in range(5)] == [0, 1, 2, 3, 4] and s["h"] == "host"


def test_unhashable_key(arr, make_store):
    s = _filled(make_store, arr)
    with pytest.raises(TypeError, match="unhashable key of type list"):
        s[[1, 2]] = arr(9)
    with pytest.raises(TypeError, match="unhashable key of type dict"):
        s[{}]
    assert [1] not in s
    _intact(s)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"device_memory_limit": -1}, "device_memory_limit must be non-negative"),
        ({"device_memory_limit": "lots"}, "device_memory_limit: cannot parse 'lots'"),
        ({"device_memory_limit": 100, "memory_limit": "-5 GiB"}, "memory_limit: cannot parse"),
        ({"device_memory_limit": 100, "memory_limit": -5}, "memory_limit must be non-negative"),
        ({"device_memory_limit": None}, "device_memory_limit must be a byte count"),
    ],
)
def test_bad_limits(dev, tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        ProxifyHostFile(device=dev, local_directory=str(tmp_path), **kwargs)
    assert os.listdir(tmp_path) == []  # nothing created


def test_limit_strings_are_parsed(dev, tmp_path):
    with ProxifyHostFile(
        device=dev, device_memory_limit="1 KiB", memory_limit="2kB", local_directory=str(tmp_path)
    ) as s:
        assert s.device_memory_limit == 1024 and s.memory_limit == 2000


def test_unwritable_spill_directory(dev, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    bad = blocker / "spill"
    with pytest.raises(SpillDirectoryError, match=f"spill directory base '{bad}' is not usable"):
        ProxifyHostFile(device=dev, device_memory_limit=NB, local_directory=str(bad))


def test_negative_evict(arr, make_store):
    s = _filled(make_store, arr)
    with pytest.raises(ValueError, match=r"nbytes must be a non-negative int, got -1"):
        s.evict(-1)
    with pytest.raises(ValueError, match="non-negative int, got 1.5"):
        s.evict(1.5)
    _intact(s)


def test_missing_key(arr, make_store):
    s = _filled(make_store, arr)
    with pytest.raises(KeyError):
        s["nope"]
    with pytest.raises(KeyError):
        del s["nope"]
    with pytest.raises(KeyError):
        s.tier_of("nope")
    _intact(s)


def test_closed_store(arr, make_store):
    s = make_store(device_memory_limit=0, memory_limit=0)
    s["k"] = arr(1)
    p = s["k"]
    s.close()
    s.close()  # idempotent
    with pytest.raises(StoreClosedError, match="closed"):
        s["x"] = 1
    with pytest.raises(StoreClosedError, match="store that spilled"):
        p + 1


def test_unpicklable_host_value_stays_in_host(make_store):
    import threading

    from reference_impl.store import SpillWarning

    s = make_store(memory_limit=0)
    lock = threading.Lock()
    with pytest.warns(SpillWarning, match="spilling 'lock' .* failed .*stays in host memory"):
        s["lock"] = lock
    assert s.tier_of("lock") == "host" and s["lock"] is lock
    with pytest.warns(SpillWarning, match="'lock'"):  # retried, still stays in host
        s["n"] = 5
    assert s.tier_of("n") == "disk" and s["n"] == 5
