"""A Table in ProxifyHostFile is one unit: proxied whole, counted once, spilled to host
and disk with out-of-band frames, and back equal, with the ledger exact at every step."""

from __future__ import annotations

import gc
import pickle

import numpy as np
import pyarrow as pa
import pytest
from table_asserts import assert_identical

from reference_impl import Column, ProxifyHostFile, ProxyObject, Table
from reference_impl.store.dispatch import handler_for
from reference_impl.table.spill import TABLE


def arrow_data(n: int = 500) -> pa.Table:
    rng = np.random.default_rng(0)
    vals = rng.standard_normal(n)
    vals[::7] = np.nan
    return pa.table(
        {
            "i": pa.array(np.arange(n), mask=np.arange(n) % 5 == 0),
            "f": pa.array(vals),
            "s": pa.array([f"row-{i}-é" if i % 3 else "" for i in range(n)]),
            "t": pa.array(np.arange(n, dtype=np.int64)).view(pa.timestamp("ns", tz="UTC")),
        }
    )


@pytest.fixture
def store(dev, tmp_path):
    s = ProxifyHostFile(
        device=dev,
        device_memory_limit="1 MiB",
        memory_limit="10 MiB",
        local_directory=str(tmp_path),
    )
    yield s
    s.close()
    gc.collect()


def test_table_is_one_proxy_counted_exactly(dev, store):
    data = arrow_data()
    t = Table.from_arrow(data, dev)
    nbytes, allocs = t.nbytes, t.allocations()
    assert handler_for(t, dev) is TABLE
    store["t"] = t
    del t
    snap = store.snapshot()
    assert snap.tiers == {"t": "device"}
    assert snap.device_bytes == dev.bytes_in_use() == nbytes == sum(n for _, n in allocs)
    proxy = store["t"]
    assert type(proxy) is ProxyObject and isinstance(proxy, Table)
    # answered from metadata, without unspilling
    assert (proxy.nbytes, proxy.num_rows, len(proxy)) == (nbytes, 500, 500)
    assert proxy.column_names == ["i", "f", "s", "t"] and proxy.schema == data.schema


@pytest.mark.parametrize("host_limit", ["10 MiB", 0], ids=["host", "disk"])
def test_spill_and_back_with_exact_ledger(dev, tmp_path, host_limit):
    data = arrow_data()
    tier = "host" if host_limit else "disk"
    with ProxifyHostFile(
        device=dev,
        device_memory_limit="1 MiB",
        memory_limit=host_limit,
        local_directory=str(tmp_path),
    ) as store:
        store["t"] = Table.from_arrow(data, dev)
        nbytes = store.snapshot().device_bytes
        assert dev.bytes_in_use() == nbytes > 0

        assert store.evict(1) == nbytes  # every buffer freed at once
        snap = store.snapshot()
        assert snap.tiers == {"t": tier} and snap.device_bytes == 0 == dev.bytes_in_use()
        assert (snap.host_bytes if tier == "host" else snap.disk_bytes) >= nbytes
        assert (snap.disk_bytes if tier == "host" else snap.host_bytes) == 0

        got = store["t"]  # back to the device on use
        snap = store.snapshot()
        assert snap.tiers == {"t": "device"} and snap.device_bytes == nbytes == dev.bytes_in_use()
        assert_identical(got.to_arrow(), data)
        assert got.equals(Table.from_arrow(data, dev))
        gc.collect()
        assert dev.bytes_in_use() == nbytes
        del store["t"], got
        gc.collect()
        snap = store.snapshot()
        assert dev.bytes_in_use() == 0 == snap.device_bytes == snap.host_bytes == snap.disk_bytes


def test_sliced_table_spills_compactly(dev, store):
    data = arrow_data()
    t = Table.from_arrow(data, dev)
    part = t.slice(100, 150)
    store["p"] = part
    del part
    assert store.snapshot().device_bytes == t.nbytes  # the slice holds whole allocations
    del t
    store.evict(1)
    assert dev.bytes_in_use() == 0
    got = store["p"]
    expected = data.slice(100, 50)
    assert_identical(got.to_arrow(), expected)
    gc.collect()
    # back as exact-size buffers: only the sliced rows (and their chars) came back
    assert dev.bytes_in_use() == store.snapshot().device_bytes == got.nbytes


def test_columns_sharing_an_allocation_count_once(dev, store):
    buf = dev.asarray(np.arange(100, dtype=np.int64))
    t = Table({"lo": Column(buf[:50]), "hi": Column(buf[50:])})
    store["a"], store["b"] = t, buf
    del t, buf
    assert store.snapshot().device_bytes == dev.bytes_in_use() == 800
    store.evict(1)  # the alias group moves together
    assert store.snapshot().device_bytes == dev.bytes_in_use() == 0
    assert store["a"].column("hi").data[0] == 50


def test_host_payload_is_out_of_band_frames(dev):
    t = Table.from_arrow(arrow_data(2000), dev)
    d2h = dev.d2h_bytes
    payload = TABLE.to_host(t, dev)
    # i: data + mask; f: data (NaN is a value, not a null); s: chars + offsets; t: data
    assert len(payload.frames) == 6
    assert payload.frames_nbytes == t.nbytes == dev.d2h_bytes - d2h  # one d2h copy, no more
    assert len(payload.header) < 1024  # the buffers are not inside the pickle
    back = TABLE.to_device(payload, dev)
    assert back.equals(t) and back.nbytes == t.nbytes


def test_pickle_keeps_the_device(dev):
    t = Table.from_arrow(arrow_data(50), dev)
    buffers = []
    blob = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 6 and len(blob) < 1024
    back = pickle.loads(blob, buffers=buffers)
    assert back.device is dev and back.equals(t)


def test_spilled_proxy_pickles_and_unspills_on_its_device(dev, store):
    data = arrow_data(50)
    store["t"] = Table.from_arrow(data, dev)
    proxy = store["t"]
    store.evict(1)
    assert store.snapshot().tiers == {"t": "host"}
    copy = pickle.loads(pickle.dumps(proxy))  # an unmanaged proxy of host frames
    assert isinstance(copy, Table) and copy.num_rows == 50
    assert copy.device is dev  # the sim device this process holds, not a CUDA default
    assert_identical(copy.to_arrow(), data)
