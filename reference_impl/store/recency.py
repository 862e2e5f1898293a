"""Recency and pins: the eviction policy, separate from how tiers move.

Device-resident units sit in an append-only log, least recently used first:
a use appends ``(seq, unit)`` and gives the unit that ``seq``, so the unit's
older entries are dead without being found and unlinked. A use therefore
touches the unit and the log's tail, nothing else, which is what keeps it flat
in a large store: an ordered dict's move-to-end also reads a hash table slot,
a node and both its neighbours, each on its own page. Dead entries are dropped
from the head as eviction reaches them, and the log is compacted once dead
entries outnumber live ones, so it stays O(device units) and every operation
O(1) amortised. True LRU, not an approximation.

Host-resident units sit in a min-heap keyed by their access ``tick``: a host
-> disk cascade pops only the victims it moves, O(log n) each, instead of
sorting every host unit. Its entries die the same way (a unit's live entry is
the one whose ``seq`` it holds) and it is rebuilt once dead entries outnumber
live ones.

Where a unit is (``unit.lru``: :data:`DEVICE`, :data:`HOST` or :data:`NONE`)
is an attribute of the unit, so asking costs no lookup. Every touched unit gets
its own tick, larger units first within one touch, so ticks alone order units
exactly as (tick, -size) did when one touch shared a tick.

A *pinned* unit is one the current operation is using; eviction skips it,
and skips a whole group if any member is pinned, so groups never split.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable, Iterable, Iterator

from .records import Unit

NONE, DEVICE, HOST = 0, 1, 2
"""Values of ``unit.lru``: in no list, in the device log, in the host heap."""

_SLACK = 64  # dead entries tolerated beyond the live count before a compaction


class Recency:
    """LRU order of device units, the host-resident units, and the pins."""

    def __init__(self) -> None:
        self.pinned: set[Unit] = set()
        self.ticks = itertools.count(1)  # ticks and seqs: one increasing counter
        self.n_device = 0
        self.n_host = 0
        self._log: deque[tuple[int, Unit]] = deque()  # (seq, unit), oldest first
        self._heap: list[tuple[int, int, Unit]] = []  # (tick, seq, unit)
        self._older = itertools.count(-1, -1)  # seqs of units made oldest

    def clear(self) -> None:
        for item in self._log:
            item[1].lru = item[1].seq = 0
        for item in self._heap:
            item[2].lru = item[2].seq = 0
        self._log.clear()
        self._heap.clear()
        self.n_device = self.n_host = 0

    # --- membership ----------------------------------------------------------------
    def place(self, unit: Unit, tier: str) -> None:
        """File ``unit`` under ``tier``; a unit already on device keeps its place."""
        lru = unit.lru
        if tier == "device":
            if lru != DEVICE:
                self._leave(unit)
                unit.lru = DEVICE
                self.n_device += 1
                self._append(unit, next(self.ticks))
        elif tier == "host":
            if lru != HOST:
                self._leave(unit)
                unit.lru = HOST
                self.n_host += 1
                self._push(unit)
        else:
            self.remove(unit)

    def remove(self, unit: Unit) -> None:
        self._leave(unit)
        unit.lru = NONE
        unit.seq = 0  # its log or heap entry is dead now

    def _leave(self, unit: Unit) -> None:
        lru = unit.lru
        if lru == DEVICE:
            self.n_device -= 1
        elif lru == HOST:
            self.n_host -= 1

    def place_newest(self, unit: Unit) -> None:
        """:meth:`place` on device then :meth:`touch_one`: a stored value's hot path."""
        if unit.lru != DEVICE:
            self._leave(unit)
            unit.lru = DEVICE
            self.n_device += 1
        tick = unit.tick = next(self.ticks)
        self._append(unit, tick)

    def make_oldest(self, unit: Unit) -> None:
        if unit.lru == DEVICE:
            seq = unit.seq = next(self._older)
            self._log.appendleft((seq, unit))

    # --- the device log ------------------------------------------------------------
    def _append(self, unit: Unit, seq: int) -> None:
        """Queue ``unit`` (on device) as the most recently used; older entries die."""
        unit.seq = seq
        log = self._log
        log.append((seq, unit))
        if len(log) > 2 * self.n_device + _SLACK:
            self._compact()

    def _compact(self) -> None:
        log = self._log
        live = [item for item in log if item[1].seq == item[0]]
        log.clear()
        log.extend(live)

    def device_units(self) -> list[Unit]:
        """Device units, least recently used first."""
        return [unit for seq, unit in self._log if unit.seq == seq]

    # --- the host heap --------------------------------------------------------------
    def _push(self, unit: Unit) -> None:
        """Queue ``unit`` (on host) at its current tick; older entries die."""
        heap = self._heap
        if len(heap) > 2 * self.n_host + _SLACK:
            self._rebuild()  # O(live) after more than that many pushes: O(1) amortised
        seq = unit.seq = next(self.ticks)
        heapq.heappush(heap, (unit.tick, seq, unit))

    def _rebuild(self) -> None:
        heap = self._heap
        # In place: an open host_victims iterator holds this list.
        heap[:] = [item for item in heap if item[2].seq == item[1]]
        heapq.heapify(heap)

    # --- uses -----------------------------------------------------------------------
    def touch(self, units: list[Unit], size: Callable[[Unit], int]) -> None:
        """Mark ``units`` most recently used; within one touch the larger is older."""
        if len(units) > 1:
            units = sorted(units, key=size, reverse=True)
        ticks, log = self.ticks, self._log
        for unit in units:
            tick = unit.tick = next(ticks)
            lru = unit.lru
            if lru == DEVICE:
                unit.seq = tick
                log.append((tick, unit))
            elif lru == HOST:
                self._push(unit)
        if len(log) > 2 * self.n_device + _SLACK:
            self._compact()

    def touch_one(self, unit: Unit) -> None:
        """:meth:`touch` for a single unit, without building a list."""
        tick = unit.tick = next(self.ticks)
        if unit.lru == DEVICE:  # self._append(unit, tick), inlined: every get comes here
            unit.seq = tick
            log = self._log
            log.append((tick, unit))
            if len(log) > 2 * self.n_device + _SLACK:
                self._compact()
        elif unit.lru == HOST:
            self._push(unit)

    # --- pins and victims -------------------------------------------------------------
    def pin(self, units: Iterable[Unit]) -> list[Unit]:
        """Pin ``units``; returns those newly pinned, for :meth:`unpin`."""
        new = [u for u in units if u not in self.pinned]
        self.pinned.update(new)
        return new

    def unpin(self, units: list[Unit]) -> None:
        self.pinned.difference_update(units)

    def device_victim(self, blocked: set[Unit]) -> Unit | None:
        """The least recently used device unit that is neither pinned nor blocked."""
        log, pinned = self._log, self.pinned
        while log and log[0][1].seq != log[0][0]:
            log.popleft()  # dead: the unit was used again, left the device or the store
        for seq, unit in log:
            if unit.seq == seq and unit not in pinned and unit not in blocked:
                return unit
        return None

    def host_victims(self, size: Callable[[Unit], int] | None = None) -> Iterator[Unit]:
        """Unpinned host units, least recently used first, popped lazily from the heap.

        A unit still on host when the consumer moves on (or closes the iterator) is
        queued again, so only the units that really leave cost heap operations. The
        consumer must not touch units while iterating (a cascade does not). ``size`` is
        unused: the per-unit ticks already put the larger of a touch first.
        """
        heap, pinned = self._heap, self.pinned
        kept: list[tuple[int, int, Unit]] = []
        try:
            while heap:
                item = heapq.heappop(heap)
                unit = item[2]
                if unit.seq != item[1]:
                    continue  # dead: the unit left host or was touched since
                kept.append(item)
                if unit in pinned:
                    continue
                yield unit
                if unit.lru != HOST:
                    kept.pop()
        finally:
            for item in kept:
                heapq.heappush(heap, item)
