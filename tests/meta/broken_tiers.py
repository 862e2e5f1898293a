"""Broken adapters, tiers and time: the device's peak, unspill, recency, cascades, evict,
spill on demand and close. Each wraps the reference with ONE bug a store author could make."""

from __future__ import annotations

from broken_base import Patching, Wrapped, _Broken, _OwnOom, _OwnOomHandler


# ------------------------------------------------------------------ peak and unspill
class _CopyFirstWrapped(Wrapped):
    def __getitem__(self, key):
        inner = self.inner
        if inner.tier_of(key) == "device":
            return inner[key]
        limit = inner.device_memory_limit
        inner.device_memory_limit = 1 << 62  # copy back first ...
        try:
            value = inner[key]
        finally:
            inner.device_memory_limit = limit
        over = inner.snapshot().device_bytes - limit
        if over > 0:
            inner.evict(over)  # ... then make room: the limit holds again once the call returns
        return value


class UnspillCopiesFirst(_Broken):
    """Unspill copies the value back to the device first and makes room afterwards: the limit
    holds between calls, not during the get."""

    name = "broken-unspill-copies-first"
    wrapper = _CopyFirstWrapped
    violates = ("6.2", "4.2")


class _StagingArrayType:
    """The reference's array handler, staging every spill through a contiguous device copy
    (like ``cupy.ascontiguousarray(x).get()``)."""

    def __init__(self):
        from reference_impl.store.dispatch import ArrayType

        self._base = ArrayType()

    def allocations(self, obj, device):
        return self._base.allocations(obj, device)

    def metadata(self, obj):
        return self._base.metadata(obj)

    def to_device(self, payload, device):
        return self._base.to_device(payload, device)

    def to_host(self, obj, device):
        staged = obj.copy()  # a device allocation of the value's size, during the spill
        return self._base.to_host(staged, device)


class StagesSpillOnDevice(Patching):
    """Spilling packs each array into a fresh device buffer before the copy to host, so every
    eviction needs the very device memory it is meant to free."""

    name = "broken-stages-spill-on-device"
    violates = ("4.2",)

    def patch(self):
        from reference_impl import SimArray
        from reference_impl.store import dispatch  # private: the registry has no unregister

        self.set_item(dispatch._registry, SimArray, _StagingArrayType())


class _DefensiveCopyWrapped(Wrapped):
    def __setitem__(self, key, value):
        if self.device.is_device_array(value):
            value = value.copy()  # "the caller may write to it later": a private copy, made
        super().__setitem__(key, value)  # before anything was evicted to make room for it


class CopiesOnSet(_Broken):
    """Keeps a private device copy of every array it is given, made before eviction."""

    name = "broken-copies-on-set"
    wrapper = _DefensiveCopyWrapped
    violates = ("4.2",)


class _LazyWrapped(Wrapped):
    def __getitem__(self, key):
        inner = self.inner
        with inner._lock:  # private: the proxies as stored, without bringing them back
            entry = inner._entries.get(key)
            if entry is not None and not entry.is_host_value:
                return entry.value  # spilled proxies unspill on first use instead
        return inner[key]


class LazyUnspill(_Broken):
    """store[key] hands out the value still spilled; it comes back on its first use
    (dask-cuda's JIT unspill), so the get neither unspills nor counts as use."""

    name = "broken-lazy-unspill"
    wrapper = _LazyWrapped
    violates = ("6.1", "5.1")


# ------------------------------------------------------------------ recency
class _MappingContainsWrapped(Wrapped):
    def __contains__(self, key):
        try:  # collections.abc.Mapping's own __contains__: a get
            self[key]
        except KeyError:
            return False
        return True


class ContainsIsAGet(_Broken):
    """Does not define __contains__, so ``key in store`` is Mapping's default: a get, which
    unspills the value and refreshes its recency."""

    name = "broken-contains-is-a-get"
    wrapper = _MappingContainsWrapped
    violates = ("5.3",)


class PickleUnspills(Patching):
    """Pickling a value the store handed out brings it back to the device first (the proxy's
    __reduce__ uses the object), so a pickle unspills and refreshes recency."""

    name = "broken-pickle-unspills"
    violates = ("5.3",)

    def patch(self):
        from reference_impl.store import proxy as P  # private: process-wide

        def __reduce__(self):
            obj = P._use(self)  # real use: unspill, touch
            d = P.state_of(self)
            return P._rebuild_proxy, (obj, d.meta, d.type_, d.handler)

        self.set(P.ProxyObject, "__reduce__", __reduce__)


