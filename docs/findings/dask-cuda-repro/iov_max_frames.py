"""Candidate: an object that serialises to more than IOV_MAX (1024) frames
cannot be spilled to disk: dask_cuda.disk_io.disk_write hands all frames to one
os.writev call, which fails with EINVAL.

Run: ../../../.venv-daskcuda/bin/python iov_max_frames.py
"""
import os
import tempfile

import numpy as np
from _common import DevArray, new_store, tier, verdict, versions
from distributed.protocol import dask_deserialize, dask_serialize


class WideDevObj(DevArray):
    """A device object made of many buffers (like a wide DataFrame: one or more
    frames per column)."""

    def __init__(self, ncols, fill=1):
        super().__init__(0)
        self.cols = [np.full(8, fill, dtype="u1") for _ in range(ncols)]

    @property
    def nbytes(self):
        return 8 * len(self.cols)


@dask_serialize.register(WideDevObj)
def _ser(x):
    return {"n": len(x.cols)}, [c.data for c in x.cols]


@dask_deserialize.register(WideDevObj)
def _de(header, frames):
    obj = WideDevObj(0)
    obj.cols = [np.frombuffer(f, dtype="u1").copy() for f in frames]
    return obj


iov_max = os.sysconf("SC_IOV_MAX")
results = {}
root = tempfile.mkdtemp()  # the disk path is class-level: one per process
for ncols in (1000, 1100):
    store = new_store(device_memory_limit=0, memory_limit=1, spill_dir=root)  # device -> host -> disk
    try:
        store[f"w{ncols}"] = WideDevObj(ncols)
        p = store[f"w{ncols}"]
        results[ncols] = f"ok, tier={tier(p)}, frames={len(p._pxy_get().obj[0]['disk-io-header']['frame-lengths'])}"
    except Exception as exc:
        results[ncols] = (
            f"{type(exc).__name__}: {exc}; key stored afterwards: {f'w{ncols}' in store}; "
            f"manager: {store.manager!r}"
        )
    del store

verdict(
    results[1000].startswith("ok") and not results[1100].startswith("ok"),
    "an object with more than IOV_MAX frames fails to spill to disk (the error escapes __setitem__)",
    [versions(), f"SC_IOV_MAX={iov_max}"] + [f"{n} frames: {r}" for n, r in results.items()],
)
