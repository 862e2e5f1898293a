"""close_store leaves nothing behind: no file or directory under spill_dir, no OOM handler,
no device memory once the values handed out are released."""

from __future__ import annotations

import gc
import os

from conformance import conformance_id, not_exercised, requires
from conformance.store.harness import LIMIT
from conformance.store.probes import recording_device, tree


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
