"""ProxifyHostFile: a worker data store that keeps device data under a limit.

Tiers are device -> host (serialized frames) -> disk (one authenticated file
per object). Eviction is strict LRU over *units* (a key's whole value, or one
external proxy), grouped with every unit sharing a proxy or a base allocation,
so a key is always in exactly one tier and spilling really frees device bytes.

This module is the MutableMapping facade and the proxies' manager
(:class:`~.proxy.ProxyManager`): it takes the lock and calls :mod:`.index` (keys,
allocations and alias groups), :mod:`.recency` (recency and pins), :mod:`.mover`
(placement and moves), :mod:`.accounting` (the byte totals) and :mod:`.tracker`
(proxies). Each piece of state has one owner among them.

Locking: one RLock per store (:func:`.locking.locked`). Finalizers (dead proxies) only
append to a deque that the next locked call drains, so no finalizer ever takes a lock.
"""

from __future__ import annotations

import secrets
import shutil
import threading
import weakref
from collections.abc import Hashable, Iterator, MutableMapping
from typing import Any

from dask.sizeof import sizeof

from reference_impl.device import Device, get_device, parse_bytes

from .accounting import Accounting
from .disk import SpillDir, SpillFile, make_spill_dir
from .errors import StoreClosedError
from .index import UnitIndex
from .locking import locked
from .mover import OVERSIZED, TierMover
from .proxy import ProxyState, state_of, use_unmanaged
from .recency import DEVICE, Recency
from .records import Entry, Record, Unit
from .snapshot import StoreSnapshot
from .tracker import Tracker

# A thread waiting this long for another thread's store lock inside an OOM
# handler gives up (says "freed nothing") instead of risking a lock cycle
# between two stores that share a device.
OOM_LOCK_TIMEOUT_S = 5.0


def _check_key(key: object) -> None:
    try:
        hash(key)
    except TypeError:
        raise TypeError(
            f"store keys must be hashable; got unhashable key of type {type(key).__name__}"
        ) from None


def _check_nbytes(nbytes: object) -> None:
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise ValueError(f"evict(nbytes): nbytes must be a non-negative int, got {nbytes!r}")


class _OomHook:
    """The device's OOM handler; holds the store weakly so the store can be collected."""

    def __init__(self, store_ref: weakref.ref, device: Any) -> None:
        self._store_ref = store_ref
        self._device = device

    def __call__(self, shortfall: int) -> bool:
        store = self._store_ref()
        if store is None:  # store was collected: retire ourselves (no lock held here)
            try:
                self._device.remove_oom_handler(self)
            except KeyError:
                pass
            return False
        return store._on_oom(shortfall)


def _finalize_store(path: str, index: UnitIndex) -> None:
    """At close or collection: unlink entries from records, remove the spill directory.

    Entries and records point at each other (the hot paths' shortcuts); clearing the
    index breaks those cycles so a dropped store frees its proxies by reference count.
    """
    index.clear()
    shutil.rmtree(path, ignore_errors=True)


