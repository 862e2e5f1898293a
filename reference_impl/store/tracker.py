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
from .proxy import ProxyObject, ProxyState, _new_object, _set_state, state_of
from .records import Record
from .serialize import Payload


class Tracker:
    """Turns device leaves into tracked proxies and forgets dead ones."""

    def __init__(self, tiers: TierMover, manager_ref: weakref.ref) -> None:
        self.tiers = tiers
        self.index = tiers.index
        self.accounting = tiers.accounting
        self.device = tiers.device
        self.manager_ref = manager_ref
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
            pids.append(state_of(proxy).rec.pid)
            return proxy
        state = ProxyState(x, handler, device)
        proxy = _new_object(ProxyObject)  # ProxyObject(state) without the __init__ call
        _set_state(proxy, state)
        # track(), inlined for a device object (the hot path of every set)
        pid = next(self._pids)
        rec = Record(proxy, self._queue_dead)
        rec.pid = pid
        state.rec = rec
        state.manager_ref = self.manager_ref
        index.records[pid] = rec
        index.add_allocs(rec, state, device, pair)
        pids.append(pid)
        return proxy

    def adopt(self, proxy: ProxyObject, pids: list[int]) -> ProxyObject:
        """Take over an unmanaged proxy (unpickled, or from a closed store)."""
        state = state_of(proxy)
        owner = state.manager()
        if owner is not None and owner is self.manager_ref():
            pids.append(state.rec.pid)
            return proxy
        if owner is not None and not owner.closed:
            raise ValueError(
                "this ProxyObject is already managed by another ProxifyHostFile "
                f"({owner!r}); counting it in two stores would double count it"
            )
        tier = state.tier
        if tier not in ("device", "host"):
            raise StoreClosedError(
                "this ProxyObject's spilled data was removed when its store closed"
            )
        if tier == "device" and handler_for(state.held, self.device) is None:
            raise ValueError(
                f"this ProxyObject holds an object of another device, not {self.device!r}"
            )
        state.device = self.device
        pids.append(self.track(proxy, state).pid)
        return proxy

    def track(self, proxy: ProxyObject, state: ProxyState) -> Record:
        pid = next(self._pids)
        rec = Record(proxy, self._queue_dead)
        rec.pid = pid
        state.rec = rec
        state.manager_ref = self.manager_ref
        self.index.records[pid] = rec
        state.clean = None  # a clean copy of the store that let it go (closed or collected)
        payload = state.held
        if type(payload) is not Payload:
            self.index.add_allocs(rec, state, self.device)
        else:
            # What a copy back costs the device: frames undercount arrays pickled in band.
            rec.restore_nbytes = int(state.meta.get("nbytes", 0)) or payload.frames_nbytes
            self.accounting.move(rec, "host", payload.nbytes)
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
            self.index.drop_allocs(rec)  # the common case: no second call on every del
            if rec.clean_nbytes:  # its file died with its proxy; its count goes now
                self.accounting.drop_clean(rec)
        else:
            self.accounting.forget(rec)  # on disk, the file died with its proxy
        rec.pid = 0  # drain() skips it when its weakref callback queued it too
