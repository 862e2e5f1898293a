"""STORE-DISK-004: a ProxifyHostFile dropped without clear() leaves its spill files,
because dask-cuda's spill-on-demand callback keeps the store alive.

A spill file is removed only when its SpillToDiskFile is collected
(``def __del__(self): os.remove(self.path)``), i.e. when the proxy that holds it
dies. ``initialize_spill_on_demand_once`` builds ``def oom(nbytes)``, a closure
over ``self`` (``self.manager.evict(...)``), and installs it process-wide with
``rmm.mr.set_current_device_resource(FailureCallbackResourceAdaptor(current_mr, oom))``;
nothing uninstalls it. So while RMM holds the callback, the store, its proxies
and their files stay.

The script fills two stores until values are on disk and drops each without
clear(): one without the callback (no RMM: dask-cuda skips it), one with it
(dask-cuda's own initialize_spill_on_demand_once against the _common stand-in
for rmm.mr, the callback kept referenced the way RMM keeps it).

Run: ../../../.venv-daskcuda/bin/python files_left_on_gc.py
"""

import gc
import os
import sys
import tempfile

from _common import DevArray, install_oom_callback, new_store, verdict, versions

ROOT = tempfile.mkdtemp(prefix="dask-cuda-repro-")  # one root: dask-cuda's disk path is global


def files() -> int:
    return sum(len(f) for _, _, f in os.walk(ROOT))


def fill(with_callback: bool):
    store = new_store(device_memory_limit=1000, memory_limit=1000, spill_dir=ROOT)
    callback = install_oom_callback(store) if with_callback else None
    for i in range(6):
        store[f"k{i}"] = DevArray(1000, fill=i)  # cascades device -> host -> disk
    return store, callback


store, _ = fill(with_callback=False)
before = files()
del store
gc.collect()
without_cb = files()

store, callback = fill(with_callback=True)
before_cb = files()
del store
gc.collect()
with_cb = files()
del callback  # what RMM would do if the resource were ever reset
gc.collect()
released = files()

sys.exit(
    verdict(
        before > 0 and without_cb == 0 and with_cb == before_cb > 0 and released == 0,
        "a dropped store keeps its spill files exactly as long as its oom callback is referenced",
        [
            versions(),
            f"no callback: {before} file(s) on disk, {without_cb} after del store + gc.collect()",
            f"callback held (as RMM holds it): {before_cb} file(s), {with_cb} after del store + gc.collect()",
            f"callback released: {released} file(s) after gc.collect()",
        ],
    )
)
