"""ProxifyHostFile: a worker data store that keeps device data under a limit.

Tiers are device -> host (serialized frames) -> disk (one authenticated file
per object). Eviction is strict LRU over *units* (a key's whole value, or one
external proxy), grouped with every unit sharing a proxy or a base allocation,
so a key is always in exactly one tier and spilling really frees device bytes.

Locking: one RLock per store. Finalizers (dead proxies) only append to a
deque that the next locked call drains, so no finalizer ever takes a lock.
"""

from __future__ import annotations

import itertools
import secrets
import shutil
import threading
import time
import warnings
import weakref
from collections import OrderedDict, deque
from collections.abc import Hashable, Iterator, MutableMapping
from typing import Any

from dask.sizeof import sizeof

from reference_impl.device import Device, get_device, parse_bytes

from . import serialize
from .containers import walk
from .disk import SpillDir, SpillFile, make_spill_dir
from .dispatch import handler_for
from .errors import SpillWarning, StoreClosedError
from .proxy import ProxyObject, _Detail, _get_detail
from .units import Entry, Record, StoreSnapshot

# A thread waiting this long for another thread's store lock inside an OOM
# handler gives up (says "freed nothing") instead of risking a lock cycle
# between two stores that share a device.
OOM_LOCK_TIMEOUT_S = 5.0
_OVERSIZED = object()
Unit = Entry | Record


class _ProxyRef(weakref.ref):
    """Weak reference to a tracked proxy; its callback only queues ``pid``."""

    __slots__ = ("pid",)


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


