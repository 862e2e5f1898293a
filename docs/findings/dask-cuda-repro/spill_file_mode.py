"""Contract check (DESIGN.md "Disk files"): the spill directory should be 0700
and each spill file 0600.  dask-cuda creates its directory with
tempfile.TemporaryDirectory (0700) but writes files with plain open(), so their
mode follows the umask (0644 under the usual 022).

Run: ../../../.venv-daskcuda/bin/python spill_file_mode.py
"""
import gc
import os
import stat

from _common import DevArray, new_store, verdict, versions

old = os.umask(0o022)
try:
    store = new_store(device_memory_limit=0, memory_limit=1)  # straight to disk
    store["k"] = DevArray(1000)
    hdr = store["k"]._pxy_get().obj[0]["disk-io-header"]
    path = str(hdr["path"])
    fmode = stat.S_IMODE(os.stat(path).st_mode)
    dmode = stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode)
finally:
    os.umask(old)
verdict(
    fmode != 0o600,
    "spill files are not 0600 (their mode follows the umask)",
    [versions(), f"umask 022: dir {oct(dmode)}, file {oct(fmode)} ({path})"],
)
del hdr
store.clear()
gc.collect()
