"""close_store leaves nothing behind: no file or directory under spill_dir, no OOM handler,
no device memory once the values handed out are released."""

from __future__ import annotations

import gc
import os

from conformance import conformance_id, requires
from conformance.harness import LIMIT
from conformance.probes import recording_device, tree


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
