"""How the dask-cuda adapter runs dask-cuda's ProxifyHostFile on the sim device.

dask-cuda recognises device objects through dispatch tables, and on a GPU it
finds them by ``__cuda_array_interface__``.  ``SimArray`` does *not* get a fake
``__cuda_array_interface__``; instead :func:`register_sim` registers the type,
once per process, in every table dask-cuda's store path consults:

* ``dask_cuda.proxify_device_objects.dispatch``: a ``SimArray`` leaf is wrapped
  in a ``ProxyObject`` (same code path cuDF objects take);
* ``dask_cuda.get_device_memory_objects.dispatch``: a ``SimArray`` reports its
  *base allocation* (the ndarray that owns the memory, like CuPy's
  ``MemoryPointer.mem``), so views of one allocation are tallied once;
* ``dask_cuda.is_device_object.is_device_object``: True for ``SimArray``;
* ``dask.sizeof``: ``nbytes`` of the array (what dask-cuda registers for CuPy);
* ``distributed.protocol`` ``dask_serialize`` / ``dask_deserialize`` (used by
  the device->host spill and, through ``serialize_and_split``, by the "disk"
  family): the reference's own registration,
  ``reference_impl.device.sim_comms.register_dask_serializers`` (defined once,
  there): frames are a d2h copy (``device.to_host``); deserialising allocates
  on the originating sim device (``device.asarray``), so an unspill goes through
  the device ledger and can trigger the device's OOM handlers.  The "pickle"
  family needs nothing: ``SimArray`` already pickles through its device.  The
  "cuda" family is only used by dask-cuda for UCX transport, which the store
  suite does not exercise, so it is left unregistered.

Spill-on-demand: dask-cuda builds its OOM callback (the ``oom`` closure inside
``ProxifyHostFile.initialize_spill_on_demand_once``) only when ``import rmm.mr``
succeeds, and installs it by wrapping the current RMM resource in
``rmm.mr.FailureCallbackResourceAdaptor(current_mr, oom)``.  On sim the adapter
calls that method itself once, right after construction, with a tiny stand-in
for the ``rmm.mr`` API placed in ``sys.modules`` *only for the duration of that
call* (any real ``rmm`` is restored afterwards).  The stand-in adaptor captures
dask-cuda's unmodified ``oom`` closure and registers it with
``device.add_oom_handler``.  No dask-cuda code is patched.  One difference from
RMM remains: RMM passes the requested allocation size to the callback, the sim
device passes the shortfall; either way dask-cuda spills at least that much.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

from conformance.adapters._dask_cuda_import import import_dask_cuda

_registered = False
_register_lock = threading.Lock()


def _owner(arr: Any) -> Any:
    """The ndarray that owns ``arr``'s memory (end of the ``.base`` chain)."""
    import numpy as np

    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


def register_sim() -> None:
    """Teach dask-cuda and distributed about ``SimArray`` (idempotent, process-wide)."""
    global _registered
    with _register_lock:
        if _registered:
            return
        mods = import_dask_cuda()
        from dask.sizeof import sizeof

        from reference_impl.device import SimArray
        from reference_impl.device.sim_comms import register_dask_serializers

        pdo, gdmo, ido = mods["pdo"], mods["gdmo"], mods["ido"]

        @pdo.dispatch.register(SimArray)
        def _proxify_sim_array(obj, proxied_id_to_proxy, found_proxies, excl_proxies):
            return pdo.proxify(obj, proxied_id_to_proxy, found_proxies)

        @gdmo.dispatch.register(SimArray)
        def _sim_device_memory_objects(obj):
            return [_owner(obj)]

        @ido.is_device_object.register(SimArray)
        def _sim_is_device_object(obj):
            return True

        @sizeof.register(SimArray)
        def _sizeof_sim_array(x):
            return int(x.nbytes)

        # The "dask" family serializers are the reference's own (one definition,
        # reference_impl/device/sim_comms.py): the sim device's alone, not the
        # reference store's (reference_impl.register() would install those too).
        register_dask_serializers()

        _registered = True


# --------------------------------------------------------------------------
# RMM stand-in for spill-on-demand


class _SimResource:
    """Stands for the current RMM memory resource of a sim device."""

    def __init__(self, device: Any) -> None:
        self.device = device


class _SimFailureCallbackResourceAdaptor:
    """Mimics ``rmm.mr.FailureCallbackResourceAdaptor(upstream_mr, callback)``."""

    def __init__(self, upstream_mr: Any, callback: Any) -> None:
        self.upstream_mr = upstream_mr
        self.callback = callback


@contextlib.contextmanager
def rmm_standin(device: Any, installed: list) -> Iterator[None]:
    """Make ``import rmm.mr`` resolve to a sim stand-in, for this block only."""
    rmm_mod = types.ModuleType("rmm")
    mr_mod = types.ModuleType("rmm.mr")
    current = [_SimResource(device)]

    def get_current_device_resource():
        return current[0]

    def set_current_device_resource(mr):
        current[0] = mr
        if isinstance(mr, _SimFailureCallbackResourceAdaptor):
            installed.append(mr.callback)

    mr_mod.FailureCallbackResourceAdaptor = _SimFailureCallbackResourceAdaptor
    mr_mod.get_current_device_resource = get_current_device_resource
    mr_mod.set_current_device_resource = set_current_device_resource
    rmm_mod.mr = mr_mod
    saved = {name: sys.modules.get(name) for name in ("rmm", "rmm.mr")}
    sys.modules["rmm"] = rmm_mod
    sys.modules["rmm.mr"] = mr_mod
    try:
        yield
    finally:
        for name, mod in saved.items():
            if mod is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = mod