class ProxifyHostFile(MutableMapping):
    """A MutableMapping for dask workers that spills device values to host and disk.

    ``store[key]`` returns the value with device objects as device-resident
    :class:`ProxyObject` leaves (unspilled first); proxies unspill on use.
    """

    def __init__(
        self,
        *,
        device: str | Device = "auto",
        device_memory_limit: int | str,
        memory_limit: int | str | None = None,
        local_directory: str | None = None,
        spill_on_demand: bool = True,
        worker_local_directory: str | None = None,
    ) -> None:
        device_limit = parse_bytes(device_memory_limit, what="device_memory_limit", allow_zero=True)
        host_limit = (
            None
            if memory_limit is None
            else parse_bytes(memory_limit, what="memory_limit", allow_zero=True)
        )
        self.device = get_device(device) if isinstance(device, str) else device
        if not isinstance(self.device, Device):
            raise TypeError(
                f"device must be a kind string or a Device, got {type(device).__name__}"
            )
        base = local_directory if local_directory is not None else worker_local_directory
        self.spill_dir = make_spill_dir(base)
        self._lock = threading.RLock()
        self._accounting = Accounting()
        self._index = UnitIndex(self._accounting)
        self._finalizer = weakref.finalize(self, _finalize_store, self.spill_dir, self._index)
        self._entries = self._index.entries
        self._records = self._index.records
        self._recency = Recency()
        self._tiers = TierMover(
            self._index,
            self._recency,
            self.device,
            SpillDir(self.spill_dir, secrets.token_bytes(32)),
            device_limit,
            host_limit,
        )
        self._closed = False
        self._self_ref = weakref.ref(self)
        self._tracker = Tracker(self._tiers, self._self_ref)
        self._inbox = self._tracker.inbox
        self._oom_hook: _OomHook | None = None
        if spill_on_demand:
            self._oom_hook = _OomHook(self._self_ref, self.device)
            self.device.add_oom_handler(self._oom_hook)

    # Limits live with the tier mover, which enforces them; reassigning one
    # here takes effect on the next call.
    @property
    def device_memory_limit(self) -> int:
        return self._tiers.device_memory_limit

    @device_memory_limit.setter
    def device_memory_limit(self, value: int) -> None:
        self._tiers.device_memory_limit = value

    @property
    def memory_limit(self) -> int | None:
        return self._tiers.memory_limit

    @memory_limit.setter
    def memory_limit(self, value: int | None) -> None:
        self._tiers.memory_limit = value

    @property
    def closed(self) -> bool:
        return self._closed

    # One read of a counter, no lock, no walk over the keys (``stats()`` walks them): what a
    # caller checking room on every chunk of a shuffle can afford. Exact between calls.
    @property
    def device_bytes(self) -> int:
        """Device bytes the store holds now (each base allocation once)."""
        return self._accounting.device_bytes

    @property
    def host_bytes(self) -> int:
        """Host bytes the store holds now: spilled frames and host values."""
        return self._accounting.host_bytes

    def __repr__(self) -> str:
        a = self._accounting
        return (
            f"<ProxifyHostFile keys={len(self._entries)} device={a.device_bytes:,}/"
            f"{self.device_memory_limit:,} host={a.host_bytes:,} disk={a.disk_bytes:,}>"
        )

    # --- MutableMapping ------------------------------------------------------
    # The hot paths (set, get, del, pop, a proxy's use) spell the lock's preamble out: the
    # decorator's frame cost del 0.3 us of its 1.5 (docs/benchmarks.md, issue 28).
    def __setitem__(self, key: Hashable, value: Any) -> None:
        try:
            hash(key)
        except TypeError:
            _check_key(key)
        with self._lock:
            if self._closed:
                self._enter()
            if self._inbox:
                self._tracker.drain()
            pids: list[int] = []
            leaves = [0]
            structure = self._tracker.proxify(value, pids, leaves)
            if key in self._entries:
                self._remove_entry(key)
            # Host leaves are measured one by one (the walk reaches into dataclasses), so
            # a host value is sized deeply, not as its outer object.
            host = leaves[0] if pids else max(leaves[0], sizeof(value))  # with container overhead
            entry = Entry(key, structure, pids, host)
            queued = self._index.add_entry(entry)
            if queued:  # externals until now: a key holds them, so they leave the queues
                for rec in queued:
                    self._recency.remove(rec)
            del structure, value
            self._tiers.admit_new(entry)
            if self._inbox:
                self._tracker.drain()

    def __getitem__(self, key: Hashable) -> Any:
        with self._lock:
            if self._closed:
                _check_key(key)
                self._enter()
            if self._inbox:
                self._tracker.drain()
            try:
                entry = self._entries[key]
            except TypeError:
                _check_key(key)
                raise
            tiers, recency, index = self._tiers, self._recency, self._index
            if self._on_device_alone(entry):  # the hot path: nothing to move, one unit to touch
                recency.touch_one(entry)
                tiers.cascade()
                value = entry.value
                if self._inbox:
                    self._tracker.drain()
                return value
            if entry.is_host_value:
                if entry.file is not None:
                    tiers.load_host_value(entry)
                peers = index.group(entry)  # the keys holding this object: one use of it
                try:
                    recency.touch(peers, index.size)
                    pinned = recency.pin(peers)
                    try:
                        tiers.cascade()
                    finally:
                        recency.unpin(pinned)
                    value = entry.value
                    # a host limit too small for it sends it straight back to disk, on the
                    # file it was just read from (the caller has not had it yet)
                    tiers.cascade()
                finally:
                    tiers.drop_kept(entry)
                return value
            tiers.bring_to_device(entry)
            recency.touch(index.group(entry), index.size)
            tiers.cascade()
            value = entry.value
            self._tracker.drain()
            return value

    def __delitem__(self, key: Hashable) -> None:
        _check_key(key)
        with self._lock:
            self._enter()
            if key not in self._entries:
                raise KeyError(key)
            self._remove_entry(key)
            if self._inbox:
                self._tracker.drain()

    # The mixin versions read, then delete, in two calls: another thread could delete
    # the key in between. Under the (reentrant) store lock each is one step.
    def pop(self, key: Hashable, *default: Any) -> Any:
        with self._lock:
            if self._closed:
                _check_key(key)
                self._enter()
            try:
                entry = self._entries.get(key)
            except TypeError:
                _check_key(key)
                raise
            if entry is not None and self._on_device_alone(entry):
                # Nothing to bring back, and a use of a key that is going changes nothing.
                value = entry.value
                self._remove_entry(key)
                self._tracker.drain()
                return value
            return super().pop(key, *default)

    def popitem(self) -> tuple[Hashable, Any]:
        # The mixin takes next(iter(self)), and __iter__ copies every key: O(n) per call.
        with self._lock:
            try:
                key = next(iter(self._entries))
            except StopIteration:
                raise KeyError("popitem(): the store is empty") from None
            value = self[key]
            del self[key]
            return key, value

    def setdefault(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            return super().setdefault(key, default)

    @locked
    def clear(self) -> None:
        """Forget every key without reading any value back (the mixin pops each one)."""
        for key in list(self._entries):
            self._remove_entry(key)

    def __contains__(self, key: object) -> bool:
        try:
            hash(key)
        except TypeError:
            return False
        return key in self._entries

    def __iter__(self) -> Iterator[Hashable]:
        with self._lock:
            keys = list(self._entries)
        return iter(keys)

    def __len__(self) -> int:
        return len(self._entries)

    # --- extra public API ------------------------------------------------------
    @locked
    def register_external(self, obj: Any) -> Any:
        """Track ``obj`` (held outside the mapping) weakly; returns it proxified.

        The externals count toward the limit, can be spilled, and are forgotten
        as soon as their last strong reference dies.
        """
        pids: list[int] = []
        structure = self._tracker.proxify(obj, pids, [0])
        units: list[Unit] = []
        for pid in dict.fromkeys(pids):
            rec = self._records[pid]
            units.extend([rec] if rec.external else self._index.units_of(rec))
        # Only units seen for the first time are admitted: looking up an object the
        # store already tracks is not a use of it (no recency refresh, no unspill).
        new = [u for u in dict.fromkeys(units) if u.tick == 0]
        if new:
            self._tiers.admit(new)
        return structure

    @locked(check=_check_nbytes)
    def evict(self, nbytes: int) -> int:
        """Spill at least ``nbytes`` of device memory (LRU first); returns bytes freed."""
        freed = self._tiers.evict_device(nbytes)
        self._tiers.cascade()
        return freed

    @locked(check=_check_key)
    def tier_of(self, key: Hashable) -> str:
        """``"device"``, ``"host"`` or ``"disk"``; neither unspills nor touches recency."""
        return self._index.tier(self._entries[key])

    @locked
    def snapshot(self) -> StoreSnapshot:
        """Tiers, byte totals and LRU order, without unspilling or touching recency."""
        tier = self._index.tier
        a = self._accounting
        return StoreSnapshot(
            tiers={k: tier(e) for k, e in self._entries.items()},
            device_bytes=a.device_bytes,
            host_bytes=a.host_bytes,
            disk_bytes=a.disk_bytes,
            lru=[u.key for u in self._recency.device_units() if isinstance(u, Entry)],
            n_externals=sum(1 for r in self._records.values() if r.external),
        )

    @locked
    def stats(self) -> dict[str, Any]:
        """Bytes and counts per tier, lifetime spill/unspill bytes and time spent."""
        tier = self._index.tier
        counts = {"device": 0, "host": 0, "disk": 0}
        for entry in self._entries.values():
            counts[tier(entry)] += 1
        ext = {"device": 0, "host": 0, "disk": 0}
        for rec in self._records.values():
            if rec.external:
                ext[rec.tier] += 1
        a = self._accounting
        return {
            "device_bytes": a.device_bytes,
            "host_bytes": a.host_bytes,
            "disk_bytes": a.disk_bytes,
            "disk_clean_bytes": a.clean_bytes,  # of disk_bytes: clean copies of values in memory
            "device_memory_limit": self.device_memory_limit,
            "memory_limit": self.memory_limit,
            **{f"{t}_keys": n for t, n in counts.items()},
            **{f"{t}_externals": n for t, n in ext.items()},
            **self._tiers.stats,
            **self._tiers.times,
        }

    def close(self) -> None:
        """Forget everything, remove the OOM handler and the spill directory (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._oom_hook is not None:
                try:
                    self.device.remove_oom_handler(self._oom_hook)
                except KeyError:
                    pass
            for rec in self._records.values():
                if rec.clean_nbytes:
                    self._accounting.drop_clean(rec)
                proxy = rec()
                if proxy is not None:
                    state = state_of(proxy)
                    state.manager_ref = state.rec = None
                    if type(state.held) is SpillFile:
                        state.held.remove()
                        state.held = None  # the data is gone with the store
            for entry in self._entries.values():
                if entry.file is not None:
                    entry.file.remove()
            self._index.clear()
            self._recency.clear()
            self._tracker.inbox.clear()
            self._accounting.clear()
        self._finalizer()

    def __enter__(self) -> ProxifyHostFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- used by tests and the conformance inspector -------------------------------
    def _unit_size(self, unit: Unit) -> int:
        return self._index.size(unit)

    # --- the ProxyManager protocol (proxy.py): what a proxy asks of its store ----------
    def proxy_use(self, state: ProxyState) -> Any:
        """The device object for a real use: unspilled after making room, and touched."""
        with self._lock:
            if self._closed or state.manager_ref is None:
                return use_unmanaged(state)
            if self._inbox:
                self._tracker.drain()
            rec = state.rec
            if rec.tier == "device":
                self._touch_record(rec)
                return state.held
            index, tiers, recency = self._index, self._tiers, self._recency
            unit = rec.some_entry() or rec  # units_of(rec)[0]
            if tiers.bring_to_device(unit) is OVERSIZED:
                recency.touch(index.group(unit), index.size)
                payload = tiers.payload_of(rec, state)
                return state.handler.to_device(payload, self.device)  # transient copy
            recency.touch(index.group(unit), index.size)
            tiers.cascade()
            return state.held

    def proxy_touch(self, state: ProxyState) -> None:
        """A use answered from cached metadata (``shape``, ``dtype``...): recency only."""
        with self._lock:
            if self._closed or state.manager_ref is None:
                return
            rec = state.rec
            if rec is not None and rec.pid:  # 0: forgotten
                self._touch_record(rec)

    def _touch_record(self, rec: Record) -> None:
        """A use of ``rec``'s proxy: its unit is the most recent, with its group if it has one."""
        index = self._index
        unit = rec.holders or rec  # units_of(rec)[0]
        if type(unit) is set:
            unit = next(iter(unit))
        if not index.links or index.solo_record(unit) is rec:
            self._recency.touch_one(unit)
        else:
            self._recency.touch(index.group(unit), index.size)

    def proxy_write_back(self, state: ProxyState, obj: Any) -> None:
        """Persist an in-place change made to a transient copy of a spilled proxy; drop the
        clean copy of one on the device (belt and braces: only immutable types keep one)."""
        with self._lock:
            if self._closed:
                return
            rec = state.rec
            if rec is not None and rec.clean_nbytes:
                self._accounting.drop_clean(rec)
            if state.obj is not None:
                return
            self._tiers.write_back(rec, state, obj)

    def proxy_host_state(self, state: ProxyState) -> Any:
        """What a pickled proxy carries: the object, or host frames; never unspills."""
        with self._lock:
            held = state.held
            if type(held) is not SpillFile:
                return held
            if self._closed:
                return None
            return self._tiers.disk.read(held, self._index.key_name(state.rec))

    def _on_oom(self, shortfall: int) -> bool:
        """Spill-on-demand: free ``shortfall`` device bytes; True if anything was freed."""
        if not self._lock.acquire(timeout=OOM_LOCK_TIMEOUT_S):
            return False
        try:
            if self._closed:
                return False
            self._tiers.stats["oom_calls"] += 1
            self._tracker.drain()
            freed = self._tiers.evict_device(max(1, shortfall))
            self._tiers.cascade()  # dask-cuda skipped this; the host limit still holds
            return freed > 0
        finally:
            self._lock.release()

    # --- internals -----------------------------------------------------------------
    def _on_device_alone(self, entry: Entry) -> bool:
        """True when ``entry`` is one device-resident proxy that no other unit shares.

        Read from the entry alone while nothing in the store is shared (``links`` is 0):
        a solo entry sits in the device log exactly when its record is on device.
        """
        rec = entry.rec
        if rec is None or entry.lru != DEVICE:
            return False
        index = self._index
        return not index.links or index.solo_record(entry) is rec

    def _enter(self) -> None:
        if self._closed:
            raise StoreClosedError("this ProxifyHostFile was closed")
        if self._inbox:
            self._tracker.drain()

    def _remove_entry(self, key: Hashable) -> None:
        entry = self._entries.pop(key)
        self._recency.remove(entry)
        if entry.is_host_value:  # its bytes leave the totals; a device value's go with its proxies
            self._tiers.discard_host_value(entry)
        rec = entry.rec
        entry.value = None  # drop our references: unshared proxies die right here
        if rec is not None:  # one proxy, the common case
            self._release(rec, entry)
            return
        records = self._records
        for pid in dict.fromkeys(entry.pids):
            rec = records.get(pid)
            if rec is not None:
                self._release(rec, entry)

    def _release(self, rec: Record, entry: Entry) -> None:
        """``entry`` no longer holds ``rec``'s proxy: forget it, or keep it as an external."""
        self._index.discard_key(rec, entry)
        if rec.holders is not None:
            return
        if rec() is None:
            self._tracker.forget(rec.pid, unit=False)  # a keyed record is in no LRU list
            return
        # Still referenced outside the store: it becomes an external of least recency. A
        # key's file goes with the key (SPEC 9.4), its clean copy too.
        if rec.clean_nbytes:
            self._accounting.drop_clean(rec)
        self._tiers.place(rec)
        self._recency.make_oldest(rec)
