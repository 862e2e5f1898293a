"""Conformance adapter for the real dask-cuda ProxifyHostFile (JIT-unspill).

Short name: ``dask-cuda`` (``--impl=dask-cuda``), or
``--impl=conformance.adapters.dask_cuda:adapter``.

dask-cuda 26.2.0 is the last release that ships ``ProxifyHostFile``; it was
removed in 26.6.  Build an environment with ``ci/dask-cuda-env.sh``.  Nothing
here imports dask-cuda at module import time: in an environment without it the
module imports fine, and calling :func:`adapter` (or using the adapter) raises
:class:`DaskCudaUnavailableError` with the fix in the message.

How dask-cuda is run on the sim device
--------------------------------------
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

Global state (dask-cuda design, see docs/findings/dask-cuda.md)
---------------------------------------------------------------
* The disk-spill location is a class attribute,
  ``ProxifyHostFile._spill_to_disk``; a second store with another directory
  raises ``ValueError("Cannot change the JIT-Unspilling disk path")``.  To give
  every store its own ``env.spill_dir`` the adapter resets that attribute before
  constructing a store whose directory differs.  That *retargets every live
  store*: disk spills of an older store then land in the newer store's
  directory.  (The adapter holds each store's ``SpillToDiskProperties`` while
  the store lives, so the old ``TemporaryDirectory``, with the files older
  disk-resident proxies still point at, is not collected by a retarget.)
  Tests that keep two stores with disk spilling alive at once, in different
  directories, therefore see one store's files in the other's directory.
* ``ProxifyHostFile.lock`` is one class-level ``RLock`` shared by all stores.
* The serializer registrations above are process-wide (dispatch tables).
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
import types
import weakref
from collections.abc import Iterator, MutableMapping
from typing import Any

INSTALL_HINT = "dask-cuda is not installed; run ci/dask-cuda-env.sh"
NAME = "dask-cuda"

# "No limit": dask-cuda's ProxyManager compares with ints and formats the limit
# with dask.utils.format_bytes, so an int is required (None would crash).
_NO_LIMIT = 2**62


try:
    from conformance.api import Unavailable as _UnavailableBase
except Exception:  # pragma: no cover - before/without the suite's api module
    _UnavailableBase = RuntimeError


class DaskCudaUnavailableError(_UnavailableBase):
    """dask-cuda (with ProxifyHostFile) cannot be imported in this environment.

    A ``conformance.api.Unavailable``, so ``--impl=dask-cuda`` becomes a usage
    error that names the fix.
    """


def _import_dask_cuda() -> dict[str, Any]:
    """Import the dask-cuda pieces the adapter uses, or fail with the fix."""
    try:
        import dask_cuda  # noqa: F401
        from dask_cuda import get_device_memory_objects as gdmo
        from dask_cuda import is_device_object as ido
        from dask_cuda import proxify_device_objects as pdo
        from dask_cuda.proxify_host_file import ProxifyHostFile
        from dask_cuda.proxy_object import ProxyObject
    except ImportError as exc:
        raise DaskCudaUnavailableError(f"{INSTALL_HINT} ({exc})") from exc
    except Exception as exc:  # e.g. a CUDA/NVML probe failing at import time
        raise DaskCudaUnavailableError(
            f"dask-cuda failed to import ({type(exc).__name__}: {exc}); run ci/dask-cuda-env.sh"
        ) from exc
    return {
        "ProxifyHostFile": ProxifyHostFile,
        "ProxyObject": ProxyObject,
        "pdo": pdo,
        "gdmo": gdmo,
        "ido": ido,
    }


def _dask_cuda_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dask-cuda")
    except PackageNotFoundError:  # pragma: no cover - source checkout
        import dask_cuda

        return str(dask_cuda.__version__)


# --------------------------------------------------------------------------
# Snapshot / StoreEnv: from conformance.api when it exists, else a stand-in
# with the documented fields (so the adapter is usable before the suite lands).
try:  # pragma: no cover - depends on the suite being present
    from conformance.api import Snapshot
except Exception:  # pragma: no cover
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Snapshot:  # type: ignore[no-redef]
        tiers: dict
        device_bytes: int
        host_bytes: int
        disk_bytes: int
        lru: list | None = None


# --------------------------------------------------------------------------
# sim registration
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
        mods = _import_dask_cuda()
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
def _rmm_standin(device: Any, installed: list) -> Iterator[None]:
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


# --------------------------------------------------------------------------
# the adapter


class DaskCudaAdapter:
    """The conformance ``Implementation`` for dask-cuda's ProxifyHostFile."""

    name = NAME
    # Declared honestly; see docs/findings/dask-cuda.md for each choice.
    #  - store.lru.strict: declared because dask-cuda documents LRU eviction;
    #    its recency ignores plain use of device-resident proxies, which the
    #    manifest records as an expected failure rather than hiding it as N/A.
    #  - store.oom.on_demand: dask-cuda's own oom closure, via the RMM stand-in.
    #  - store.unspill.on_access is NOT declared: by design (JIT-unspill)
    #    store[key] returns the stored proxy without unspilling; the value
    #    comes back to the device on first *use* of the proxy instead.
    #  - store.evict.manual: evict() below drives dask-cuda's public
    #    ProxyManager.evict() over the device tier (what its OOM callback does).
    #  - not declared: store.spill.authenticated (no authentication of spill
    #    files), store.proxy (its ProxyObject is a proxy, but is judged as in
    #    the runs of docs/findings/dask-cuda.md).  The faults of its disk tier
    #    (a failing write propagates out of __setitem__/eviction and the key
    #    is lost) are judged, implied by store.spill.disk: see the manifest.
    capabilities = frozenset(
        {
            "store",
            "store.spill.host",
            "store.spill.disk",
            "store.limit.host",
            "store.lru.strict",
            "store.alias.dedup",
            "store.external",
            "store.oom.on_demand",
            "store.evict.manual",
            "store.threadsafe",
            "store.pickle",
        }
    )

    def __init__(self) -> None:
        self._mods = _import_dask_cuda()
        self.version = _dask_cuda_version()
        # id(store) -> (weakref to store, device, oom handler or None, its
        # SpillToDiskProperties).  Stores are MutableMappings, hence unhashable:
        # keyed by id.  The device's OOM handler (dask-cuda's closure) holds the
        # store until close_store().
        self._stores: dict[int, tuple[Any, Any, Any, Any]] = {}

    def __repr__(self) -> str:
        return f"<DaskCudaAdapter dask-cuda=={self.version}>"

    # -- store lifecycle -----------------------------------------------------
    def create_store(self, env: Any) -> MutableMapping:
        ProxifyHostFile = self._mods["ProxifyHostFile"]
        device = env.device
        if getattr(device, "kind", None) == "sim":
            register_sim()
        elif getattr(device, "kind", None) != "cuda":
            raise TypeError(f"dask-cuda adapter: unsupported device {device!r}")

        self._retarget_disk_path(env.spill_dir)
        # Passed through unchanged: ProxifyHostFile does no validation of its own
        # (LocalCUDACluster parses limits before they reach it), and the adapter
        # must not add any.  Only None ("no limit") is mapped, to an int, and a host
        # limit of 0 to 1 byte: dask-cuda follows distributed's "Set to zero for no
        # limit" (``if self._host_memory_limit: self.maybe_evict_from_host()``), so the
        # suite's "nothing stays on host" is spelled 1 (every proxy tallies >= 32 B).
        device_limit = _NO_LIMIT if env.device_limit is None else env.device_limit
        host_limit = 1 if env.host_limit == 0 else env.host_limit
        store = ProxifyHostFile(
            str(env.spill_dir),
            device_memory_limit=device_limit,
            memory_limit=host_limit,
            shared_filesystem=False,
            compatibility_mode=False,
            spill_on_demand=True,
            gds_spilling=False,
        )
        handler = None
        if getattr(device, "kind", None) == "sim":
            installed: list = []
            with _rmm_standin(device, installed):
                store.initialize_spill_on_demand_once()
            if installed:
                handler = installed[-1]
                device.add_oom_handler(handler)
        # On CUDA, dask-cuda installs its RMM adaptor itself on the first
        # __setitem__ (needs RMM to be the allocator of env.device).
        # The store's disk location (class-level, see the module docstring), held so
        # that a later store's retarget does not collect it (and its
        # TemporaryDirectory, with this store's spill files) while this one lives.
        props = ProxifyHostFile._spill_to_disk
        self._stores[id(store)] = (weakref.ref(store), device, handler, props)
        return store

    def _live_stores(self) -> list:
        live = []
        for key, (ref, _device, _handler, _props) in list(self._stores.items()):
            store = ref()
            if store is None:
                self._stores.pop(key, None)
            else:
                live.append(store)
        return live

    def _retarget_disk_path(self, spill_dir: Any) -> None:
        import pathlib

        ProxifyHostFile = self._mods["ProxifyHostFile"]
        wanted = pathlib.Path(os.path.join(str(spill_dir), "jit-unspill-disk-storage")).resolve()
        current = ProxifyHostFile._spill_to_disk
        if current is not None and current.root_dir != wanted:
            # Class-level singleton: see the module docstring.
            ProxifyHostFile._spill_to_disk = None

    def close_store(self, store: MutableMapping) -> None:
        """``clear()``, drop the OOM handler, then what a dask worker's close does.

        dask-cuda has no close: a ProxifyHostFile lives as long as its worker, and
        distributed removes the worker's local directory at close, with the
        ``jit-unspill-disk-storage`` root that ``SpillToDiskProperties`` made in it
        (``os.makedirs(self.root_dir, exist_ok=True)``; dask-cuda never removes it).
        The adapter does the same for the store's own spill location: its
        ``TemporaryDirectory`` and, once empty, the root, unless another live store
        still writes there (every live store spills to the class-level location).
        """
        ProxifyHostFile = self._mods["ProxifyHostFile"]
        try:
            store.clear()
        finally:
            _ref, device, handler, props = self._stores.pop(id(store), (None, None, None, None))
            if handler is not None:
                with contextlib.suppress(KeyError):
                    device.remove_oom_handler(handler)
            gc.collect()
            live = self._live_stores()
            current = ProxifyHostFile._spill_to_disk
            in_use = any(self._stores[id(s)][3] is props for s in live) or (
                props is current and bool(live)
            )
            if not live:
                ProxifyHostFile._spill_to_disk = None
            if props is not None and not in_use:
                if ProxifyHostFile._spill_to_disk is props:
                    ProxifyHostFile._spill_to_disk = None
                with contextlib.suppress(Exception):
                    props.tmpdir.cleanup()
                with contextlib.suppress(OSError):
                    os.rmdir(props.root_dir)

    def register_external(self, store: MutableMapping, obj: Any) -> Any:
        """``manager.proxify(obj)``: dask-cuda's (post-#712) notion of an external.

        dask-cuda tracks the *proxy* it returns, through a weak reference; the
        caller must keep the returned value (not ``obj``) alive, and use it, for
        the external to stay registered and to be spillable.
        """
        proxied, _incompatible = store.manager.proxify(obj)
        return proxied

    def evict(self, store: MutableMapping, nbytes: int) -> int:
        """Spill >= ``nbytes`` of device-tier proxies, least recent first.

        dask-cuda has no public "evict n device bytes" (``ProxifyHostFile.evict()``
        moves 1% of the host limit to disk, for distributed's memory monitor), so
        this is built from the steps of its automatic spill,
        ``ProxyManager.maybe_evict``: ``ProxyManager.evict`` over
        ``_dev.buffer_info`` with the dask/pickle serializers (what
        ``maybe_evict_from_device`` and the spill-on-demand callback call), then,
        as ``maybe_evict`` does, ``if manager._host_memory_limit:
        manager.maybe_evict_from_host()`` (the host tier cascades to disk), and
        the ``gc.collect()`` of the callback.  Returns dask-cuda's own (nominal)
        count of device bytes freed.

        ``evict(0)`` returns 0 without calling dask-cuda: ``ProxyManager.evict``
        adds a group before it compares (``freed_memory += size; if freed_memory
        >= nbytes: break``), so ``nbytes=0`` would spill one group; dask-cuda's
        own callers never pass 0 (``maybe_evict_from_device`` calls it only when
        ``mem_over_usage > 0``, RMM only for a failed allocation).
        """
        if nbytes <= 0:
            return 0
        manager = store.manager
        freed = manager.evict(
            nbytes=int(nbytes),
            proxies_access=manager._dev.buffer_info,
            serializer=lambda p: p._pxy_serialize(serializers=("dask", "pickle")),
        )
        if manager._host_memory_limit:
            manager.maybe_evict_from_host()
        gc.collect()
        return freed

    # -- inspection (no unspill, no recency change) --------------------------
    def _proxies_in(self, value: Any) -> list:
        ProxyObject = self._mods["ProxyObject"]
        out: list = []
        stack = [value]
        while stack:
            v = stack.pop()
            t = type(v)  # never isinstance(): ProxyObject.__class__ is a property
            if issubclass(t, ProxyObject):
                out.append(v)
            elif t in (list, tuple, set, frozenset):
                stack.extend(v)
            elif t is dict:
                stack.extend(v.values())
        return out

    def inspect(self, store: MutableMapping) -> Any:
        manager = store.manager
        tier_of = {"disk": "disk", "dask": "host", "pickle": "host"}
        with manager.lock:
            with store.lock:
                items = list(store.store.items())
            tiers: dict = {}
            recency: dict = {}
            # last_access of a device buffer group = max over its proxies, which
            # is what dask-cuda's eviction sorts by (buffer_info()).
            group_access: dict[int, tuple[float, int]] = {}
            for last_access, size, proxies in manager._dev.buffer_info():
                for p in proxies:
                    prev = group_access.get(id(p))
                    if prev is None or last_access > prev[0]:
                        group_access[id(p)] = (last_access, size)
            for key, (value, _incompatible) in items:
                proxies = self._proxies_in(value)
                if not proxies:
                    tiers[key] = "host"  # plain host objects stay as they are
                    continue
                kinds = {tier_of.get(p._pxy_get().serializer, "device") for p in proxies}
                # A value whose proxies sit in several tiers is reported by its
                # most device-like part (it still occupies device memory).
                for kind in ("device", "host", "disk"):
                    if kind in kinds:
                        tiers[key] = kind
                        break
                if tiers[key] == "device":
                    accesses = [
                        group_access.get(id(p), (p._pxy_get().last_access, 0))
                        for p in proxies
                        if p._pxy_get().serializer not in tier_of
                    ]
                    recency[key] = (max(a for a, _ in accesses), -sum(s for _, s in accesses))
            device_bytes = manager._dev.mem_usage()
            host_bytes = manager._host.mem_usage()
            disk_bytes = manager._disk.mem_usage()
        order = {k: i for i, (k, _) in enumerate(items)}
        lru = sorted(recency, key=lambda k: (recency[k], order[k]))
        return Snapshot(
            tiers=tiers,
            device_bytes=device_bytes,
            host_bytes=host_bytes,
            disk_bytes=disk_bytes,
            lru=lru,
        )


def adapter() -> DaskCudaAdapter:
    """Factory for ``--impl``: raises DaskCudaUnavailableError without dask-cuda."""
    return DaskCudaAdapter()


__all__ = [
    "INSTALL_HINT",
    "DaskCudaAdapter",
    "DaskCudaUnavailableError",
    "adapter",
    "register_sim",
]
