"""Broken adapters, data: mapping methods, keys, values, accounting, externals and in-place
writes. Each wraps the reference with ONE bug a store author could make."""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import MutableMapping

from broken_base import Patching, Wrapped, _Broken

from conformance.store.harness import files_under


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
def _keep_file_of(state):
    file = state.held
    if hasattr(file, "path") and os.path.exists(file.path):
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
        from reference_impl.store.proxy import ProxyObject, state_of

        proxy = super().register_external(store, obj)
        if type(proxy) is ProxyObject:  # private: the file the proxy's state holds at death
            weakref.finalize(proxy, _keep_file_of, state_of(proxy))
        return proxy


class ExternalDiesKeepsHostBytes(Patching):
    """When an external dies while on host, the store forgets it without subtracting its
    host bytes."""

    name = "broken-external-dies-keeps-host-bytes"
    violates = ("7.3",)

    def patch(self):
        from reference_impl.store.tracker import Tracker  # private: process-wide

        real = Tracker.forget

        def forget(self, pid, **kwargs):
            rec = self.index.records.get(pid)
            if rec is not None and rec.external and rec.tier == "host":
                rec.held_nbytes = 0  # "externals are not in the host tally": they are
            return real(self, pid, **kwargs)

        self.set(Tracker, "forget", forget)


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


def _register(adapter: Patching, handler) -> None:
    """Make ``handler`` the store's handler of SimArray, undone with the adapter's patch."""
    from reference_impl import SimArray
    from reference_impl.store import dispatch  # private: the registry has no unregister

    adapter.set_item(dispatch._registry, SimArray, handler)


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


class SpillReusesCleanCopy(Patching):
    """Re-spilling a value that came back from host reuses the host copy it came from, without
    noticing the value was written to in place since."""

    name = "broken-spill-reuses-clean-copy"
    violates = ("13.1",)

    def patch(self):
        _register(self, _CleanCopyCache())


class WritesToTransientCopyLost(Patching):
    """A value over the limit is used through transient device copies; writes to such a copy
    are never written back."""

    name = "broken-transient-writes-lost"
    violates = ("13.6",)

    def patch(self):
        from reference_impl.store.hostfile import ProxifyHostFile

        self.set(ProxifyHostFile, "proxy_write_back", lambda self, state, obj: None)


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


class ByteOrderLost(Patching):
    """Spills the raw bytes with the dtype's name, which drops the byte order: a big-endian
    array comes back little-endian, its values byte-swapped."""

    name = "broken-byte-order-lost"
    violates = ("2.1",)

    def patch(self):
        _register(self, _NativeOrder())


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


class NonContiguousCopiedRaw(Patching):
    """Spilling copies a view's nbytes from its first element, ignoring its strides: strided,
    reversed and transposed views come back with the wrong content."""

    name = "broken-noncontiguous-copied-raw"
    violates = ("2.1",)

    def patch(self):
        _register(self, _RawSpan())


# ------------------------------------------------------------------ the mapping contract
class _OrderListWrapped(Wrapped):
    def __init__(self, inner, device):
        super().__init__(inner, device)
        self.order = []

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        if key not in self.order:
            self.order.append(key)

    def __iter__(self):
        return iter(list(self.order))  # del never takes a key out of this list


class IterationKeepsDeletedKeys(_Broken):
    """Keeps an insertion-order list for iteration; __delitem__ forgets to update it, so
    iteration and keys() still yield deleted keys."""

    name = "broken-iteration-keeps-deleted-keys"
    wrapper = _OrderListWrapped
    violates = ("1.1",)


class _NoneForMissingWrapped(Wrapped):
    def __getitem__(self, key):
        if key not in self.inner:
            return None  # dict.get semantics where KeyError is due
        return self.inner[key]


class MissingKeyReturnsNone(_Broken):
    """store[missing] returns None instead of raising KeyError."""

    name = "broken-missing-key-returns-none"
    wrapper = _NoneForMissingWrapped
    violates = ("1.2",)


class _KeepsPreviousWrapped(Wrapped):
    def __setitem__(self, key, value):
        if key in self.inner and self.inner.tier_of(key) == "device":
            from reference_impl.store.proxy import ProxyObject, _use

            old = self.inner[key]
            if type(old) is ProxyObject:
                self.kept.append(_use(old))  # the device buffer itself, not the proxy
        super().__setitem__(key, value)


class OverwriteKeepsPrevious(_Broken):
    """Overwriting a key keeps the previous device buffer in a 'previous value' slot (for a
    rollback that never comes): the old bytes are never released."""

    name = "broken-overwrite-keeps-previous"
    wrapper = _KeepsPreviousWrapped
    violates = ("1.3",)


