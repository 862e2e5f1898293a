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


# ------------------------------------------------------------------ keys
class _KeyMapped(Wrapped):
    """The store indexes keys by ``token(key)`` and remembers the key it was given last."""

    def __init__(self, inner, device):
        super().__init__(inner, device)
        self.given = {}

    def token(self, key):
        raise NotImplementedError

    def _tok(self, key):
        hash(key)  # unhashable keys are still rejected with TypeError
        return self.token(key)

    def __getitem__(self, key):
        return self.inner[self._tok(key)]

    def __setitem__(self, key, value):
        t = self._tok(key)
        self.inner[t] = value
        self.given[t] = key

    def __delitem__(self, key):
        t = self._tok(key)
        del self.inner[t]
        self.given.pop(t, None)

    def __iter__(self):
        return iter([self.given[t] for t in self.inner])

    def __contains__(self, key):
        try:
            return self._tok(key) in self.inner
        except TypeError:
            return False


class _KeyMappedAdapter(_Broken):
    def inspect(self, store):
        from conformance.api import Snapshot

        snap = super().inspect(store)
        back = store.given
        return Snapshot(
            {back[t]: tier for t, tier in snap.tiers.items()},
            snap.device_bytes,
            snap.host_bytes,
            snap.disk_bytes,
            None if snap.lru is None else [back[t] for t in snap.lru],
        )


def _typed_token(key):
    if isinstance(key, tuple):
        return ("tuple", tuple(_typed_token(k) for k in key))
    return (type(key).__name__, key)


class _TypedKeys(_KeyMapped):
    def token(self, key):
        return _typed_token(key)


class KeysTokenizedByType(_KeyMappedAdapter):
    """Indexes keys by a (type, value) token, as a hashing scheme for file names might: 1,
    1.0 and True, which Python treats as one key, become three."""

    name = "broken-keys-tokenized-by-type"
    wrapper = _TypedKeys
    violates = ("1.12",)


class _StrKeys(_KeyMapped):
    def token(self, key):
        return str(key)


class KeysByStr(_KeyMappedAdapter):
    """Indexes keys by str(key) (its files are named that way): 1 and "1", ("a",) and
    "('a',)" become one key."""

    name = "broken-keys-by-str"
    wrapper = _StrKeys
    violates = ("1.13",)


class _SidecarWrapped(Wrapped):
    def __init__(self, inner, device):
        super().__init__(inner, device)
        self.sidecars = {}

    def _path(self, key):
        return os.path.join(self.inner.spill_dir, f"{key}.idx")

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        path = self._path(key)
        with open(path, "w") as f:
            f.write(type(value).__name__)
        self.sidecars[key] = (path, os.path.getsize(path))

    def __delitem__(self, key):
        super().__delitem__(key)
        path, _ = self.sidecars.pop(key, (None, 0))
        if path is not None and os.path.exists(path):
            os.unlink(path)


class KeyNamedIndexFiles(_Broken):
    """Keeps a small index file per key next to its spill files, named f"{key}.idx": a key
    with '/' or '..' leads it into another directory, or out of spill_dir."""

    name = "broken-key-named-index-files"
    wrapper = _SidecarWrapped
    violates = ("9.2", "1.11")

    def inspect(self, store):
        from conformance.api import Snapshot

        snap = super().inspect(store)
        extra = sum(n for _p, n in store.sidecars.values())  # it counts its index files
        return Snapshot(
            snap.tiers, snap.device_bytes, snap.host_bytes, snap.disk_bytes + extra, snap.lru
        )


# ------------------------------------------------------------------ values and in-place writes
class _ArrayTypeVariant:
    """The reference's array handler with one method changed (registered process-wide)."""

    def __init__(self):
        from reference_impl.store.dispatch import ArrayType

        self.base = ArrayType()

    def allocations(self, obj, device):
        return self.base.allocations(obj, device)

    def metadata(self, obj):
        return self.base.metadata(obj)

    def to_host(self, obj, device):
        return self.base.to_host(obj, device)

    def to_device(self, payload, device):
        return self.base.to_device(payload, device)


def _register(handler):
    from reference_impl import SimArray
    from reference_impl.store.dispatch import register_device_type

    register_device_type(SimArray, handler)