class UseIsNotRecorded(Patching):
    """A proxy brings its value back when used, but only store[key] records a use: arithmetic,
    NumPy calls and attribute access on a handed-out value leave its recency stale."""

    name = "broken-use-not-recorded"
    violates = ("5.2",)

    def patch(self):
        from reference_impl.store.hostfile import ProxifyHostFile
        from reference_impl.store.recency import DEVICE

        real = ProxifyHostFile.proxy_use

        def proxy_use(self, state):
            with self._lock:  # private: put the device LRU back as it was before the use
                recency = self._recency
                order = recency.device_units()
                obj = real(self, state)
                for unit in order:
                    if unit.lru == DEVICE:
                        recency._append(unit, next(recency.ticks))  # re-queued in the old order
                return obj

        self.set(ProxifyHostFile, "proxy_use", proxy_use)


# ------------------------------------------------------------------ cascades and limits
class HostTierIsFifo(Patching):
    """The host tier is an insertion-ordered dict: host -> disk takes the value that arrived on
    host first, not the least recently used (a host value used in place keeps its old slot)."""

    name = "broken-host-tier-fifo"
    violates = ("5.4",)

    def patch(self):
        from reference_impl.store.recency import HOST, Recency  # private: process-wide

        real_place = Recency.place

        def place(self, unit, tier):
            arrivals = self.__dict__.setdefault("arrivals", {})
            if tier == "host" and unit.lru != HOST:
                arrivals.pop(unit, None)
                arrivals[unit] = None  # the order units arrived on host, never refreshed
            real_place(self, unit, tier)

        def host_victims(self, size):
            arrivals = self.__dict__.get("arrivals", {})
            return iter([u for u in arrivals if u.lru == HOST and u not in self.pinned])

        self.set(Recency, "place", place)
        self.set(Recency, "host_victims", host_victims)


class EvictSkipsHostLimit(_Broken):
    """The manual evict moves values device -> host and returns, without the host -> disk step
    every other spill path takes."""

    name = "broken-evict-skips-host-limit"
    violates = ("4.5",)

    def evict(self, store, nbytes):
        inner = store.inner
        limit = inner.memory_limit
        inner.memory_limit = None
        try:
            return inner.evict(nbytes)
        finally:
            inner.memory_limit = limit


class _InsertionOrderOomHandler(_OwnOomHandler):
    """Spill on demand walks the keys in insertion order (``for key in self.data``), not by
    recency. Simulated by touching the device-resident keys in insertion order first."""

    def __call__(self, shortfall):
        store = self.store_ref()
        if store is None:
            return False
        snap = store.snapshot()
        for key in list(store):
            if snap.tiers.get(key) == "device":
                store[key]
        return super().__call__(shortfall)


class OomSpillsInInsertionOrder(_OwnOom):
    """The OOM handler spills the oldest-inserted values, not the least recently used."""

    name = "broken-oom-insertion-order"
    violates = ("8.1", "5.4")
    handler = _InsertionOrderOomHandler


class LimitIsExclusive(_Broken):
    """A value fits only if it is strictly below the room left (``>=`` for ``>``): a value of
    exactly the device limit never stays on the device."""

    name = "broken-limit-exclusive"
    violates = ("4.1",)

    def create_store(self, env):
        from dataclasses import replace

        return super().create_store(replace(env, device_limit=max(0, env.device_limit - 1)))


class HostLimitZeroMeansNone(_Broken):
    """``if self.memory_limit:``: a host limit of 0 is falsy, so it means no host limit."""

    name = "broken-host-limit-zero-is-none"
    violates = ("4.4",)

    def create_store(self, env):
        from dataclasses import replace

        return super().create_store(replace(env, host_limit=env.host_limit or None))


class DeviceLimitZeroMeansNone(_Broken):
    """``if not device_memory_limit: device_memory_limit = total device memory``: a device
    limit of 0 means 'the whole device'."""

    name = "broken-device-limit-zero-is-all"
    violates = ("4.1",)

    def create_store(self, env):
        from dataclasses import replace

        return super().create_store(
            replace(env, device_limit=env.device_limit or env.device.capacity)
        )


class EvictAtLeastOne(_Broken):
    """evict() is a do-while loop: it spills one value before it checks how much is asked, so
    evict(0) spills the least recently used value."""

    name = "broken-evict-at-least-one"
    violates = ("4.7",)

    def evict(self, store, nbytes):
        return super().evict(store, max(1, nbytes))


class EvictReportsAsked(_Broken):
    """evict(n) returns n, the bytes asked for, not the bytes it freed."""

    name = "broken-evict-reports-asked"
    violates = ("4.7",)

    def evict(self, store, nbytes):
        super().evict(store, nbytes)
        return nbytes


