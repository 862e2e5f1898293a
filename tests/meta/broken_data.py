"""Broken adapters, data: mapping methods, keys, values, accounting, externals and in-place
writes. Each wraps the reference with ONE bug a store author could make."""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import MutableMapping

from broken_base import Wrapped, _Broken

from conformance.harness import files_under


# ------------------------------------------------------------------ removal paths
class _PopKeepsFileWrapped(Wrapped):
    def pop(self, key, *default):
        saved = {}
        for path in files_under(self.inner.spill_dir):
            try:
                os.link(path, path + ".pop")
                saved[path] = path + ".pop"
            except OSError:
                pass
        try:
            return MutableMapping.pop(self, key, *default)
        finally:
            for path, link in saved.items():
                if os.path.exists(path):
                    os.unlink(link)
                else:
                    os.rename(link, path)  # the popped value's file is never unlinked


class PopKeepsFile(_Broken):
    """pop() reads the value back and forgets to unlink its spill file."""

    name = "broken-pop-keeps-file"
    wrapper = _PopKeepsFileWrapped
    violates = ("9.4", "3.5", "1.6")


class _ClearDeviceWrapped(Wrapped):
    def clear(self):
        tiers = self.inner.snapshot().tiers
        for key in list(self):
            if tiers[key] == "device":  # the fast tier only: spilled keys survive
                del self[key]


class ClearDeviceOnly(_Broken):
    """clear() empties the device tier (``self.fast.clear()``) and forgets host and disk."""

    name = "broken-clear-device-only"
    wrapper = _ClearDeviceWrapped
    violates = ("1.8", "3.3")


class _PopitemIndexWrapped(Wrapped):
    def popitem(self):
        inner = self.inner
        try:
            key = next(iter(inner))
        except StopIteration:
            raise KeyError("popitem(): store is empty") from None
        value = inner[key]
        with inner._lock:  # private: drops the key from the index, bypassing __delitem__
            inner._entries.pop(key)
        self.sizes.pop(key, None)
        self.allocs.pop(key, None)
        return key, value


class PopitemSkipsBookkeeping(_Broken):
    """popitem() removes the key from the index directly, skipping the bookkeeping that
    __delitem__ does (byte counts, recency): a popped host value stays counted."""

    name = "broken-popitem-skips-bookkeeping"
    wrapper = _PopitemIndexWrapped
    violates = ("1.7", "3.3")


# ------------------------------------------------------------------ host objects
class Shallow:
    """A host value as the buggy store sees it: sized with sys.getsizeof (not deep)."""

    def __init__(self, value):
        self.value = value

    def __sizeof__(self):
        return object.__sizeof__(self) + sys.getsizeof(self.value)


_CONTAINERS = (list, tuple, dict, set, frozenset)


class _ShallowWrapped(Wrapped):
    def __setitem__(self, key, value):
        if isinstance(value, _CONTAINERS) and not _has_device(self.device, value):
            value = Shallow(value)
        super().__setitem__(key, value)

    def __getitem__(self, key):
        value = self.inner[key]
        return value.value if isinstance(value, Shallow) else value


def _has_device(device, value) -> bool:
    if isinstance(value, dict):
        return any(_has_device(device, v) for v in value.values())
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_has_device(device, v) for v in value)
    return device.is_device_array(value)


class HostValuesMeasuredShallow(_Broken):
    """Measures host-only values with sys.getsizeof: a list of arrays costs its pointers."""

    name = "broken-host-values-shallow"
    wrapper = _ShallowWrapped
    violates = ("3.7", "4.4")


# ------------------------------------------------------------------ externals
def _keep_file_of(detail):
    file = detail.file
    if file is not None and os.path.exists(file.path):
        try:
            os.link(file.path, file.path + ".orphan")
        except OSError:
            pass


class ExternalDiesKeepsFile(_Broken):
    """When an external dies while on disk its bytes leave the tally, but its spill file is
    never unlinked (the finalizer forgets the record, not the file)."""

    name = "broken-external-dies-keeps-file"
    violates = ("7.3", "3.5")

    def register_external(self, store, obj):
        from reference_impl.store.proxy import ProxyObject, _get_detail

        proxy = super().register_external(store, obj)
        if type(proxy) is ProxyObject:  # private: the file the proxy's detail holds at death
            weakref.finalize(proxy, _keep_file_of, _get_detail(proxy))
        return proxy


class ExternalDiesKeepsHostBytes(_Broken):
    """When an external dies while on host, the store forgets it without subtracting its
    host bytes."""

    name = "broken-external-dies-keeps-host-bytes"
    violates = ("7.3",)

    def __init__(self):
        super().__init__()
        from reference_impl.store.tracking import Tracker  # private: process-wide

        real = Tracker.forget

        def forget(self, pid):
            rec = self.index.records.get(pid)
            if rec is not None and not rec.keys and rec.tier == "host":
                rec.host_nbytes = 0  # "externals are not in the host tally": they are
            return real(self, pid)

        Tracker.forget = forget


ZOO: dict[str, tuple[type, str]] = {
    "pop_keeps_file": (PopKeepsFile, "STORE-ACCT-004"),
    "clear_device_only": (ClearDeviceOnly, "STORE-ACCT-004"),
    "popitem_skips_bookkeeping": (PopitemSkipsBookkeeping, "STORE-ACCT-004"),
    "host_values_shallow": (HostValuesMeasuredShallow, "STORE-ACCT-005"),
    "external_dies_keeps_file": (ExternalDiesKeepsFile, "STORE-EXT-005"),
    "external_dies_keeps_host_bytes": (ExternalDiesKeepsHostBytes, "STORE-EXT-005"),
}