class _CleanCopyCache(_ArrayTypeVariant):
    """Keeps the host payload an array was unspilled from: spilling it again is free."""

    def __init__(self):
        super().__init__()
        self.clean = {}  # id(device array) -> (weakref to it, the payload it came from)

    def to_device(self, payload, device):
        obj = self.base.to_device(payload, device)
        self.clean[id(obj)] = (weakref.ref(obj), payload)
        return obj

    def to_host(self, obj, device):
        ref, payload = self.clean.get(id(obj), (None, None))
        if ref is not None and ref() is obj:
            return payload  # "unchanged since it came back": in-place writes say otherwise
        return self.base.to_host(obj, device)


class SpillReusesCleanCopy(_Broken):
    """Re-spilling a value that came back from host reuses the host copy it came from, without
    noticing the value was written to in place since."""

    name = "broken-spill-reuses-clean-copy"
    violates = ("13.1",)

    def __init__(self):
        super().__init__()
        _register(_CleanCopyCache())


class WritesToTransientCopyLost(_Broken):
    """A value over the limit is used through transient device copies; writes to such a copy
    are never written back."""

    name = "broken-transient-writes-lost"
    violates = ("13.1",)

    def __init__(self):
        super().__init__()
        from reference_impl.store.hostfile import ProxifyHostFile

        ProxifyHostFile._write_back = lambda self, proxy, detail, obj: None


class _NativeOrder(_ArrayTypeVariant):
    """Spills ``arr.tobytes()`` with ``(shape, dtype.name)``: the name has no byte order."""

    def to_host(self, obj, device):
        import numpy as np

        from reference_impl.store import serialize

        host = device.to_host(obj)
        return serialize.dumps(
            (host.shape, host.dtype.name, np.frombuffer(host.tobytes(), np.uint8))
        )

    def to_device(self, payload, device):
        import numpy as np

        from reference_impl.store import serialize

        shape, name, raw = serialize.loads(payload)
        return device.asarray(np.frombuffer(raw.tobytes(), dtype=np.dtype(name)).reshape(shape))


class ByteOrderLost(_Broken):
    """Spills the raw bytes with the dtype's name, which drops the byte order: a big-endian
    array comes back little-endian, its values byte-swapped."""

    name = "broken-byte-order-lost"
    violates = ("2.1",)

    def __init__(self):
        super().__init__()
        _register(_NativeOrder())


class _RawSpan(_ArrayTypeVariant):
    """Copies ``nbytes`` bytes from the array's first element (a ``cudaMemcpy`` of the data
    pointer), ignoring strides: right for contiguous arrays only."""

    def to_host(self, obj, device):
        import numpy as np

        from reference_impl.store import serialize

        root = obj  # sim device memory is host memory: read it the way a memcpy would
        while isinstance(root.base, np.ndarray):
            root = root.base
        whole = np.asarray(root).reshape(-1).view(np.uint8)
        start = obj.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        span = whole[start : start + obj.nbytes].copy()
        span = np.concatenate([span, np.zeros(obj.nbytes - span.size, np.uint8)])
        return serialize.dumps(span.view(obj.dtype).reshape(obj.shape))


class NonContiguousCopiedRaw(_Broken):
    """Spilling copies a view's nbytes from its first element, ignoring its strides: strided,
    reversed and transposed views come back with the wrong content."""

    name = "broken-noncontiguous-copied-raw"
    violates = ("2.1",)

    def __init__(self):
        super().__init__()
        _register(_RawSpan())


ZOO: dict[str, tuple[type, str]] = {
    "pop_keeps_file": (PopKeepsFile, "STORE-ACCT-004"),
    "clear_device_only": (ClearDeviceOnly, "STORE-ACCT-004"),
    "popitem_skips_bookkeeping": (PopitemSkipsBookkeeping, "STORE-ACCT-004"),
    "host_values_shallow": (HostValuesMeasuredShallow, "STORE-ACCT-005"),
    "external_dies_keeps_file": (ExternalDiesKeepsFile, "STORE-EXT-005"),
    "external_dies_keeps_host_bytes": (ExternalDiesKeepsHostBytes, "STORE-EXT-005"),
    "keys_tokenized_by_type": (KeysTokenizedByType, "STORE-KEY-001"),
    "keys_by_str": (KeysByStr, "STORE-KEY-001"),
    "key_named_index_files": (KeyNamedIndexFiles, "STORE-KEY-002"),
    "spill_reuses_clean_copy": (SpillReusesCleanCopy, "STORE-INPLACE-001"),
    "transient_writes_lost": (WritesToTransientCopyLost, "STORE-INPLACE-001"),
    "byte_order_lost": (ByteOrderLost, "STORE-VALUE-001"),
    "noncontiguous_copied_raw": (NonContiguousCopiedRaw, "STORE-VALUE-001"),
}