class _ValidatingUpdateWrapped(Wrapped):
    def update(self, other=(), /, **kw):
        items = other.items() if hasattr(other, "items") else other
        for k, _v in items:  # validate every key first ...
            hash(k)
        for k, v in items:  # ... then store: an iterator is already exhausted
            self[k] = v
        for k, v in kw.items():
            self[k] = v


class UpdateReadsIteratorTwice(_Broken):
    """update() validates every key in a first pass and stores in a second: given an iterator
    of pairs, the second pass finds it exhausted and stores nothing."""

    name = "broken-update-reads-iterator-twice"
    wrapper = _ValidatingUpdateWrapped
    violates = ("1.4",)


class _SetdefaultWrapped(Wrapped):
    def setdefault(self, key, default=None):
        self[key] = default  # "set the default" even when the key is there
        return default


class SetdefaultOverwrites(_Broken):
    """setdefault(k, d) stores d even when k is present."""

    name = "broken-setdefault-overwrites"
    wrapper = _SetdefaultWrapped
    violates = ("1.5",)


class _GetStoresWrapped(Wrapped):
    def get(self, key, default=None):
        return self.setdefault(key, default)  # setdefault where get was meant


class GetStoresDefault(_Broken):
    """get(k, d) is implemented with setdefault: a missing key gets d stored under it."""

    name = "broken-get-stores-default"
    wrapper = _GetStoresWrapped
    violates = ("1.9",)


def _hashable(key):
    if isinstance(key, list):
        return tuple(_hashable(k) for k in key)
    if isinstance(key, set):
        return frozenset(key)
    if isinstance(key, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in key.items()))
    return key


class _ConvertingKeysWrapped(Wrapped):
    def __setitem__(self, key, value):
        super().__setitem__(_hashable(key), value)

    def __getitem__(self, key):
        return self.inner[_hashable(key)]


class UnhashableKeysConverted(_Broken):
    """Converts unhashable keys (lists, sets, dicts) to tuples instead of rejecting them."""

    name = "broken-unhashable-keys-converted"
    wrapper = _ConvertingKeysWrapped
    violates = ("1.14",)


class _PendingWrapped(Wrapped):
    def __setitem__(self, key, value):
        self.kept.append(value)  # staged before the key is checked ...
        super().__setitem__(key, value)
        self.kept.pop()  # ... and unstaged on success only


class RejectedSetKeepsValue(_Broken):
    """A set stages the value before checking the key; when the key is rejected, the staged
    value is never dropped: a failed set still holds device memory."""

    name = "broken-rejected-set-keeps-value"
    wrapper = _PendingWrapped
    violates = ("1.15",)


