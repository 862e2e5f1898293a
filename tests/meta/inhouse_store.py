"""An in-house spilling store, written from scratch the way a newcomer would (issue 43).

Not the reference: an ordered dict per tier (device, host, disk), least-recently-used eviction,
one lock, device leaves copied to host and written with ``np.save``. It hands out the stored
arrays themselves (no proxies), so it declares no ``store.proxy``, and only the tiers it has.
As written it has a bug of its own that nobody put there on purpose: a host-only value moved to
its host tier counts 0 bytes (``_spill`` sizes device leaves only), so ``host_bytes`` and its
host limit miss it (clause 3.7); STORE-STATE-001 finds it ("host_bytes=0 but host-only values
in the host tier hold at least 16 bytes", classified 2026-12-07: the store's, not the model's).

Variants (zoo members, ``--impl=inhouse_store:<name>``):
- ``adapter``: the store as written;
- ``disk_only``: no host tier (device values spill straight to disk), and on a failed write (a
  full disk: ENOSPC, EFBIG) it drops what it was spilling, so data is lost; it declares only
  its disk tier, which since issue 43
  implies the full disk: STORE-DISK-006 FAILs (before, N/A: ``store.faults.disk`` undeclared);
- ``state_bug``: ``len()`` forgets keys on disk, a bug only a sequence of operations shows
  (STORE-STATE-001).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable, MutableMapping
from typing import Any

import numpy as np

from conformance.api import Snapshot, StoreEnv


class _Leaf:
    """A device array on host, in a spilled value."""

    def __init__(self, host: np.ndarray) -> None:
        self.host = host


def _walk(obj: Any, dev: Any, fn) -> Any:
    """``obj`` with every device leaf replaced by ``fn(leaf)`` (containers rebuilt)."""
    if dev.is_device_array(obj) or isinstance(obj, _Leaf):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_walk(v, dev, fn) for v in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_walk(v, dev, fn) for v in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _walk(v, dev, fn)) for k, v in obj.items())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(
            obj, **{f.name: _walk(getattr(obj, f.name), dev, fn) for f in dataclasses.fields(obj) if f.init}
        )
    return obj


def _allocations(obj: Any, dev: Any) -> dict[int, int]:
    """Device allocations a value holds: a view counts as its base allocation."""
    found: dict[int, int] = {}

    def note(leaf):
        aid, nbytes = dev.allocation_of(leaf)
        found[aid] = nbytes
        return leaf

    _walk(obj, dev, note)
    return found


class InHouseStore(MutableMapping):
    def __init__(self, env: StoreEnv, *, host_tier: bool = True, lose_on_full_disk: bool = False,
                 len_bug: bool = False):
        self.dev = env.device
        self.limit = env.device_limit
        self.host_limit = env.host_limit
        self.host_tier = host_tier
        self.host: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self.dir = tempfile.mkdtemp(prefix="inhouse-", dir=env.spill_dir)  # 0700
        self.device: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()  # LRU first
        self.disk: OrderedDict[Hashable, tuple[str, int]] = OrderedDict()
        self.lock = threading.RLock()
        self.n = 0
        self.lose_on_full_disk = lose_on_full_disk
        self.len_bug = len_bug
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.dir, True)

    # ------------------------------------------------------------------ sizes
    def device_bytes(self) -> int:
        seen: dict[int, int] = {}
        for value, _ in self.device.values():
            seen.update(_allocations(value, self.dev))
        return sum(seen.values())

    def host_bytes(self) -> int:
        return sum(size for _, size in self.host.values())

    # ------------------------------------------------------------------ tiers
    def _spill(self, key: Hashable) -> None:
        """Device -> host (-> disk past the host limit); device -> disk without a host tier."""
        value, _ = self.device.pop(key)
        sizes = []

        def leaf(a):
            h = np.array(self.dev.to_host(a), order="K", copy=True)
            sizes.append(h.nbytes)
            return _Leaf(h)

        host = _walk(value, self.dev, leaf)
        if self.host_tier:
            self.host[key] = (host, sum(sizes))
            self._cascade()
        elif not self._write(key, host) and not self.lose_on_full_disk:
            self.device[key] = (value, 0)  # the disk is full: it stays (never reached in the zoo)

    def _write(self, key: Hashable, host: Any) -> bool:
        self.n += 1
        path = os.path.join(self.dir, f"{self.n}.npy")
        box = np.empty(1, dtype=object)
        box[0] = host
        try:
            np.save(path, box, allow_pickle=True)
        except OSError:
            if os.path.exists(path):
                os.remove(path)
            return False  # a full disk; the caller keeps the value (or, the bug, drops it)
        self.disk[key] = (path, os.path.getsize(path))
        return True

    def _cascade(self) -> None:
        while self.host_limit is not None and self.host and self.host_bytes() > self.host_limit:
            key = next(iter(self.host))
            if not self._write(key, self.host[key][0]):
                return  # a full disk: values stay on host, the host limit excepted (9.6)
            del self.host[key]

    def _load(self, key: Hashable) -> Any:
        if key in self.host:
            host, _ = self.host.pop(key)
        else:
            path, _ = self.disk.pop(key)
            host = np.load(path, allow_pickle=True)[0]
            os.remove(path)
        return _walk(host, self.dev, lambda leaf: self.dev.asarray(leaf.host))

    def _make_room(self, keep: Hashable) -> None:
        while self.device_bytes() > self.limit:
            victims = [k for k in self.device if k != keep]
            if not victims:
                return  # one value over the limit: it may stay
            self._spill(victims[0])

    # ------------------------------------------------------------------ mapping
    def __setitem__(self, key: Hashable, value: Any) -> None:
        hash(key)
        with self.lock:
            self._discard(key)
            self.device[key] = (value, 0)
            try:
                self._make_room(key)
            except OSError:
                if self.lose_on_full_disk:
                    self.device.pop(key, None)
                raise

    def __getitem__(self, key: Hashable) -> Any:
        with self.lock:
            if key in self.device:
                self.device.move_to_end(key)
                return self.device[key][0]
            if key not in self.disk and key not in self.host:
                raise KeyError(key)
            value = self._load(key)
            self.device[key] = (value, 0)
            self._make_room(key)
            return value

    def _discard(self, key: Hashable) -> None:
        self.device.pop(key, None)
        self.host.pop(key, None)
        if key in self.disk:
            path, _ = self.disk.pop(key)
            os.remove(path)

    def __delitem__(self, key: Hashable) -> None:
        with self.lock:
            if key not in self:
                raise KeyError(key)
            self._discard(key)

    def __contains__(self, key: object) -> bool:
        try:
            return key in self.device or key in self.host or key in self.disk
        except TypeError:
            return False

    def __iter__(self):
        with self.lock:
            return iter([*self.device, *self.host, *self.disk])

    def __len__(self) -> int:
        return len(self.device) + len(self.host) + (0 if self.len_bug else len(self.disk))

    def close(self) -> None:
        with self.lock:
            self.device.clear()
            self.host.clear()
            self.disk.clear()
            self._finalizer()


class InHouseAdapter:
    """The newcomer's adapter, from conformance/README.md."""

    name = "inhouse"
    version = "0.1"
    capabilities = frozenset(
        {"store", "store.spill.host", "store.spill.disk", "store.limit.host", "store.evict.manual"}
    )
    variant: dict = {}

    def create_store(self, env: StoreEnv) -> InHouseStore:
        return InHouseStore(env, **self.variant)

    def inspect(self, store: InHouseStore) -> Snapshot:
        with store.lock:
            tiers = ({k: "device" for k in store.device} | {k: "host" for k in store.host}
                     | {k: "disk" for k in store.disk})
            disk = sum(size for _, size in store.disk.values())
            return Snapshot(tiers, store.device_bytes(), store.host_bytes(), disk, list(store.device))

    def evict(self, store: InHouseStore, nbytes: int) -> int:
        with store.lock:
            before = store.device_bytes()
            while store.device and before - store.device_bytes() < nbytes:
                store._spill(next(iter(store.device)))
            return before - store.device_bytes()

    def close_store(self, store: InHouseStore) -> None:
        store.close()


class DiskOnlyLosesOnFullDisk(InHouseAdapter):
    name = "inhouse-disk-only"
    violates = ("9.6",)
    capabilities = frozenset({"store", "store.spill.disk", "store.evict.manual"})
    variant = {"host_tier": False, "lose_on_full_disk": True}


class LenForgetsDisk(InHouseAdapter):
    name = "inhouse-state-bug"
    violates = ("1.1",)
    variant = {"len_bug": True}


adapter = InHouseAdapter
disk_only = DiskOnlyLosesOnFullDisk
state_bug = LenForgetsDisk