# ------------------------------------------------------------------ spill on demand
class _AlwaysProgressHandler(_OwnOomHandler):
    def __call__(self, shortfall):
        if self.store_ref() is None:
            return False
        super().__call__(shortfall)
        return True  # "I spilled what I could": said also when there was nothing to spill


class OomAlwaysReportsProgress(_OwnOom):
    """The OOM handler returns True whenever its store is alive, freed or not, so the device
    retries an allocation that cannot fit thousands of times."""

    name = "broken-oom-always-progress"
    violates = ("8.2", "8.3")
    handler = _AlwaysProgressHandler


class _UntilFreedHandler(_OwnOomHandler):
    def __call__(self, shortfall):
        store = self.store_ref()
        if store is None:
            return False
        freed = 0
        while freed < shortfall:  # no way out when nothing is left to spill
            freed += store.evict(max(1, shortfall - freed))
        return True


class OomLoopsUntilFreed(_OwnOom):
    """The OOM handler loops until it has freed the shortfall: with nothing left to spill it
    spins forever (a livelock; it only ends when the store is closed)."""

    name = "broken-oom-loops-until-freed"
    violates = ("8.3",)
    handler = _UntilFreedHandler


# ------------------------------------------------------------------ close
class CloseLeavesDirectory(_Broken):
    """close() unlinks every spill file it knows but leaves the directory it made for them."""

    name = "broken-close-leaves-directory"
    violates = ("11.3", "9.5")

    def close_store(self, store):
        store.inner._finalizer.detach()  # private: the store's rmtree of its own directory
        super().close_store(store)


_STORES_EVER_MADE: list = []


class CloseKeepsValues(_Broken):
    """Every store is kept in a process-wide registry (for a memory report), and close() drops
    files and handler but not the device values: they live on with the registry."""

    name = "broken-close-keeps-values"
    violates = ("11.5",)

    def close_store(self, store):
        inner = store.inner
        with inner._lock:  # private: what the store still references when close() runs
            _STORES_EVER_MADE.append([e.value for e in inner._entries.values()])
        super().close_store(store)


class CloseRemovesSpillDir(_Broken):
    """close() runs shutil.rmtree on the directory it was given, not on the one it created:
    the caller's directory and everything else in it are gone."""

    name = "broken-close-removes-spill-dir"
    violates = ("11.3",)

    def create_store(self, env):
        store = super().create_store(env)
        store.given_dir = env.spill_dir
        return store

    def close_store(self, store):
        import shutil

        super().close_store(store)
        shutil.rmtree(store.given_dir, ignore_errors=True)


# ------------------------------------------------------------------ the rest of limits, recency, unspill
class _NoOversizeCaseWrapped(Wrapped):
    def __setitem__(self, key, value):
        n = int(getattr(value, "nbytes", 0) or 0)
        if n > self.inner.device_memory_limit:
            self.inner.evict(1 << 62)  # make room as for any value: everything else goes
        super().__setitem__(key, value)


class OverLimitValueEvictsOthers(_Broken):
    """No special case for a value over the limit: storing it first evicts everything else,
    then the value goes to host anyway (dask-cuda's behaviour)."""

    name = "broken-over-limit-evicts-others"
    wrapper = _NoOversizeCaseWrapped
    violates = ("4.3",)


class NegativeLimitClamped(_Broken):
    """A negative device limit is clamped to 0 (``max(0, limit)``) instead of rejected."""

    name = "broken-negative-limit-clamped"
    violates = ("4.6",)

    def create_store(self, env):
        from dataclasses import replace

        if isinstance(env.device_limit, int) and env.device_limit < 0:
            env = replace(env, device_limit=0)
        return super().create_store(env)


class EvictWithoutTheCapability(_Broken):
    """Does not declare store.evict.manual, yet its evict() spills (an undocumented method
    that callers cannot rely on, and that changes the store)."""

    name = "broken-evict-undeclared"
    violates = ("4.8",)
    capabilities = _Broken.capabilities - {"store.evict.manual"}


class LruReportedNewestFirst(_Broken):
    """inspect() reports lru most recently used first."""

    name = "broken-lru-newest-first"
    violates = ("5.5",)

    def inspect(self, store):
        from conformance.api import Snapshot

        snap = super().inspect(store)
        lru = None if snap.lru is None else list(reversed(snap.lru))
        return Snapshot(snap.tiers, snap.device_bytes, snap.host_bytes, snap.disk_bytes, lru)


