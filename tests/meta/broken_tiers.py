"""Broken adapters, tiers and time: the device's peak, unspill, recency, cascades, evict,
spill on demand and close. Each wraps the reference with ONE bug a store author could make."""

from __future__ import annotations

from broken_base import Wrapped, _Broken


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


class StagesSpillOnDevice(_Broken):
    """Spilling packs each array into a fresh device buffer before the copy to host, so every
    eviction needs the very device memory it is meant to free."""

    name = "broken-stages-spill-on-device"
    violates = ("4.2",)

    def __init__(self):
        super().__init__()
        from reference_impl import SimArray
        from reference_impl.store.dispatch import register_device_type

        register_device_type(SimArray, _StagingArrayType())  # process-wide: a subprocess each


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


ZOO: dict[str, tuple[type, str]] = {
    "unspill_copies_first": (UnspillCopiesFirst, "STORE-UNSPILL-002"),
    "stages_spill_on_device": (StagesSpillOnDevice, "STORE-PEAK-001"),
    "copies_on_set": (CopiesOnSet, "STORE-PEAK-001"),
    "lazy_unspill": (LazyUnspill, "STORE-UNSPILL-001"),
}