# ------------------------------------------------------------------ values, accounting, externals
def _plain_tuples(value):
    if isinstance(value, tuple):
        return tuple(_plain_tuples(v) for v in value)  # a namedtuple loses its class
    if isinstance(value, list):
        return [_plain_tuples(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain_tuples(v) for k, v in value.items()}
    return value


class _PlainTuplesWrapped(Wrapped):
    def __getitem__(self, key):
        return _plain_tuples(self.inner[key])


class NamedtuplesComeBackAsTuples(_Broken):
    """Rebuilds every tuple in a value with ``tuple(items)``: a namedtuple comes back as a
    plain tuple."""

    name = "broken-namedtuples-as-tuples"
    wrapper = _PlainTuplesWrapped
    violates = ("2.4",)


class _FlatShape(_ArrayTypeVariant):
    """Restores with ``reshape(meta['shape'] or (-1,))``: the 0-d shape () is falsy."""

    def to_device(self, payload, device):
        from reference_impl.store import serialize

        host = serialize.loads(payload)
        return device.asarray(host.reshape(host.shape or (-1,)))


class ZeroDimComesBackOneDim(Patching):
    """A 0-d array comes back with shape (1,)."""

    name = "broken-0d-comes-back-1d"
    violates = ("2.3",)

    def patch(self):
        _register(self, _FlatShape())


class _COrder(_ArrayTypeVariant):
    def to_device(self, payload, device):
        import numpy as np

        from reference_impl.store import serialize

        return device.asarray(np.ascontiguousarray(serialize.loads(payload)))


class FortranComesBackC(Patching):
    """Unspill allocates every array C-ordered: a Fortran-ordered array comes back C-ordered."""

    name = "broken-fortran-comes-back-c"
    violates = ("2.2",)

    def patch(self):
        _register(self, _COrder())


class _HostToDeviceWrapped(Wrapped):
    def __setitem__(self, key, value):
        import numpy as np

        if isinstance(value, np.ndarray) and not self.device.is_device_array(value):
            value = self.device.asarray(value)  # "array-like data belongs on the GPU"
        super().__setitem__(key, value)


class HostArraysMovedToDevice(_Broken):
    """Moves every numpy array it is given onto the device, host-only values included."""

    name = "broken-host-arrays-to-device"
    wrapper = _HostToDeviceWrapped
    violates = ("2.5",)


class _ViewAsBaseWrapped(Wrapped):
    def __setitem__(self, key, value):
        import numpy as np

        if self.device.is_device_array(value):
            root = value
            while isinstance(root.base, type(value)):
                root = root.base
            value = root  # dedup by allocation: the view is replaced by what it views
            assert isinstance(value, np.ndarray)
        super().__setitem__(key, value)


class ViewStoredAsItsBase(_Broken):
    """Deduplicates by allocation so eagerly that a view is stored as the whole array it
    views: store['view'] comes back as its base."""

    name = "broken-view-stored-as-base"
    wrapper = _ViewAsBaseWrapped
    violates = ("2.6",)


class DeviceBytesRounded(_Broken):
    """Reports device bytes rounded up to the allocator's 256-byte granularity, which the
    device's own ledger does not do."""

    name = "broken-device-bytes-rounded"
    violates = ("3.1",)

    def inspect(self, store):
        from conformance.api import Snapshot

        snap = super().inspect(store)
        allocs = {
            store.allocs[k] for k, t in snap.tiers.items() if t == "device" and k in store.allocs
        }
        rounded = sum(-(-n // 256) * 256 for _aid, n in allocs)
        exact = sum(n for _aid, n in allocs)
        return Snapshot(
            snap.tiers,
            snap.device_bytes + rounded - exact,
            snap.host_bytes,
            snap.disk_bytes,
            snap.lru,
        )


class TinyValuesMissingFromTiers(_Broken):
    """Values under 64 bytes live in a small-object dict that inspect() forgets to list."""

    name = "broken-tiny-values-not-in-tiers"
    violates = ("3.6",)

    def inspect(self, store):
        from conformance.api import Snapshot

        snap = super().inspect(store)
        tiers = {k: t for k, t in snap.tiers.items() if store.sizes.get(k, 64) >= 64}
        lru = None if snap.lru is None else [k for k in snap.lru if k in tiers]
        return Snapshot(tiers, snap.device_bytes, snap.host_bytes, snap.disk_bytes, lru)


class ExternalsNotTracked(_Broken):
    """register_external returns the object as it is, untracked: externals never count."""

    name = "broken-externals-not-tracked"
    violates = ("7.1",)

    def register_external(self, store, obj):
        return obj


class ExternalsPinned(_Broken):
    """Externals are counted but pinned to the device: the store never spills them."""

    name = "broken-externals-pinned"
    violates = ("7.2",)

    def create_store(self, env):
        store = super().create_store(env)
        store.pinned = []
        return store

    def register_external(self, store, obj):
        store.pinned.append(weakref.ref(obj))
        return obj

    def inspect(self, store):
        from conformance.api import Snapshot

        snap = super().inspect(store)
        live = {store.device.allocation_of(o) for r in store.pinned if (o := r()) is not None}
        return Snapshot(
            snap.tiers,
            snap.device_bytes + sum(n for _aid, n in live),
            snap.host_bytes,
            snap.disk_bytes,
            snap.lru,
        )


class ExternalIsCopied(_Broken):
    """register_external tracks a device copy of the object (so that the caller's writes do
    not affect the store): an object both stored and registered is held twice."""

    name = "broken-external-is-copied"
    violates = ("7.4",)

    def register_external(self, store, obj):
        if store.device.is_device_array(obj):
            obj = obj.copy()
        return super().register_external(store, obj)


class PickledAsHostArray(Patching):
    """A value the store hands out pickles as its host copy: it unpickles as a numpy array,
    no longer a device array."""

    name = "broken-pickled-as-host-array"
    violates = ("13.2",)

    def patch(self):
        import numpy as np

        from reference_impl.store import proxy as P

        def __reduce__(self):
            return np.asarray, (P.state_of(self).device.to_host(P._use(self)),)

        self.set(P.ProxyObject, "__reduce__", __reduce__)


class _PositionalIterWrapped(Wrapped):
    def __init__(self, inner, device):
        super().__init__(inner, device)
        self.keylist = []

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        if key not in self.keylist:
            self.keylist.append(key)

    def __delitem__(self, key):
        super().__delitem__(key)
        self.keylist.remove(key)

    def __iter__(self):
        i = 0
        while i < len(self.keylist):  # by position in a live list: a delete shifts the rest
            yield self.keylist[i]
            i += 1


class IterationByPosition(_Broken):
    """Iterates over a live list of keys by position: deleting a key already yielded shifts
    the rest, and the next key is silently skipped."""

    name = "broken-iteration-by-position"
    wrapper = _PositionalIterWrapped
    violates = ("1.10",)


class Opaque:
    """How a container walker that knows only list/tuple/dict sees a dataclass instance."""

    def __init__(self, obj):
        self.obj = obj


def _hide_dataclasses(value):
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return Opaque(value)
    if isinstance(value, tuple) and hasattr(type(value), "_make"):
        return type(value)._make(_hide_dataclasses(v) for v in value)
    if isinstance(value, (list, tuple)):
        return type(value)(_hide_dataclasses(v) for v in value)
    if isinstance(value, dict):
        return {k: _hide_dataclasses(v) for k, v in value.items()}
    return value


def _show_dataclasses(value):
    if isinstance(value, Opaque):
        return value.obj
    if isinstance(value, tuple) and hasattr(type(value), "_make"):
        return type(value)._make(_show_dataclasses(v) for v in value)
    if isinstance(value, (list, tuple)):
        return type(value)(_show_dataclasses(v) for v in value)
    if isinstance(value, dict):
        return {k: _show_dataclasses(v) for k, v in value.items()}
    return value


class _DataclassLeafWrapped(Wrapped):
    def __setitem__(self, key, value):
        super().__setitem__(key, _hide_dataclasses(value))

    def __getitem__(self, key):
        return _show_dataclasses(self.inner[key])


class DataclassesNotWalked(_Broken):
    """Walks only lists, tuples and dicts: a dataclass instance is an opaque host object, so
    the device arrays inside it are neither counted nor spilled."""

    name = "broken-dataclasses-not-walked"
    wrapper = _DataclassLeafWrapped
    violates = ("2.4", "3.1")


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
    "transient_writes_lost": (WritesToTransientCopyLost, "STORE-INPLACE-003"),
    "byte_order_lost": (ByteOrderLost, "STORE-VALUE-001"),
    "noncontiguous_copied_raw": (NonContiguousCopiedRaw, "STORE-VALUE-001"),
    "iteration_keeps_deleted_keys": (IterationKeepsDeletedKeys, "STORE-MAP-001"),
    "missing_key_returns_none": (MissingKeyReturnsNone, "STORE-MAP-001"),
    "overwrite_keeps_previous": (OverwriteKeepsPrevious, "STORE-MAP-002"),
    "update_reads_iterator_twice": (UpdateReadsIteratorTwice, "STORE-MAP-003"),
    "setdefault_overwrites": (SetdefaultOverwrites, "STORE-MAP-003"),
    "get_stores_default": (GetStoresDefault, "STORE-MAP-003"),
    "unhashable_keys_converted": (UnhashableKeysConverted, "STORE-MAP-005"),
    "rejected_set_keeps_value": (RejectedSetKeepsValue, "STORE-MAP-005"),
    "namedtuples_as_tuples": (NamedtuplesComeBackAsTuples, "STORE-VALUE-003"),
    "dataclasses_not_walked": (DataclassesNotWalked, "STORE-VALUE-003"),
    "zero_dim_comes_back_1d": (ZeroDimComesBackOneDim, "STORE-VALUE-001"),
    "fortran_comes_back_c": (FortranComesBackC, "STORE-VALUE-002"),
    "host_arrays_to_device": (HostArraysMovedToDevice, "STORE-MAP-007"),
    "view_stored_as_base": (ViewStoredAsItsBase, "STORE-ALIAS-002"),
    "device_bytes_rounded": (DeviceBytesRounded, "STORE-ACCT-001"),
    "tiny_values_not_in_tiers": (TinyValuesMissingFromTiers, "STORE-ACCT-001"),
    "externals_not_tracked": (ExternalsNotTracked, "STORE-EXT-001"),
    "externals_pinned": (ExternalsPinned, "STORE-EXT-003"),
    "external_is_copied": (ExternalIsCopied, "STORE-EXT-004"),
    "pickled_as_host_array": (PickledAsHostArray, "STORE-PICKLE-001"),
    "iteration_by_position": (IterationByPosition, "STORE-MAP-009"),
}
