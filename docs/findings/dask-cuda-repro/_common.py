"""Shared helpers for the dask-cuda 26.4 repro scripts (first written for 26.2) (no GPU, no project code).

``DevArray`` is a stand-in "device" array for dask-cuda: a numpy buffer that
exposes ``__cuda_array_interface__`` so dask-cuda's default dispatches proxify
and tally it exactly like a CuPy array (these scripts never touch CUDA; the
interface dict is only looked at with ``hasattr``).
"""

from __future__ import annotations

import os
import sys
import tempfile
import types

import numpy as np
from dask.sizeof import sizeof


class DevArray:
    def __init__(self, nbytes: int, fill: int = 0):
        self.buf = np.full(nbytes, fill, dtype="u1")

    @property
    def __cuda_array_interface__(self):  # presence is what dask-cuda checks
        return {"shape": self.buf.shape, "typestr": "|u1", "data": (0, False), "version": 3}

    @property
    def nbytes(self) -> int:
        return self.buf.nbytes

    def __eq__(self, other):
        return isinstance(other, DevArray) and np.array_equal(self.buf, other.buf)


@sizeof.register(DevArray)
def _sizeof_devarray(x):
    return x.nbytes


def new_store(device_memory_limit, memory_limit, spill_dir=None):
    from dask_cuda.proxify_host_file import ProxifyHostFile

    spill_dir = spill_dir or tempfile.mkdtemp(prefix="dask-cuda-repro-")
    return ProxifyHostFile(
        spill_dir,
        device_memory_limit=device_memory_limit,
        memory_limit=memory_limit,
        spill_on_demand=True,
    )


def tier(proxy) -> str:
    s = proxy._pxy_get().serializer
    return {"disk": "disk", "dask": "host", "pickle": "host"}.get(s, "device")


def install_oom_callback(store):
    """Run dask-cuda's own initialize_spill_on_demand_once() against a tiny
    stand-in for ``rmm.mr`` and return the ``oom(nbytes)`` closure it builds
    (RMM itself would call it from FailureCallbackResourceAdaptor)."""
    captured = []
    rmm = types.ModuleType("rmm")
    mr = types.ModuleType("rmm.mr")

    class FailureCallbackResourceAdaptor:
        def __init__(self, upstream, callback):
            self.upstream_mr = upstream
            self.callback = callback

    mr.FailureCallbackResourceAdaptor = FailureCallbackResourceAdaptor
    mr.get_current_device_resource = lambda: object()
    mr.set_current_device_resource = lambda r: captured.append(r.callback)
    rmm.mr = mr
    saved = {k: sys.modules.get(k) for k in ("rmm", "rmm.mr")}
    sys.modules.update({"rmm": rmm, "rmm.mr": mr})
    try:
        store.initialize_spill_on_demand_once()
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    assert captured, "dask-cuda did not install an OOM callback"
    return captured[0]


def verdict(confirmed: bool, claim: str, evidence: list[str]) -> int:
    print(("CONFIRMED" if confirmed else "REFUTED") + ": " + claim)
    for line in evidence:
        print("  - " + line)
    return 0


def versions() -> str:
    from importlib.metadata import version

    return f"dask-cuda=={version('dask-cuda')} distributed=={version('distributed')} python {sys.version.split()[0]} on {os.uname().sysname}"
