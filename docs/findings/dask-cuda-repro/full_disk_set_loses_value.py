"""Candidate: on a full disk, a set whose spill cascade reaches the disk raises
the write's OSError out of ProxifyHostFile.__setitem__ and the value is not
stored (an overwrite loses the old value too); the failed write leaves an empty
file in the spill directory, and a manual eviction raises the same error.

A full disk is made with the process's file-size limit (RLIMIT_FSIZE = 0,
SIGXFSZ ignored): every write of a byte fails with EFBIG, as a write to a full
disk fails with ENOSPC.  dask_cuda.disk_io.disk_write opens the file, then calls
os.writev once, with no cleanup on error; ProxyManager.proxify registers the new
proxies and calls maybe_evict() before __setitem__ assigns the key.

Run: ../../../.venv-daskcuda/bin/python full_disk_set_loses_value.py
"""

import gc
import os
import resource
import signal
import tempfile

from _common import DevArray, new_store, tier, verdict, versions


def files_in(root):
    return {
        os.path.relpath(os.path.join(d, f), root): os.path.getsize(os.path.join(d, f))
        for d, _, fs in os.walk(root)
        for f in fs
    }


root = tempfile.mkdtemp(prefix="dask-cuda-repro-")
# device limit 0, host limit 1 byte: every value cascades device -> host -> disk
store = new_store(device_memory_limit=0, memory_limit=1, spill_dir=root)
store["old"] = DevArray(4096, fill=1)  # the disk has room: "old" goes to disk
old_tier = tier(store["old"])
files_before = files_in(root)

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))  # the disk is full
errors = {}
try:
    for key in ("new", "old"):  # a new key, then an overwrite of the key on disk
        try:
            store[key] = DevArray(4096, fill=2)
            errors[key] = None
        except OSError as exc:
            errors[key] = f"{type(exc).__name__}: {exc}"
    try:
        store["h"] = b"host-only"  # a value with no device object is stored as it is
        host_only = "h" in store
    except OSError as exc:
        host_only = f"{type(exc).__name__}: {exc}"
finally:
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)

in_store = {k: k in store for k in ("new", "old")}
gc.collect()
files_after = files_in(root)
empty = sorted(f for f, n in files_after.items() if n == 0)
store.clear()
gc.collect()
left_after_clear = sorted(files_in(root))

confirmed = (
    old_tier == "disk"
    and errors["new"] is not None
    and errors["old"] is not None
    and not in_store["new"]
    and not in_store["old"]
    and bool(empty)
)
verdict(
    confirmed,
    "on a full disk a set raises the write's OSError and the value is gone (an overwrite "
    "loses the old value too), and the failed write leaves an empty file behind",
    [
        versions(),
        f"before the disk filled: 'old' on {old_tier}, files {files_before}",
        f"store['new'] = ... on a full disk: {errors['new']}; 'new' in store: {in_store['new']}",
        f"store['old'] = ... (overwrite) on a full disk: {errors['old']}; 'old' in store: "
        f"{in_store['old']}",
        f"a host-only value stored on the full disk (no write): in store = {host_only}",
        f"files after (bytes): {files_after}; empty files: {empty}",
        f"files after store.clear() and gc: {left_after_clear}",
    ],
)
