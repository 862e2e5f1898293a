"""Alias groups: which eviction units must change tier together.

Two units are linked when they share a proxy (two keys holding one proxy) or
a base allocation (a view in one key, its base in another). A unit's *group*
is the closure over those links; moving a group together is what keeps every
key in exactly one tier and makes spilling really free device bytes.

The allocation table lives here because it is also what links the groups; it tells
the :class:`Accounting` when a base allocation is first held and last let go, so
device bytes count each allocation once however many proxies hold it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from .accounting import Accounting
from .dispatch import ARRAY, is_immutable
from .proxy import state_of
from .records import Entry, Record, Unit


class UnitIndex:
    """Keys, tracked proxies, and the allocation table that links them."""

    def __init__(self, accounting: Accounting) -> None:
        self.accounting = accounting
        self.entries: dict[Hashable, Entry] = {}
        self.records: dict[int, Record] = {}
        # id(device object) -> pid, to find the proxy of an object stored again. Only for
        # objects whose allocation is shared (or not a lone array): a lone array is found
        # through its allocation's one holder, so the common set and del skip this table.
        self.raw: dict[int, int] = {}
        # Allocation id -> the pid holding it, or the set of pids (two or more) sharing
        # it. One holder, the common case, costs no set: one object less to allocate and
        # to reach on every add and drop. An allocation's size is in its holders' allocs.
        self.alloc_pids: dict[int, int | set[int]] = {}
        # Records held by two or more keys plus allocations held by two or more
        # records. While it is 0 every unit is its own group, so the hot paths
        # skip even the per-unit solo check.
        self.links = 0
        # id(host value) -> the entry (the owner of its peers) holding it in memory: how a
        # host object stored again under another key is recognised (SPEC 3.2).
        self.host_objects: dict[int, Entry] = {}

    def clear(self) -> None:
        """Forget everything; breaks the entry <-> record links so nothing waits for the GC."""
        for entry in self.entries.values():
            entry.rec = entry.peers = None
        for rec in self.records.values():
            rec.holders = None
        self.links = 0
        self.entries.clear()
        self.records.clear()
        self.raw.clear()
        self.alloc_pids.clear()
        self.host_objects.clear()

    # --- allocations ---------------------------------------------------------
    def proxy_of(self, obj: Any, aid: int | None) -> Any:
        """The live proxy whose device object is ``obj`` (stored again: reuse it), or None.

        The proxy itself, not its record: the caller's reference keeps it alive.

        ``aid`` is ``obj``'s allocation for an array (None otherwise): its one holder, if
        it has one, is the only candidate; shared allocations go through :attr:`raw`.
        """
        pid: int | None = None
        if aid is not None:
            holders = self.alloc_pids.get(aid)
            if holders is None:
                return None  # a new allocation: nothing stored holds it
            if type(holders) is int:
                pid = holders
        if pid is None:
            pid = self.raw.get(id(obj))
        rec = self.records.get(pid) if pid is not None else None
        proxy = rec() if rec is not None else None
        return proxy if proxy is not None and state_of(proxy).held is obj else None

    def add_allocs(self, rec: Record, state: Any, device: Any, pair: Any = None) -> None:
        """Count ``rec``'s device object (``rec`` is on the device tier); an allocation
        already held costs nothing.

        ``pair`` is ``device.allocation_of(obj)`` when the caller has it already.
        """
        obj, handler, pid = state.held, state.handler, rec.pid
        if handler is ARRAY:  # one base allocation: skip the list the protocol returns
            if pair is None:
                pair = device.allocation_of(obj)
            rec.alloc_id, rec.alloc_nbytes = pair
            items: Any = (pair,)
        else:
            allocs = dict(handler.allocations(obj, device))
            rec.set_allocs(allocs)
            items = allocs.items()
            self._name_raw(rec, obj)
        alloc_pids = self.alloc_pids
        for aid, nbytes in items:
            holders = alloc_pids.get(aid)
            if holders is None:
                alloc_pids[aid] = pid
                self.accounting.allocated(nbytes)
                continue
            self._name_raw(rec, obj)  # a shared allocation: findable only through raw
            if type(holders) is int:
                if holders != pid:
                    alloc_pids[aid] = {holders, pid}
                    self.links += 1
                    other = self.records.get(holders)
                    if other is not None:
                        self._name_raw(other, None)
                    if not is_immutable(handler):
                        self._drop_clean_of((holders,))
            else:
                holders.add(pid)
                if not is_immutable(handler):
                    self._drop_clean_of(holders)
        rec.restore_nbytes = int(state.meta.get("nbytes", 0)) or rec.device_nbytes

    def _drop_clean_of(self, pids: Iterable[int]) -> None:
        """A mutable object now shares memory with these records: a write through it would
        change them unseen, so none of them may keep a clean copy any more."""
        for p in pids:
            other = self.records.get(p)
            if other is not None and other.clean_nbytes:
                self.accounting.drop_clean(other)

    def _name_raw(self, rec: Record, obj: Any) -> None:
        """Map ``rec``'s device object (``obj``, or read from its proxy) in :attr:`raw`."""
        if rec.raw_id:
            return
        if obj is None:
            proxy = rec()
            obj = state_of(proxy).obj if proxy is not None else None
            if obj is None:
                return  # dead or not on device: nothing to find
        rid = rec.raw_id = id(obj)
        self.raw[rid] = rec.pid

    def drop_allocs(self, rec: Record) -> None:
        """Uncount ``rec``'s device object; an allocation is freed with its last holder."""
        alloc_pids, pid, aid = self.alloc_pids, rec.pid, rec.alloc_id
        items = ((aid, rec.alloc_nbytes),) if aid is not None else (rec.more_allocs or {}).items()
        for aid, nbytes in items:
            holders = alloc_pids[aid]
            if type(holders) is int:
                if holders == pid:  # its last holder: the allocation is freed
                    del alloc_pids[aid]
                    self.accounting.freed(nbytes)
            else:
                holders.discard(pid)
                if len(holders) == 1:
                    alloc_pids[aid] = holders.pop()
                    self.links -= 1
        rec.alloc_id, rec.alloc_nbytes, rec.more_allocs = None, 0, None
        # The one raw entry that can name ``rec`` is at rec.raw_id (0: it has none).
        rid = rec.raw_id
        if rid:
            if self.raw.get(rid) == pid:
                del self.raw[rid]
            rec.raw_id = 0

    # --- keys ---------------------------------------------------------------------
    def add_entry(self, entry: Entry) -> list[Record] | None:
        """Index ``entry`` under its key and as a holder of its proxies.

        Returns the records that were queued externals until now (the caller takes them
        out of the recency queues), or None: the common case allocates nothing.
        """
        self.entries[entry.key] = entry
        records = self.records
        queued = None
        rec = None
        for pid in entry.pids:
            rec = records[pid]
            if rec.holders is None:  # an external until now (or new)
                if rec.lru:
                    if queued is None:
                        queued = []
                    queued.append(rec)
                rec.holders = entry
            else:
                self.add_key(rec, entry)
        if len(entry.pids) == 1:
            entry.rec = rec
        return queued

    def add_key(self, rec: Record, entry: Entry) -> None:
        """``entry`` (now in :attr:`entries`) holds ``rec``'s proxy (again is a no-op)."""
        holders = rec.holders
        if holders is None:
            rec.holders = entry
        elif type(holders) is set:
            holders.add(entry)
        elif holders is not entry:
            rec.holders = {holders, entry}
            self.links += 1

    def discard_key(self, rec: Record, entry: Entry) -> None:
        """``entry`` (already out of :attr:`entries`) no longer holds ``rec``'s proxy."""
        holders = rec.holders
        if holders is entry:
            rec.holders = None
        elif type(holders) is set:
            holders.discard(entry)
            if len(holders) == 1:
                rec.holders = holders.pop()
                self.links -= 1

    def forget_record(self, pid: int) -> Record | None:
        """Stop tracking ``pid`` (its allocations are dropped by the caller)."""
        rec = self.records.pop(pid, None)
        if rec is not None and type(rec.holders) is set:
            self.links -= 1
        return rec

    def count_links(self) -> int:
        """Recount :attr:`links` from scratch (for tests of the invariant)."""
        shared_recs = sum(1 for r in self.records.values() if type(r.holders) is set)
        return shared_recs + sum(1 for h in self.alloc_pids.values() if type(h) is set)

    # --- host values under several keys ------------------------------------------
    @staticmethod
    def owner(entry: Entry) -> Entry:
        """The entry whose bytes the totals count for ``entry``'s host value."""
        peers = entry.peers
        return peers[0] if peers else entry

    def link_host_value(self, entry: Entry) -> bool:
        """``entry`` (a new key's host value, in memory) joins the key already holding that
        very object in memory, as its peer: True. Otherwise it is the object's holder: False."""
        value = entry.value
        other = self.host_objects.get(id(value))
        if other is None or other.value is not value:
            self.host_objects[id(value)] = entry
            return False
        peers = other.peers
        if peers is None:
            peers = other.peers = [other]
        peers.append(entry)
        entry.peers = peers
        return True

    def unlink_host_value(self, entry: Entry) -> Entry | None:
        """``entry`` leaves its peers; returns the owner they have now (None: it had none)."""
        peers = entry.peers
        if peers is None:
            if entry.value is not None and self.host_objects.get(id(entry.value)) is entry:
                del self.host_objects[id(entry.value)]
            return None
        peers.remove(entry)
        entry.peers = None
        owner = peers[0]
        if len(peers) == 1:
            owner.peers = None
        if owner.value is not None:
            self.host_objects[id(owner.value)] = owner
        return owner

    def host_value_out(self, entry: Entry) -> None:
        """``entry``'s host value leaves memory (to disk): its id may name another object."""
        value = entry.value
        if value is not None and self.host_objects.get(id(value)) is self.owner(entry):
            del self.host_objects[id(value)]

    # --- units and groups ------------------------------------------------------
    def units_of(self, rec: Record) -> list[Unit]:
        """The units ``rec`` belongs to: the entries holding it, or itself if external."""
        return rec.entries() or [rec]

    def recs_of(self, unit: Unit) -> list[Record]:
        if isinstance(unit, Record):
            return [unit]
        records = self.records
        return [records[p] for p in unit.pids if p in records]

    def solo_record(self, unit: Unit) -> Record | None:
        """The one record of ``unit`` when nothing links ``unit`` to another unit.

        This is the common case, answered with a few lookups so that the hot
        paths skip the closure walk of :meth:`group`. None otherwise.
        """
        if type(unit) is Record:
            rec = unit
            if rec.holders is not None:
                return None
        else:
            rec = unit.rec
            if rec is None:
                return None
            if not self.links:  # then no record has two keys: ``rec`` has only this one
                return rec
            if type(rec.holders) is set:
                return None
        if not self.links:
            return rec
        alloc_pids = self.alloc_pids
        aid = rec.alloc_id
        if aid is not None:  # shared with another record when its holders are a set
            return None if type(alloc_pids.get(aid)) is set else rec
        for aid in rec.more_allocs or ():
            if type(alloc_pids.get(aid)) is set:
                return None
        return rec

    def is_solo(self, unit: Unit) -> bool:
        """True when ``unit`` is its own group (conservative: may say False)."""
        if self.solo_record(unit) is not None:
            return True
        # The rare shapes: an entry without proxies, or whose one proxy was forgotten.
        pids = None if type(unit) is Record else unit.pids
        return pids is not None and (not pids or (len(pids) == 1 and pids[0] not in self.records))

    def group(self, unit: Unit) -> list[Unit]:
        """``unit`` and every unit linked to it by a shared proxy or base allocation, or, for
        a host value, the keys holding the same object."""
        if type(unit) is Entry and unit.peers:
            return list(unit.peers)
        if not self.links or self.is_solo(unit):
            return [unit]
        order = [unit]
        seen = {unit}
        i = 0
        while i < len(order):
            for rec in self.recs_of(order[i]):
                linked = [rec]
                for aid in rec.allocs:
                    holders = self.alloc_pids.get(aid, ())
                    for pid in (holders,) if type(holders) is int else holders:
                        if pid != rec.pid:
                            linked.append(self.records[pid])
                for other in linked:
                    for u in self.units_of(other):
                        if u not in seen:
                            seen.add(u)
                            order.append(u)
            i += 1
        return order

    def group_records(self, group: list[Unit]) -> list[Record]:
        """Every record of ``group``, once, in order."""
        if len(group) == 1:
            return list(dict.fromkeys(self.recs_of(group[0])))
        return list(dict.fromkeys(r for u in group for r in self.recs_of(u)))

    def tier(self, unit: Unit) -> str:
        if isinstance(unit, Record):
            return unit.tier
        if unit.is_host_value:
            return "disk" if unit.file is not None else "host"
        rec = unit.rec
        return (rec if rec is not None else self.records[unit.pids[0]]).tier

    def size(self, unit: Unit) -> int:
        """Bytes ``unit`` occupies on device, or would need to come back."""
        return sum(r.device_nbytes or r.restore_nbytes for r in self.recs_of(unit)) + (
            unit.leaf_nbytes if isinstance(unit, Entry) else 0
        )

    def group_device_bytes(self, group: list[Unit]) -> int:
        """Device bytes ``group`` holds now, each base allocation counted once."""
        allocs: dict[int, int] = {}
        for u in group:
            for rec in self.recs_of(u):
                allocs.update(rec.allocs)
        return sum(allocs.values())

    def key_name(self, rec: Record | None) -> str:
        """A key holding ``rec``, for error messages."""
        entry = None if rec is None else rec.some_entry()
        return "<external>" if entry is None else repr(entry.key)
