"""close_store leaves nothing behind: no file or directory under spill_dir, no OOM handler,
no device memory once the values handed out are released."""

from __future__ import annotations

import gc
import os

import pytest

from conformance import conformance_id, not_exercised, requires
from conformance.api import evict
from conformance.store.harness import (
    LIMIT,
    files_under,
    seed_digest,
    value_digest,
)
from conformance.store.probes import recording_device, tree
from conformance.store.tiers import N


@conformance_id("STORE-CLOSE-001", clause=("11.3", "11.4", "11.5", "9.5"))
@requires("store")
def test_close_leaves_nothing_behind(impl, make_store, device_kind):
    """A store with values on the device, on host and on disk, a value and an external still
    held by the test, is closed. Afterwards spill_dir (the test's directory, which must remain)
    holds no file and no directory, no OOM handler the store registered is left on the device,
    and once the test drops what it held the ledger is back at its baseline."""
    caps = impl.capabilities
    dev = recording_device(4 * LIMIT) if device_kind == "sim" else None
    kw = {"device": dev, "disk_accounting": False}
    if {"store.limit.host", "store.spill.disk"} <= caps:
        kw["host_limit"] = LIMIT // 2
    h = make_store(**kw)
    for i in range(8):
        h.store[f"k{i}"] = h.value(LIMIT // 3, seed=i)
    h.store["host-only"] = b"x" * 5000
    held = h.store["k0"]
    ext = h.adapter.register_external(h.store, h.value(1000)) if "store.external" in caps else None
    snap = h.check(set(h.store))
    tiers = set(snap.tiers.values())
    spill_dir = h.env.spill_dir
    h.close(check=False)
    files, dirs = tree(spill_dir)
    assert os.path.isdir(spill_dir), (
        f"close removed spill_dir itself ({spill_dir}): the test created it, the store may "
        f"remove only what it created"
    )
    assert not files and not dirs, (
        f"after close (the store had keys in {sorted(tiers)}), spill_dir still holds files "
        f"{sorted(files)} and directories {sorted(dirs)}"
    )
    if dev is not None:
        assert not dev.registered(), (
            f"OOM handlers still registered after close: {dev.registered()}"
        )
    del held, ext
    gc.collect()
    assert h.ledger() == 0, (
        f"after close and the release of every value handed out, {h.ledger():,} device bytes "
        f"are still in use"
    )


@conformance_id("STORE-CLOSE-002", clause="11.6")
@requires("store", "store.oom.on_demand")
def test_a_dropped_store_leaves_no_acting_oom_handler(impl, tmp_path, device_kind):
    """A store with values is dropped without close and collected; then an allocation that does
    not fit must raise the device's out-of-memory error, nothing else, and no handler call may
    report progress: the store that could have spilled is gone."""
    if device_kind != "sim":
        not_exercised("needs the recording sim device")
    from conformance.store.harness import StoreHarness
    from reference_impl.device import DeviceOutOfMemoryError

    dev = recording_device(4 * LIMIT)
    h = StoreHarness(impl.adapter, device_kind, tmp_path, device=dev, disk_accounting=False)
    for i in range(3):
        h.store[f"k{i}"] = h.value(LIMIT // 3, seed=i)
    registered = dev.registered()
    h.store = None  # dropped, never closed
    gc.collect()
    assert h.ledger() == 0, f"a dropped store still holds {h.ledger():,} device bytes"
    calls_before = len(dev.calls)
    taken = dev.empty(3 * LIMIT, "uint8")  # fits; the next one fits the device, not what is free
    try:
        dev.empty(2 * LIMIT, "uint8")
    except DeviceOutOfMemoryError:
        pass
    except Exception as exc:  # the handler of a dead store raised into the caller
        raise AssertionError(
            f"an allocation after the store was collected raised {type(exc).__name__}: {exc} "
            f"(handlers registered while it lived: {registered})"
        ) from exc
    else:
        raise AssertionError("an allocation larger than the free device memory succeeded")
    del taken
    progress = [c for c in dev.calls[calls_before:] if c.result is True]
    assert not progress, f"a collected store's OOM handler claimed progress: {progress}"
    gc.collect()
    assert h.ledger() == 0, f"{h.ledger():,} device bytes in use after the failed allocation"


def _both_accounted(adapter, one, two, keys):
    """Two stores given one directory: the first store's invariants hold, and their
    disk_bytes add up to the files in the directory. The second store may keep its
    last-read value on the device (a single value over its limit of 0, which clause 4.1
    allows): the ledger holds both stores."""
    b = adapter.inspect(two)
    a = one.check(keys, held=b.device_bytes)
    files = files_under(one.env.spill_dir)
    assert a.disk_bytes + b.disk_bytes == sum(files.values()), (
        f"two stores in one directory: disk_bytes {a.disk_bytes:,} + {b.disk_bytes:,} "
        f"!= {sum(files.values()):,} bytes in {len(files)} file(s)"
    )
    return a, b


@conformance_id("STORE-DISK-012", clause=("11.2", "11.3", "3.5"))
@requires("store", "store.spill.disk", "store.limit.host")
def test_two_stores_share_a_spill_directory(impl, make_store):
    """Two stores on one device are given the same spill_dir and store the same keys with
    different values, all on disk. Each reads back its own values; their disk_bytes add up to
    the files in the directory; deleting every key of one, then closing it, leaves the other's
    files, values and accounting intact and the directory in place."""
    from conformance.api import StoreEnv

    one = make_store(host_limit=0, disk_accounting=False)
    shared = one.env.spill_dir
    two = impl.adapter.create_store(StoreEnv(one.device, 0, 0, shared))  # nothing on the device
    closed = False
    try:
        n = LIMIT // 3
        keys = {f"k{i}" for i in range(6)}
        for i in range(6):
            one.store[f"k{i}"] = one.value(n, seed=i)
            two[f"k{i}"] = one.value(n, seed=100 + i)

        def totals():
            return _both_accounted(impl.adapter, one, two, keys)

        a, b = totals()
        assert "disk" in a.tiers.values() and set(b.tiers.values()) == {"disk"}, (a, b)
        for i in range(6):
            assert value_digest(one.device, one.store[f"k{i}"]) == seed_digest(i, n)
            assert value_digest(one.device, two[f"k{i}"]) == seed_digest(100 + i, n), (
                f"the second store read k{i} back wrong: the stores share files"
            )
        totals()
        for k in sorted(keys):
            del two[k]
        a, b = totals()
        assert (b.device_bytes, b.host_bytes, b.disk_bytes) == (0, 0, 0), b
        assert a.disk_bytes == sum(files_under(shared).values()), (
            f"after the other store deleted its keys: disk_bytes {a.disk_bytes:,}, files "
            f"{sorted(files_under(shared))}"
        )
        for i in range(6):
            two[f"k{i}"] = one.value(n, seed=200 + i)
        totals()
        impl.adapter.close_store(two)
        closed = True
        assert os.path.isdir(shared), "closing one store removed the shared directory"
        a = one.check(keys)
        assert a.disk_bytes == sum(files_under(shared).values()), (
            f"closing the other store changed this one's files: disk_bytes {a.disk_bytes:,}, "
            f"files {sorted(files_under(shared))}"
        )
        for i in range(6):
            assert value_digest(one.device, one.store[f"k{i}"]) == seed_digest(i, n), (
                f"k{i} of the first store is gone or wrong after the second store closed"
            )
        one.check(keys)
    finally:
        if not closed:
            impl.adapter.close_store(two)


@conformance_id("STORE-USE-004", clause="11.7")
@requires("store", "store.evict.manual")
def test_a_value_held_past_close_never_reads_wrong(impl, make_store):
    """The caller holds values from every tier, then the store is closed: each must either
    read back exactly or raise on use; none may read back other data."""
    disk = {"store.limit.host", "store.spill.disk"} <= impl.capabilities
    h = make_store(host_limit=N + 4096) if disk else make_store()
    held = {}
    for i in range(4):
        h.store[f"k{i}"] = h.value(N, seed=20 + i)
        held[f"k{i}"] = h.store[f"k{i}"]
    evict(h.adapter, h.store, 3 * N)
    tiers = dict(h.snapshot().tiers)
    h.close(check=False)
    wrong = []
    for i, (k, v) in enumerate(held.items()):
        try:
            got = value_digest(h.device, v)
        except Exception:  # a clear error on use is allowed
            continue
        if got != seed_digest(20 + i, N):
            wrong.append(f"{k} (was on {tiers[k]})")
    assert not wrong, f"after close, values held by the caller read back other data: {wrong}"
    del held, v
    gc.collect()


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


@conformance_id("STORE-OOM-004", clause="11.4")
@requires("store", "store.oom.on_demand")
def test_closed_store_leaves_no_oom_handler(make_store, device_kind):
    """After close_store the store's OOM handler is gone from the device: an allocation that
    does not fit raises the device's out-of-memory error without calling into the closed
    store, and the ledger is unchanged by the failed attempt."""
    if device_kind != "sim":
        pytest.skip("needs a recording simulated device")
    from reference_impl import DeviceOutOfMemoryError

    capacity = 4 * LIMIT
    dev = recording_device(capacity)
    h = make_store(device=dev)
    for i in range(3):
        h.store[f"k{i}"] = h.value(LIMIT // 3, seed=i)
    outside = dev.empty(capacity - LIMIT + 1, "uint8")  # the store must spill for this to fit
    del outside
    h.check({f"k{i}" for i in range(3)})
    h.close()
    registered = dev.registered()
    dev.calls.clear()
    held = dev.empty(capacity, "uint8")  # the whole device: fits, nothing is left in use
    before = dev.bytes_in_use()
    with pytest.raises(MemoryError) as info:
        dev.empty(1, "uint8")
    assert isinstance(info.value, DeviceOutOfMemoryError), (
        f"expected the device's DeviceOutOfMemoryError, got {type(info.value).__name__}: "
        f"{info.value}"
    )
    assert not dev.calls, f"the closed store's OOM handler was still called: {dev.calls}"
    assert not registered, f"OOM handlers still registered after close_store: {registered}"
    assert dev.bytes_in_use() == before, (
        f"the failed allocation changed the ledger: {before:,} -> {dev.bytes_in_use():,}"
    )
    del held


@conformance_id("STORE-CLOSE-003", clause=("11.9", "11.5", "11.3"))
@requires("store")
def test_a_set_after_close_leaves_nothing(impl, make_store):
    """The caller still holds a closed store and sets values into it: each set must raise, or
    leave nothing behind. Once the caller drops the values (not the store), the ledger is back
    at its baseline and spill_dir holds no file and no directory."""
    h = make_store()
    store = h.store
    h.store["k0"] = h.value(N, seed=1)
    h.close(check=False)
    accepted = []
    for i in range(4):
        value = h.value(N, seed=30 + i)
        try:
            store[f"late{i}"] = value
        except Exception:  # refusing a set on a closed store is allowed
            continue
        accepted.append(f"late{i}")
    del value
    gc.collect()
    files, dirs = tree(h.env.spill_dir)
    assert h.ledger() == 0 and not files and not dirs, (
        f"sets after close (accepted: {accepted}) left {h.ledger():,} device bytes in use and "
        f"spill_dir holding files {sorted(files)}, directories {sorted(dirs)}, while the caller "
        f"holds only the closed store"
    )
    del store
