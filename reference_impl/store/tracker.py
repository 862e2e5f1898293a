"""Proxify values and track their proxies weakly.

Every device leaf becomes a :class:`ProxyObject` the store tracks through a
weak reference. When a proxy dies its reference's callback only appends to an
inbox (no lock may be taken inside a finalizer); the next locked store call
drains the inbox and forgets the record, releasing its bytes.
"""

from __future__ import annotations

import itertools
import weakref
from collections import deque
from typing import Any

from dask.sizeof import sizeof

from .containers import is_leaf, walk
from .dispatch import ARRAY, handler_for
from .errors import StoreClosedError
from .mover import TierMover
from .proxy import ProxyObject, _Detail, _get_detail, _new_object, _set_detail
from .records import Record


class Tracker:
    """Turns device leaves into tracked proxies and forgets dead ones."""

    def __init__(self, tiers: TierMover, store_ref: weakref.ref) -> None:
        self.tiers = tiers
        self.index = tiers.index
        self.device = tiers.device
        self.store_ref = store_ref
        self.inbox: deque[Record] = deque()
        self._queue_dead = self.inbox.append  # the weakref callback: no lock, no allocation
        self._pids = itertools.count(1)

    def proxify(self, value: Any, pids: list[int], leaves: list[int]) -> Any:
        """``value`` with device leaves proxified; appends their pids, adds host sizes."""
        if is_leaf(value):  # a bare array, the common case: no container walk
            return self._leaf(value, pids, leaves)
        return walk(value, lambda x: self._leaf(x, pids, leaves))

    def _leaf(self, x: Any, pids: list[int], leaves: list[int]) -> Any:
        if type(x) is ProxyObject:
            return self.adopt(x, pids)
        device = self.device
        handler = handler_for(x, device)
        if handler is None:
            leaves[0] += sizeof(x)
            return x
        index = self.index
        pair = device.allocation_of(x) if handler is ARRAY else None
        proxy = index.proxy_of(x, None if pair is None else pair[0])
        if proxy is not None:  # the same device object again: reuse its proxy
            pids.append(_get_detail(proxy).rec.pid)
            return proxy
        detail = _Detail(x, handler, device)
        proxy = _new_object(ProxyObject)  # ProxyObject(detail) without the __init__ call
        _set_detail(proxy, detail)
        # track(), inlined for a device object (the hot path of every set)
        pid = next(self._pids)
        rec = Record(proxy, self._queue_dead)
        rec.pid = pid
        detail.rec = rec
        detail.store_ref = self.store_ref
        index.records[pid] = rec
        index.add_allocs(rec, detail, device, pair)
        pids.append(pid)
        return proxy

    def adopt(self, proxy: ProxyObject, pids: list[int]) -> ProxyObject:
        """Take over an unmanaged proxy (unpickled, or from a closed store)."""
        detail = _get_detail(proxy)
        owner = detail.store()
        if owner is not None and owner is self.store_ref():
            pids.append(detail.rec.pid)
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
        pids.append(self.track(proxy, detail).pid)
        return proxy

    def track(self, proxy: ProxyObject, detail: _Detail) -> Record:
        pid = next(self._pids)
        rec = Record(proxy, self._queue_dead)
        rec.pid = pid
        detail.rec = rec
        detail.store_ref = self.store_ref
        self.index.records[pid] = rec
        if detail.obj is not None:
            self.index.add_allocs(rec, detail, self.device)
        else:
            rec.tier = "host"
            rec.host_nbytes = detail.payload.nbytes
            # What a copy back costs the device: frames undercount arrays pickled in band.
            rec.restore_nbytes = int(detail.meta.get("nbytes", 0)) or detail.payload.frames_nbytes
            self.tiers.host_bytes += rec.host_nbytes
        return rec

    def drain(self) -> None:
        """Forget every proxy that died since the last call."""
        inbox = self.inbox
        while inbox:
            pid = inbox.popleft().pid
            if pid:  # 0: forgotten already, when its last key went
                self.forget(pid)

    def forget(self, pid: int, *, unit: bool = True) -> None:
        """Stop tracking ``pid``; ``unit=False`` when it had keys, so no LRU list holds it."""
        rec = self.index.forget_record(pid)
        if rec is None:
            return
        if unit:
            self.tiers.recency.remove(rec)
        if rec.tier == "device":
            self.index.drop_allocs(rec)
        elif rec.tier == "host":
            self.tiers.host_bytes -= rec.host_nbytes
        else:
            self.tiers.disk_bytes -= rec.disk_nbytes  # the file died with its proxy
        rec.pid = 0  # drain() skips it when its weakref callback queued it too
