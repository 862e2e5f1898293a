"""Extra finding: dask-cuda's host and disk tallies are sizeof(proxy), and
dask.sizeof has no ProxyObject registration, so it falls back to
sys.getsizeof(proxy) = ProxyObject.__sizeof__() (the frame bytes) + the
interpreter's GC header.  Every host/disk proxy is over-counted by that header
(32 B on CPython 3.11), so disk_bytes != bytes in the spill files.

Run: ../../../.venv-daskcuda/bin/python tally_getsizeof_overhead.py
"""
import gc
import os

from _common import DevArray, new_store, verdict, versions
from dask.sizeof import sizeof

store = new_store(device_memory_limit=0, memory_limit=1)  # every item cascades to disk
for i in range(5):
    store[f"k{i}"] = DevArray(10_000, i)
paths = [str(store[k]._pxy_get().obj[0]["disk-io-header"]["path"]) for k in store]
on_disk = sum(os.path.getsize(p) for p in paths)
tally = store.manager._disk.mem_usage()
p = store["k0"]
verdict(
    tally != on_disk,
    "the disk (and host) tally over-counts each proxy by the GC header that sys.getsizeof adds",
    [
        versions(),
        f"5 proxies on disk: tally {tally:,} B, files {on_disk:,} B, difference {tally - on_disk} B",
        f"one proxy: __sizeof__()={p.__sizeof__()}, dask sizeof()={sizeof(p)} "
        f"(dispatch -> {sizeof.dispatch(type(p)).__name__})",
    ],
)
del p, paths
store.clear()
gc.collect()