class _HostCopyWrapped(Wrapped):
    def __getitem__(self, key):
        if self.inner.tier_of(key) == "device":
            return self.inner[key]
        value = self.inner[key]
        if self.device.is_device_array(value):
            return self.device.to_host(value)  # "it was on host anyway": the host copy
        return value


class SpilledValueHandedOutOnHost(_Broken):
    """A spilled array is handed out as a host (numpy) array, not as a device array."""

    name = "broken-spilled-handed-out-on-host"
    wrapper = _HostCopyWrapped
    violates = ("6.3",)


class _KeepsDiskCopyWrapped(Wrapped):
    def __getitem__(self, key):
        if self.inner.tier_of(key) != "disk":
            return self.inner[key]
        import os

        from conformance.store.harness import files_under

        saved = {}
        for path in files_under(self.inner.spill_dir):
            try:
                os.link(path, path + ".keep")
                saved[path] = path + ".keep"
            except OSError:
                pass
        try:
            return self.inner[key]
        finally:
            for path, link in saved.items():
                if os.path.exists(path):
                    os.unlink(link)
                else:
                    os.rename(link, path)  # the unspilled value's file stays, uncounted


class UnspillKeepsDiskFile(_Broken):
    """Unspilling from disk leaves the value's file behind (to spill it again cheaply) but
    stops counting it: disk_bytes no longer matches the files."""

    name = "broken-unspill-keeps-disk-file"
    wrapper = _KeepsDiskCopyWrapped
    violates = ("6.4",)


class RegisteringAgainIsAUse(_Broken):
    """register_external of an object it already tracks is treated as a use: the object
    becomes the most recently used (and is brought back if it was spilled)."""

    name = "broken-registering-again-is-a-use"
    violates = ("5.3",)

    def register_external(self, store, obj):
        import numpy as np

        from reference_impl.store.proxy import ProxyObject

        proxy = super().register_external(store, obj)
        if type(obj) is ProxyObject:
            np.asarray(proxy)  # "make sure it is resident": a use
        return proxy


ZOO: dict[str, tuple[type, str]] = {
    "unspill_copies_first": (UnspillCopiesFirst, "STORE-UNSPILL-002"),
    "stages_spill_on_device": (StagesSpillOnDevice, "STORE-PEAK-001"),
    "copies_on_set": (CopiesOnSet, "STORE-PEAK-001"),
    "lazy_unspill": (LazyUnspill, "STORE-UNSPILL-001"),
    "contains_is_a_get": (ContainsIsAGet, "STORE-RECENCY-002"),
    "pickle_unspills": (PickleUnspills, "STORE-RECENCY-002"),
    "use_not_recorded": (UseIsNotRecorded, "STORE-RECENCY-001"),
    "registering_again_is_a_use": (RegisteringAgainIsAUse, "STORE-RECENCY-003"),
    "host_tier_fifo": (HostTierIsFifo, "STORE-CASCADE-001"),
    "evict_skips_host_limit": (EvictSkipsHostLimit, "STORE-CASCADE-002"),
    "oom_insertion_order": (OomSpillsInInsertionOrder, "STORE-CASCADE-003"),
    "limit_exclusive": (LimitIsExclusive, "STORE-LIMIT-007"),
    "host_limit_zero_is_none": (HostLimitZeroMeansNone, "STORE-LIMIT-007"),
    "device_limit_zero_is_all": (DeviceLimitZeroMeansNone, "STORE-LIMIT-007"),
    "evict_at_least_one": (EvictAtLeastOne, "STORE-EVICT-003"),
    "evict_reports_asked": (EvictReportsAsked, "STORE-EVICT-003"),
    "oom_always_progress": (OomAlwaysReportsProgress, "STORE-OOM-005"),
    "oom_loops_until_freed": (OomLoopsUntilFreed, "STORE-OOM-006"),
    "close_leaves_directory": (CloseLeavesDirectory, "STORE-CLOSE-001"),
    "close_keeps_values": (CloseKeepsValues, "STORE-CLOSE-001"),
    "close_removes_spill_dir": (CloseRemovesSpillDir, "STORE-CLOSE-001"),
    "over_limit_evicts_others": (OverLimitValueEvictsOthers, "STORE-LIMIT-002"),
    "negative_limit_clamped": (NegativeLimitClamped, "STORE-LIMIT-006"),
    "evict_undeclared": (EvictWithoutTheCapability, "STORE-EVICT-002"),
    "lru_newest_first": (LruReportedNewestFirst, "STORE-LIMIT-004"),
    "spilled_handed_out_on_host": (SpilledValueHandedOutOnHost, "STORE-UNSPILL-004"),
    "unspill_keeps_disk_file": (UnspillKeepsDiskFile, "STORE-UNSPILL-001"),
}