def _cleanup_dir(path: str) -> None:
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
        self.device_memory_limit = parse_bytes(
            device_memory_limit, what="device_memory_limit", allow_zero=True
        )
        self.memory_limit = (
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
        self._finalizer = weakref.finalize(self, _cleanup_dir, self.spill_dir)
        self._disk = SpillDir(self.spill_dir, secrets.token_bytes(32))
        self._lock = threading.RLock()
        self._inbox: deque[_ProxyRef] = deque()
        self._entries: dict[Hashable, Entry] = {}
        self._records: dict[int, Record] = {}
        self._raw: dict[int, int] = {}  # id(device object) -> pid, for alias reuse
        self._alloc_pids: dict[int, set[int]] = {}
        self._alloc_size: dict[int, int] = {}
        self._dev_lru: OrderedDict[Unit, None] = OrderedDict()
        self._host_units: dict[Unit, None] = {}
        self._pinned: set[Unit] = set()
        self._pids = itertools.count(1)
        self._ticks = itertools.count(1)
        self._device_bytes = 0
        self._host_bytes = 0
        self._disk_bytes = 0
        self._stats = dict.fromkeys(
            ("spilled_bytes", "unspilled_bytes", "disk_written_bytes", "disk_read_bytes",
             "spill_count", "unspill_count", "disk_errors", "oom_calls"), 0,
        )  # fmt: skip
        self._times = {"spill_time_s": 0.0, "unspill_time_s": 0.0, "disk_time_s": 0.0}
        self._closed = False
        self._self_ref = weakref.ref(self)
        self._oom_hook: _OomHook | None = None
        if spill_on_demand:
            self._oom_hook = _OomHook(self._self_ref, self.device)
            self.device.add_oom_handler(self._oom_hook)

    def __repr__(self) -> str:
        return (
            f"<ProxifyHostFile keys={len(self._entries)} device={self._device_bytes:,}/"
            f"{self.device_memory_limit:,} host={self._host_bytes:,} disk={self._disk_bytes:,}>"
        )

    # --- MutableMapping ------------------------------------------------------
    def __setitem__(self, key: Hashable, value: Any) -> None:
        _check_key(key)
        with self._lock:
            self._enter()
            pids: list[int] = []
            leaves = [0]
            structure = self._proxify(value, pids, leaves)
            if key in self._entries:
                self._remove_entry(key)
            entry = Entry(key, structure, pids, sizeof(value) if not pids else leaves[0])
            self._entries[key] = entry
            self._host_bytes += entry.leaf_nbytes
            for pid in pids:
                rec = self._records[pid]
                if rec.external:
                    self._dev_lru.pop(rec, None)
                    self._host_units.pop(rec, None)
                rec.keys.add(key)
            del structure, value
            self._admit([entry])
            self._drain()

    def __getitem__(self, key: Hashable) -> Any:
        _check_key(key)
        with self._lock:
            self._enter()
            entry = self._entries[key]
            if entry.is_host_value:
                if entry.file is not None:
                    self._load_host_value(entry)
                self._touch([entry])
                self._pin([entry])
                try:
                    self._cascade()
                finally:
                    self._pinned.discard(entry)
                return entry.value
            self._bring_to_device(entry)
            self._touch(self._group(entry))
            self._cascade()
            value = entry.value
            self._drain()
            return value

    def __delitem__(self, key: Hashable) -> None:
        _check_key(key)
        with self._lock:
            self._enter()
            if key not in self._entries:
                raise KeyError(key)
            self._remove_entry(key)
            self._drain()

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
    def register_external(self, obj: Any) -> Any:
        """Track ``obj`` (held outside the mapping) weakly; returns it proxified.

        The externals count toward the limit, can be spilled, and are forgotten
        as soon as their last strong reference dies.
        """
        with self._lock:
            self._enter()
            pids: list[int] = []
            structure = self._proxify(obj, pids, [0])
            units: list[Unit] = []
            for pid in dict.fromkeys(pids):
                rec = self._records[pid]
                units.extend([rec] if rec.external else self._units_of(rec))
            if units:
                self._admit(list(dict.fromkeys(units)))
            self._drain()
            return structure

    def evict(self, nbytes: int) -> int:
        """Spill at least ``nbytes`` of device memory (LRU first); returns bytes freed."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            raise ValueError(f"evict(nbytes): nbytes must be a non-negative int, got {nbytes!r}")
        with self._lock:
            self._enter()
            freed = self._evict_device(nbytes)
            self._cascade()
            self._drain()
            return freed

    def tier_of(self, key: Hashable) -> str:
        """``"device"``, ``"host"`` or ``"disk"``; neither unspills nor touches recency."""
        _check_key(key)
        with self._lock:
            self._enter()
            return self._unit_tier(self._entries[key])

    def snapshot(self) -> StoreSnapshot:
        """Tiers, byte totals and LRU order, without unspilling or touching recency."""
        with self._lock:
            self._enter()
            return StoreSnapshot(
                tiers={k: self._unit_tier(e) for k, e in self._entries.items()},
                device_bytes=self._device_bytes,
                host_bytes=self._host_bytes,
                disk_bytes=self._disk_bytes,
                lru=[u.key for u in self._dev_lru if isinstance(u, Entry)],
                n_externals=sum(1 for r in self._records.values() if r.external),
            )

    def stats(self) -> dict[str, Any]:
        """Bytes and counts per tier, lifetime spill/unspill bytes and time spent."""
        with self._lock:
            self._enter()
            counts = {"device": 0, "host": 0, "disk": 0}
            for entry in self._entries.values():
                counts[self._unit_tier(entry)] += 1
            ext = {"device": 0, "host": 0, "disk": 0}
            for rec in self._records.values():
                if rec.external:
                    ext[rec.tier] += 1
            return {
                "device_bytes": self._device_bytes,
                "host_bytes": self._host_bytes,
                "disk_bytes": self._disk_bytes,
                "device_memory_limit": self.device_memory_limit,
                "memory_limit": self.memory_limit,
                **{f"{t}_keys": n for t, n in counts.items()},
                **{f"{t}_externals": n for t, n in ext.items()},
                **self._stats,
                **self._times,
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
                proxy = rec.ref()
                if proxy is not None:
                    detail = _get_detail(proxy)
                    detail.store_ref = None
                    if detail.file is not None:
                        detail.file.remove()
                        detail.file = None
            for entry in self._entries.values():
                if entry.file is not None:
                    entry.file.remove()
            self._entries.clear()
            self._records.clear()
            self._raw.clear()
            self._alloc_pids.clear()
            self._alloc_size.clear()
            self._dev_lru.clear()
            self._host_units.clear()
            self._inbox.clear()
            self._device_bytes = self._host_bytes = self._disk_bytes = 0
        self._finalizer()

    def __enter__(self) -> ProxifyHostFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- entry points used by ProxyObject ----------------------------------
    def _use_proxy(self, proxy: ProxyObject, detail: _Detail) -> Any:
        with self._lock:
            if self._closed or detail.store_ref is None:
                return _unmanaged_obj(detail)
            self._drain()
            rec = self._records[detail.pid]
            unit = self._units_of(rec)[0]
            if detail.obj is not None:
                obj = detail.obj
                self._touch(self._group(unit))
                return obj
            if self._bring_to_device(unit) is _OVERSIZED:
                self._touch(self._group(unit))
                payload = self._payload_of(rec, detail)
                return detail.handler.to_device(payload, self.device)  # transient copy
            self._touch(self._group(unit))
            self._cascade()
            return detail.obj

    def _write_back(self, proxy: ProxyObject, detail: _Detail, obj: Any) -> None:
        """Persist an in-place change made to a transient copy of a spilled proxy."""
        with self._lock:
            if self._closed or detail.obj is not None:
                return
            rec = self._records[detail.pid]
            payload = detail.handler.to_host(obj, self.device)
            if rec.tier == "disk":
                new_file = self._disk.write(payload)
                self._disk_bytes += new_file.nbytes - rec.disk_nbytes
                detail.file.remove()
                detail.file, rec.disk_nbytes = new_file, new_file.nbytes
            else:
                self._host_bytes += payload.nbytes - rec.host_nbytes
                detail.payload, rec.host_nbytes = payload, payload.nbytes
            rec.restore_nbytes = payload.frames_nbytes
            self._cascade()

    def _pickle_state(self, detail: _Detail) -> Any:
        """What a pickled proxy carries: the object, or host frames; never unspills."""
        with self._lock:
            if detail.obj is not None:
                return detail.obj
            if detail.payload is not None:
                return detail.payload
            if detail.file is None or self._closed:
                return None
            rec = self._records.get(detail.pid)
            return self._disk.read(detail.file, self._key_name(rec))

    def _on_oom(self, shortfall: int) -> bool:
        """Spill-on-demand: free ``shortfall`` device bytes; True if anything was freed."""
        if not self._lock.acquire(timeout=OOM_LOCK_TIMEOUT_S):
            return False
        try:
            if self._closed:
                return False
            self._stats["oom_calls"] += 1
            self._drain()
            freed = self._evict_device(max(1, shortfall))
            self._cascade()  # dask-cuda skipped this; the host limit still holds
            return freed > 0
        finally:
            self._lock.release()

    # --- internals: lifecycle ----------------------------------------------
    def _enter(self) -> None:
        if self._closed:
            raise StoreClosedError("this ProxifyHostFile was closed")
        self._drain()

    def _drain(self) -> None:
        inbox = self._inbox
        while inbox:
            self._forget(inbox.popleft().pid)

    def _forget(self, pid: int) -> None:
        rec = self._records.pop(pid, None)
        if rec is None:
            return
        self._dev_lru.pop(rec, None)
        self._host_units.pop(rec, None)
        if rec.tier == "device":
            self._drop_allocs(rec)
        elif rec.tier == "host":
            self._host_bytes -= rec.host_nbytes
        else:
            self._disk_bytes -= rec.disk_nbytes  # the file died with its proxy

    # --- internals: proxify ------------------------------------------------
    def _proxify(self, value: Any, pids: list[int], leaves: list[int]) -> Any:
        def leaf(x: Any) -> Any:
            if type(x) is ProxyObject:
                return self._adopt(x, pids)
            handler = handler_for(x, self.device)
            if handler is None:
                leaves[0] += sizeof(x)
                return x
            pid = self._raw.get(id(x))
            if pid is not None:
                rec = self._records.get(pid)
                proxy = rec.ref() if rec is not None else None
                if proxy is not None and _get_detail(proxy).obj is x:
                    pids.append(pid)
                    return proxy
            proxy = ProxyObject(_Detail(x, handler, self.device))
            pids.append(self._track(proxy, _get_detail(proxy)).pid)
            return proxy

        return walk(value, leaf)

    def _adopt(self, proxy: ProxyObject, pids: list[int]) -> ProxyObject:
        detail = _get_detail(proxy)
        owner = detail.store()
        if owner is self:
            pids.append(detail.pid)
            return proxy
        if owner is not None and not owner._closed:
            raise ValueError(
                "this ProxyObject is already managed by another ProxifyHostFile "
                f"({owner!r}); counting it in two stores would double count it"
            )
        if detail.obj is None and detail.payload is None:
            raise StoreClosedError(
                "this ProxyObject's spilled data was removed when its store closed"
            )
        if detail.obj is not None and handler_for(detail.obj, self.device) is None:
            raise ValueError(
                f"this ProxyObject holds an object of another device, not {self.device!r}"
            )
        detail.device = self.device
        pids.append(self._track(proxy, detail).pid)
        return proxy

    def _track(self, proxy: ProxyObject, detail: _Detail) -> Record:
        pid = next(self._pids)
        ref = _ProxyRef(proxy, self._inbox.append)
        ref.pid = pid
        rec = Record(pid, ref)
        detail.pid = pid
        detail.store_ref = self._self_ref
        self._records[pid] = rec
        if detail.obj is not None:
            self._add_allocs(rec, detail)
        else:
            rec.tier = "host"
            rec.host_nbytes = detail.payload.nbytes
            rec.restore_nbytes = detail.payload.frames_nbytes
            self._host_bytes += rec.host_nbytes
        return rec

    # --- internals: accounting ---------------------------------------------
    def _add_allocs(self, rec: Record, detail: _Detail) -> None:
        rec.tier = "device"
        rec.allocs = dict(detail.handler.allocations(detail.obj, self.device))
        for aid, nbytes in rec.allocs.items():
            holders = self._alloc_pids.get(aid)
            if holders is None:
                holders = self._alloc_pids[aid] = set()
                self._alloc_size[aid] = nbytes
                self._device_bytes += nbytes
            holders.add(rec.pid)
        self._raw[id(detail.obj)] = rec.pid
        rec.restore_nbytes = int(detail.meta.get("nbytes", 0)) or rec.device_nbytes

    def _drop_allocs(self, rec: Record, obj: Any = None) -> None:
        for aid in rec.allocs:
            holders = self._alloc_pids[aid]
            holders.discard(rec.pid)
            if not holders:
                del self._alloc_pids[aid]
                self._device_bytes -= self._alloc_size.pop(aid)
        rec.allocs = {}
        if obj is not None and self._raw.get(id(obj)) == rec.pid:
            del self._raw[id(obj)]
        else:
            stale = [k for k, v in self._raw.items() if v == rec.pid] if obj is None else []
            for k in stale:
                del self._raw[k]

    # --- internals: units and groups -----------------------------------------
    def _units_of(self, rec: Record) -> list[Unit]:
        if rec.keys:
            return [self._entries[k] for k in rec.keys]
        return [rec]

    def _recs_of(self, unit: Unit) -> list[Record]:
        if isinstance(unit, Record):
            return [unit]
        records = self._records
        return [records[p] for p in unit.pids if p in records]

    def _group(self, unit: Unit) -> list[Unit]:
        """``unit`` and every unit linked to it by a shared proxy or base allocation."""
        order = [unit]
        seen = {unit}
        i = 0
        while i < len(order):
            for rec in self._recs_of(order[i]):
                linked = [rec]
                for aid in rec.allocs:
                    for pid in self._alloc_pids.get(aid, ()):
                        if pid != rec.pid:
                            linked.append(self._records[pid])
                for other in linked:
                    for u in self._units_of(other):
                        if u not in seen:
                            seen.add(u)
                            order.append(u)
            i += 1
        return order

    def _unit_tier(self, unit: Unit) -> str:
        if isinstance(unit, Record):
            return unit.tier
        if unit.is_host_value:
            return "disk" if unit.file is not None else "host"
        return self._records[unit.pids[0]].tier

    def _unit_size(self, unit: Unit) -> int:
        return sum(r.device_nbytes or r.restore_nbytes for r in self._recs_of(unit)) + (
            unit.leaf_nbytes if isinstance(unit, Entry) else 0
        )

    def _group_device_bytes(self, group: list[Unit]) -> int:
        allocs: dict[int, int] = {}
        for u in group:
            for rec in self._recs_of(u):
                allocs.update(rec.allocs)
        return sum(allocs.values())

    def _place(self, unit: Unit) -> None:
        tier = self._unit_tier(unit)
        if tier == "device":
            self._host_units.pop(unit, None)
            if unit not in self._dev_lru:
                self._dev_lru[unit] = None
        elif tier == "host" and (isinstance(unit, Record) or unit.is_host_value or unit.pids):
            self._dev_lru.pop(unit, None)
            self._host_units[unit] = None
        else:
            self._dev_lru.pop(unit, None)
            self._host_units.pop(unit, None)

    def _touch(self, units: list[Unit]) -> None:
        """Mark ``units`` most recently used; within one touch the larger is older."""
        tick = next(self._ticks)
        if len(units) > 1:
            units = sorted(units, key=self._unit_size, reverse=True)
        for unit in units:
            unit.tick = tick
            if unit in self._dev_lru:
                self._dev_lru.move_to_end(unit)

    def _pin(self, units: list[Unit]) -> list[Unit]:
        new = [u for u in units if u not in self._pinned]
        self._pinned.update(new)
        return new

    def _key_name(self, rec: Record | None) -> str:
        if rec is None or not rec.keys:
            return "<external>"
        return repr(next(iter(rec.keys)))

    # --- internals: admission and eviction --------------------------------------
    def _admit(self, units: list[Unit]) -> None:
        """Place freshly stored/registered units on device (or host if too large), MRU."""
        pinned = self._pin(units)
        try:
            for unit in units:
                if isinstance(unit, Entry) and unit.is_host_value:
                    self._place(unit)
                    continue
                group = self._group(unit)
                if self._bring_to_device(unit) is _OVERSIZED or (
                    self._group_device_bytes(group) > self.device_memory_limit
                ):
                    self._spill_to_host([u for u in group if self._unit_tier(u) == "device"])
                for u in group:
                    self._place(u)
            self._touch(units)
        finally:
            self._pinned.difference_update(pinned)
        self._evict_device(self._device_bytes - self.device_memory_limit)
        self._cascade()

    def _evict_device(self, need: int) -> int:
        """Spill LRU groups device -> host until ``need`` bytes are freed."""
        freed = 0
        blocked: set[Unit] = set()
        while freed < need:
            victim = next(
                (u for u in self._dev_lru if u not in self._pinned and u not in blocked), None
            )
            if victim is None:
                break
            group = [u for u in self._group(victim) if u in self._dev_lru]
            if any(u in self._pinned for u in group):
                blocked.update(group)
                continue
            before = self._device_bytes
            self._spill_to_host(group)
            freed += before - self._device_bytes
        return freed

    def _spill_to_host(self, group: list[Unit]) -> None:
        start = time.perf_counter()
        moves = []
        for rec in dict.fromkeys(r for u in group for r in self._recs_of(u)):
            proxy = rec.ref()
            if proxy is None or rec.tier != "device":
                continue
            detail = _get_detail(proxy)
            moves.append((rec, detail, detail.handler.to_host(detail.obj, self.device)))
        for rec, detail, payload in moves:  # commit only after every copy succeeded
            obj, detail.obj, detail.payload = detail.obj, None, payload
            self._drop_allocs(rec, obj)
            del obj
            rec.tier = "host"
            rec.host_nbytes = payload.nbytes
            rec.restore_nbytes = payload.frames_nbytes
            self._host_bytes += payload.nbytes
            self._stats["spilled_bytes"] += payload.frames_nbytes
            self._stats["spill_count"] += 1
        moves.clear()
        for u in group:
            self._place(u)
        self._times["spill_time_s"] += time.perf_counter() - start

    def _cascade(self) -> None:
        """Host -> disk, least recently used first, until host bytes <= memory_limit."""
        limit = self.memory_limit
        if limit is None or self._host_bytes <= limit:
            return
        order = sorted(
            (u for u in self._host_units if u not in self._pinned),
            key=lambda u: (u.tick, -self._unit_size(u)),
        )
        skip: set[Unit] = set()
        for victim in order:
            if self._host_bytes <= limit:
                break
            if victim in skip or victim not in self._host_units:
                continue
            group = [u for u in self._group(victim) if u in self._host_units]
            if any(u in self._pinned for u in group):
                continue
            try:
                self._spill_to_disk(group)
            except Exception as exc:  # full disk, unpicklable value: it stays in memory
                self._stats["disk_errors"] += 1
                skip.update(group)
                warnings.warn(
                    f"spilling {self._key_name_unit(victim)} to {self.spill_dir} failed "
                    f"({exc}); the value stays in host memory",
                    SpillWarning,
                    stacklevel=3,
                )

    def _key_name_unit(self, unit: Unit) -> str:
        return repr(unit.key) if isinstance(unit, Entry) else "<external>"

    def _spill_to_disk(self, group: list[Unit]) -> None:
        """Write every host member of ``group``; on any failure nothing moves."""
        start = time.perf_counter()
        written: list[tuple[Any, SpillFile]] = []
        try:
            for u in group:
                if isinstance(u, Entry) and u.is_host_value:
                    written.append((u, self._disk.write(serialize.dumps(u.value))))
                    continue
                for rec in self._recs_of(u):
                    proxy = rec.ref()
                    if proxy is not None and rec.tier == "host":
                        detail = _get_detail(proxy)
                        written.append((rec, self._disk.write(detail.payload), detail))
        except BaseException:
            for item in written:
                item[1].remove()
            raise
        for item in written:
            target, file = item[0], item[1]
            if isinstance(target, Entry):
                target.value, target.file = None, file
                self._host_bytes -= target.leaf_nbytes
            else:
                detail = item[2]
                detail.payload, detail.file = None, file
                self._host_bytes -= target.host_nbytes
                target.tier, target.host_nbytes, target.disk_nbytes = "disk", 0, file.nbytes
            self._disk_bytes += file.nbytes
            self._stats["disk_written_bytes"] += file.nbytes
        for u in group:
            self._place(u)
        self._times["disk_time_s"] += time.perf_counter() - start

    def _payload_of(self, rec: Record, detail: _Detail) -> Any:
        if detail.payload is not None:
            return detail.payload
        self._stats["disk_read_bytes"] += rec.disk_nbytes
        return self._disk.read(detail.file, self._key_name(rec))

    def _bring_to_device(self, unit: Unit) -> Any:
        """Unspill ``unit``'s group, evicting others *before* copying back.

        Returns ``_OVERSIZED`` (and changes nothing) when the group alone would
        exceed the limit; such values live on host and are used transiently.
        """
        group = self._group(unit)
        load = [
            r
            for r in dict.fromkeys(r for u in group for r in self._recs_of(u))
            if r.tier != "device"
        ]
        if not load:
            return None
        need = sum(r.restore_nbytes for r in load)
        if need + self._group_device_bytes(group) > self.device_memory_limit:
            return _OVERSIZED
        start = time.perf_counter()
        pinned = self._pin(group)
        try:
            self._evict_device(self._device_bytes + need - self.device_memory_limit)
            proxies = [r.ref() for r in load]
            details = [_get_detail(p) for p in proxies if p is not None]
            load = [r for r, p in zip(load, proxies, strict=True) if p is not None]
            payloads = [self._payload_of(r, d) for r, d in zip(load, details, strict=True)]
            objs = [
                d.handler.to_device(pl, self.device)
                for d, pl in zip(details, payloads, strict=True)
            ]
        finally:
            self._pinned.difference_update(pinned)
        for rec, detail, obj in zip(load, details, objs, strict=True):
            if rec.tier == "disk":
                self._disk_bytes -= rec.disk_nbytes
                detail.file.remove()
                detail.file, rec.disk_nbytes = None, 0
            else:
                self._host_bytes -= rec.host_nbytes
                rec.host_nbytes = 0
            detail.payload = None
            detail.obj = obj
            self._add_allocs(rec, detail)
            self._stats["unspilled_bytes"] += rec.restore_nbytes
            self._stats["unspill_count"] += 1
        for u in group:
            self._place(u)
        self._times["unspill_time_s"] += time.perf_counter() - start
        return None

    def _load_host_value(self, entry: Entry) -> None:
        payload = self._disk.read(entry.file, repr(entry.key))
        self._stats["disk_read_bytes"] += entry.file.nbytes
        entry.value = serialize.loads(payload)
        self._disk_bytes -= entry.file.nbytes
        entry.file.remove()
        entry.file = None
        self._host_bytes += entry.leaf_nbytes
        self._place(entry)

    def _remove_entry(self, key: Hashable) -> None:
        entry = self._entries.pop(key)
        self._dev_lru.pop(entry, None)
        self._host_units.pop(entry, None)
        if entry.file is not None:
            self._disk_bytes -= entry.file.nbytes
            entry.file.remove()
        else:
            self._host_bytes -= entry.leaf_nbytes
        pids = entry.pids
        entry.value = None  # drop our references: unshared proxies die right here
        del entry
        for pid in dict.fromkeys(pids):
            rec = self._records.get(pid)
            if rec is None:
                continue
            rec.keys.discard(key)
            if rec.keys:
                continue
            if rec.ref() is None:
                self._forget(pid)
                continue
            # Still referenced outside the store: it becomes an external of least recency.
            self._place(rec)
            if rec in self._dev_lru:
                self._dev_lru.move_to_end(rec, last=False)


def _check_key(key: object) -> None:
    try:
        hash(key)
    except TypeError:
        raise TypeError(
            f"store keys must be hashable; got unhashable key of type {type(key).__name__}"
        ) from None


def _unmanaged_obj(detail: _Detail) -> Any:
    from .proxy import _use_unmanaged

    return _use_unmanaged(detail)
