"""Tier moves: device -> host -> disk and back, with exact byte accounting.

Every move is all-or-nothing per group: copies are made first and committed
only once all of them succeeded, so a failure (device OOM while unspilling, a
full disk) leaves every key in one tier and every counter exact. Unspilling
evicts others *before* copying back, so the limit holds after every call.

Clean copies: a value of an immutable type (``DeviceType.immutable``, the Table) read
back from disk keeps its file (``ProxyState.clean``), and its next spill reuses it:
evicted from the device it goes straight to disk (its device copy dropped, nothing
serialized, nothing written), or, from host, the cascade hands it its file instead of
writing one.
Reading a value's outputs back therefore no longer writes them out again. A group moves
straight to disk only when every device member has a clean copy, so a key never splits
over two tiers; otherwise the group goes to host as before and each clean member keeps its
file for the cascade. A mutable value (an array, a host value) keeps no clean copy: an
in-place write (SPEC 13.1) would leave its file stale, unseen.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

from . import serialize
from .accounting import DEVICE as ON_DEVICE
from .accounting import DISK, Accounting
from .accounting import HOST as ON_HOST
from .disk import SpillDir, SpillFile
from .dispatch import is_immutable
from .errors import SpillWarning
from .index import UnitIndex
from .proxy import ProxyState, state_of
from .recency import DEVICE, HOST, Recency
from .records import Entry, Record, Unit
from .serialize import Payload

OVERSIZED = object()
"""Returned by :meth:`TierMover.bring_to_device` for a group larger than the limit."""

_STAT_NAMES = (
    "spilled_bytes", "unspilled_bytes", "disk_written_bytes", "disk_read_bytes",
    "spill_count", "unspill_count", "disk_errors", "oom_calls",
    "disk_reused_bytes", "disk_reuse_count",
)  # fmt: skip
"""``disk_reused_bytes``/``disk_reuse_count``: spills to disk that reused a clean copy
instead of writing (counted apart from ``disk_written_bytes``)."""


class TierMover:
    """Moves groups between tiers and keeps host/disk byte totals and statistics."""

    def __init__(
        self,
        index: UnitIndex,
        recency: Recency,
        device: Any,
        disk: SpillDir,
        device_memory_limit: int,
        memory_limit: int | None,
    ) -> None:
        self.index = index
        self.accounting: Accounting = index.accounting
        self.recency = recency
        self.device = device
        self.disk = disk
        self.device_memory_limit = device_memory_limit
        self.memory_limit = memory_limit
        self.stats = dict.fromkeys(_STAT_NAMES, 0)
        self.kept: dict[Entry, Any] = {}  # host values being read: the file each came from
        self.times = {"spill_time_s": 0.0, "unspill_time_s": 0.0, "disk_time_s": 0.0}

    def place(self, unit: Unit) -> None:
        self.recency.place(unit, self.index.tier(unit))

    def place_all(self, units: list[Unit]) -> None:
        for u in units:
            self.place(u)

    # --- admission and eviction ----------------------------------------------
    def admit_new(self, entry: Entry) -> None:
        """A key's new value, in the index already: count a host value, place it, make room."""
        accounting = self.accounting
        if entry.is_host_value:  # a device value's small host leaves ride with it
            if not self.index.link_host_value(entry):  # a peer's bytes are its owner's
                accounting.add_value(ON_HOST, entry.leaf_nbytes)
        elif accounting.device_bytes <= self.device_memory_limit:
            # The hot path of every set: one solo unit, already on device, and it all fits.
            rec = self.index.solo_record(entry)
            if rec is not None and rec.tier == "device":
                self.recency.place_newest(entry)
                limit = self.memory_limit
                if limit is not None and accounting.host_bytes > limit:
                    self.cascade()
                return
        self._place_new([entry])  # not admit(): its one-unit check just failed here

    def discard_host_value(self, entry: Entry) -> None:
        """A key's host value leaves the store: uncounted, its file (if any) removed; with
        peers left, the value and its file stay theirs (counted through their owner)."""
        file = entry.file
        was_owner = self.index.owner(entry) is entry
        owner = self.index.unlink_host_value(entry)
        if owner is not None:
            if was_owner and file is None:
                self.accounting.remove_value(ON_HOST, entry.leaf_nbytes)
                self.accounting.add_value(ON_HOST, owner.leaf_nbytes)
            return
        if file is not None:
            self.accounting.remove_value(DISK, file.nbytes)
            file.remove()
        else:
            self.accounting.remove_value(ON_HOST, entry.leaf_nbytes)

    def admit(self, units: list[Unit]) -> None:
        """Place freshly stored/registered units on device (or host if too large), MRU."""
        index, recency, accounting = self.index, self.recency, self.accounting
        if len(units) == 1 and accounting.device_bytes <= self.device_memory_limit:
            # The hot path: one solo unit, already on device, and everything fits.
            unit = units[0]
            rec = index.solo_record(unit)
            if rec is not None and rec.tier == "device":
                recency.place_newest(unit)
                self.cascade()
                return
        self._place_new(units)

    def _place_new(self, units: list[Unit]) -> None:
        """:meth:`admit` past its one-unit check: place each unit's group, then make room."""
        index, recency, accounting = self.index, self.recency, self.accounting
        pinned = recency.pin(units)
        try:
            for unit in units:
                if isinstance(unit, Entry) and unit.is_host_value:
                    self.place(unit)
                    continue
                group = index.group(unit)
                if self.bring_to_device(unit) is OVERSIZED or (
                    index.group_device_bytes(group) > self.device_memory_limit
                ):
                    self.spill_to_host([u for u in group if index.tier(u) == "device"])
                self.place_all(group)
            recency.touch(units, index.size)
        finally:
            recency.unpin(pinned)
        self.evict_device(accounting.device_bytes - self.device_memory_limit)
        self.cascade()

    def evict_device(self, need: int) -> int:
        """Spill LRU groups device -> host until ``need`` bytes are freed."""
        index, recency, accounting = self.index, self.recency, self.accounting
        freed = 0
        blocked: set[Unit] = set()
        while freed < need:
            victim = recency.device_victim(blocked)
            if victim is None:
                break
            group = [u for u in index.group(victim) if u.lru == DEVICE]
            if any(u in recency.pinned for u in group):
                blocked.update(group)
                continue
            before = accounting.device_bytes
            self.spill_to_host(group)
            freed += before - accounting.device_bytes
            # A member whose proxy died on another thread mid-call cannot be
            # spilled; it waits for the next drain. Never pick it again here.
            blocked.update(u for u in group if u.lru == DEVICE)
        return freed

    def cascade(self) -> None:
        """Host -> disk, least recently used first, until host bytes <= memory_limit."""
        limit = self.memory_limit
        if limit is None or self.accounting.host_bytes <= limit:
            return
        victims = self.recency.host_victims(self.index.size)
        try:
            self._cascade(victims, limit)
        finally:
            close = getattr(victims, "close", None)
            if close is not None:
                close()  # now, not at collection: puts back the host units it popped

    def _cascade(self, victims: Any, limit: int) -> None:
        index, recency, accounting = self.index, self.recency, self.accounting
        skip: set[Unit] = set()
        for victim in victims:
            if accounting.host_bytes <= limit:
                break
            if victim in skip or victim.lru != HOST:
                continue
            group = [u for u in index.group(victim) if u.lru == HOST]
            if any(u in recency.pinned for u in group):
                continue
            try:
                self._spill_to_disk_making_room(group)
            except Exception as exc:  # full disk, unpicklable value: it stays in memory
                self.stats["disk_errors"] += 1
                skip.update(group)
                name = repr(victim.key) if isinstance(victim, Entry) else "<external>"
                warnings.warn(
                    f"spilling {name} to {self.disk.path} failed "
                    f"({exc}); the value stays in host memory",
                    SpillWarning,
                    stacklevel=4,
                )

    def _spill_to_disk_making_room(self, group: list[Unit]) -> None:
        """:meth:`spill_to_disk`; when the disk refuses a write while clean copies hold disk
        space, they go (they are only a cache: the space they hold must never keep a value in
        memory) and the write is tried once more."""
        try:
            self.spill_to_disk(group)
        except OSError:
            if not self.accounting.clean_bytes:
                raise
            self.drop_all_clean()
            self.spill_to_disk(group)

    def drop_all_clean(self) -> None:
        """Drop every clean copy (their files are removed)."""
        accounting = self.accounting
        for rec in list(self.index.records.values()):
            if rec.clean_nbytes:
                accounting.drop_clean(rec)

    # --- moves -------------------------------------------------------------------
    def spill_to_host(self, group: list[Unit]) -> None:
        """Copy every device record of ``group`` to host, then commit them all.

        When every one has a clean copy, the group goes to disk on those files instead.
        """
        start = time.perf_counter()
        index, accounting = self.index, self.accounting
        moves = []
        clean = True
        for rec in index.group_records(group):
            proxy = rec()
            if proxy is None or rec.tier != ON_DEVICE:
                continue
            state = state_of(proxy)
            moves.append((rec, state))
            if clean and (state.clean is None or not self.clean_usable(rec, state)):
                clean = False
        if clean and moves:
            self._reuse_clean(moves)
            self.place_all(group)
            self.times["spill_time_s"] += time.perf_counter() - start
            return
        copies = [(rec, st, st.handler.to_host(st.held, self.device)) for rec, st in moves]
        for rec, state, payload in copies:  # commit only after every copy succeeded
            obj, state.held = state.held, payload
            index.drop_allocs(rec)
            del obj
            accounting.move(rec, ON_HOST, payload.nbytes)  # restore_nbytes stays the device size
            self.stats["spilled_bytes"] += rec.restore_nbytes
            self.stats["spill_count"] += 1
        copies.clear()
        self.place_all(group)
        self.times["spill_time_s"] += time.perf_counter() - start

    def spill_to_disk(self, group: list[Unit]) -> None:
        """Write every host member of ``group`` (a clean copy is reused, not written); on
        any failure nothing moves."""
        start = time.perf_counter()
        written: list[tuple[Any, ...]] = []
        reused: list[tuple[Record, ProxyState]] = []
        files: dict[Entry, Any] = {}  # owner -> its file: peers share one
        try:
            for u in group:
                if isinstance(u, Entry) and u.is_host_value:
                    owner = self.index.owner(u)
                    file = files.get(owner)
                    if file is None:
                        file = files[owner] = self._write_host_value(owner)
                    written.append((u, file))
            # Each record once: one object twice in a value, or under two keys, is one file.
            for rec in self.index.group_records(group):
                proxy = rec()
                if proxy is not None and rec.tier == ON_HOST:
                    state = state_of(proxy)
                    if state.clean is not None and self.clean_usable(rec, state):
                        reused.append((rec, state))
                    else:
                        written.append((rec, self.disk.write(state.held), state))
        except BaseException:
            for item in written:
                item[1].remove()
            raise
        self._reuse_clean(reused)
        accounting = self.accounting
        for item in written:
            target, file = item[0], item[1]
            if isinstance(target, Entry):  # counted as written or reused when its file was had
                if self.index.owner(target) is target:  # once for its peers
                    self.index.host_value_out(target)
                    accounting.move_value(ON_HOST, target.leaf_nbytes, DISK, file.nbytes)
                target.value, target.file = None, file
            else:
                item[2].held = file
                accounting.move(target, DISK, file.nbytes)
                self.stats["disk_written_bytes"] += file.nbytes
        self.place_all(group)
        self.times["disk_time_s"] += time.perf_counter() - start

    def clean_usable(self, rec: Record, state: ProxyState) -> bool:
        """Whether ``rec``'s clean copy is still the file it was read from; a file someone
        changed or removed is dropped (the value, intact in memory, gets written anew)."""
        if self.disk.unchanged(state.clean):
            return True
        self.accounting.drop_clean(rec)
        return False

    def _reuse_clean(self, moves: list[tuple[Record, ProxyState]]) -> None:
        """Commit each record (on device or host, with a usable clean copy) to disk on its
        clean copy: the device object or host frames go, nothing is written."""
        index, accounting, stats = self.index, self.accounting, self.stats
        for rec, state in moves:
            was_device = rec.tier == ON_DEVICE
            held, state.held = state.held, accounting.reuse_clean(rec, state)
            if was_device:
                index.drop_allocs(rec)
                stats["spilled_bytes"] += rec.restore_nbytes
                stats["spill_count"] += 1
            del held
            stats["disk_reused_bytes"] += rec.held_nbytes
            stats["disk_reuse_count"] += 1

    def bring_to_device(self, unit: Unit) -> Any:
        """Unspill ``unit``'s group, evicting others *before* copying back.

        Returns ``OVERSIZED`` (and changes nothing) when the group alone would
        exceed the limit; such values live on host and are used transiently.
        """
        index, recency, accounting = self.index, self.recency, self.accounting
        group = index.group(unit)
        load = [r for r in index.group_records(group) if r.tier != ON_DEVICE]
        if not load:
            return None
        need = sum(r.restore_nbytes for r in load)
        if need + index.group_device_bytes(group) > self.device_memory_limit:
            return OVERSIZED
        start = time.perf_counter()
        pinned = recency.pin(group)
        try:
            self.evict_device(accounting.device_bytes + need - self.device_memory_limit)
            proxies = [r() for r in load]
            states = [state_of(p) for p in proxies if p is not None]
            load = [r for r, p in zip(load, proxies, strict=True) if p is not None]
            payloads = [self.payload_of(r, st) for r, st in zip(load, states, strict=True)]
            objs = [
                st.handler.to_device(pl, self.device)
                for st, pl in zip(states, payloads, strict=True)
            ]
        finally:
            recency.unpin(pinned)
        for rec, state, obj in zip(load, states, objs, strict=True):
            if rec.tier != DISK:
                accounting.move(rec, ON_DEVICE)
            elif is_immutable(state.handler):  # its file stays exact: kept as a clean copy
                accounting.keep_clean(rec, state)
            else:
                state.held.remove()
                accounting.move(rec, ON_DEVICE)
            state.held = obj
            index.add_allocs(rec, state, self.device)
            self.stats["unspilled_bytes"] += rec.restore_nbytes
            self.stats["unspill_count"] += 1
        self.place_all(group)
        self.times["unspill_time_s"] += time.perf_counter() - start
        return None

    def load_host_value(self, entry: Entry) -> None:
        """Read a host value (no device objects) back from disk into host memory.

        Its file goes once the read is over: a host value is a Python object the caller may
        change in place (a list, a dict, a numpy array), and no use of it passes through the
        store, so a file kept for it could go stale unseen (no clean copy). Until then it is
        *kept* (:meth:`drop_kept`): a host limit too small for the value sends it straight
        back to disk within the same read, before the caller has it, and it goes back on
        the file it came from instead of being written again.
        """
        file = entry.file
        payload = self.disk.read(file, repr(entry.key))
        self.stats["disk_read_bytes"] += file.nbytes
        value = serialize.loads(payload)
        owner = self.index.owner(entry)
        self.accounting.move_value(DISK, file.nbytes, ON_HOST, owner.leaf_nbytes)
        self.kept[owner] = file  # uncounted: it is reused or removed before the read returns
        self.index.host_objects[id(value)] = owner
        for peer in entry.peers or (entry,):  # one object again under every key
            peer.value, peer.file = value, None
            self.place(peer)

    def drop_kept(self, entry: Entry) -> None:
        """The read of ``entry`` is over: the file it came from goes, unless it was reused."""
        file = self.kept.pop(self.index.owner(entry), None)
        if file is not None:
            file.remove()

    def _write_host_value(self, entry: Entry) -> Any:
        """``entry``'s file: the one it was just read from, when unchanged, or a new one."""
        file = self.kept.pop(entry, None)
        if file is not None:
            if self.disk.unchanged(file):
                self.stats["disk_reused_bytes"] += file.nbytes
                self.stats["disk_reuse_count"] += 1
                return file
            file.remove()
        file = self.disk.write(serialize.dumps(entry.value))
        self.stats["disk_written_bytes"] += file.nbytes
        return file

    def payload_of(self, rec: Record, state: ProxyState) -> Payload:
        """The host frames of a spilled record, read (and authenticated) from disk if needed."""
        held = state.held
        if rec.tier == ON_HOST:
            return held
        self.stats["disk_read_bytes"] += rec.held_nbytes
        return self.disk.read(held, self.index.key_name(rec))

    def write_back(self, rec: Record, state: ProxyState, obj: Any) -> None:
        """Persist an in-place change made to a transient copy of a spilled record."""
        if rec.clean_nbytes:  # the value changed: its kept file is stale
            self.accounting.drop_clean(rec)
        payload = state.handler.to_host(obj, self.device)
        if rec.tier == DISK:
            new_file: SpillFile = self.disk.write(payload)
            old, state.held = state.held, new_file
            old.remove()
            self.accounting.resize(rec, new_file.nbytes)
        else:
            state.held = payload
            self.accounting.resize(rec, payload.nbytes)
        self.cascade()
