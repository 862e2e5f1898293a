"""Recency and pins: the eviction policy, separate from how tiers move.

Device-resident units sit in one ordered dict, least recently used first, so
every access is an O(1) move to the end (true LRU, not an approximation).
Host-resident units sit in a set plus a min-heap keyed by their access
``tick``: a host -> disk cascade pops only the victims it moves, O(log n)
each, instead of sorting every host unit. Heap entries are invalidated lazily
(a unit's live entry is the one whose sequence number it holds) and the heap
is rebuilt once dead entries outnumber live ones, so it stays O(host units).

Every touched unit gets its own tick, larger units first within one touch, so
ticks alone order units exactly as (tick, -size) did when one touch shared a tick.

A *pinned* unit is one the current operation is using; eviction skips it,
and skips a whole group if any member is pinned, so groups never split.
"""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator

from .groups import Unit


class Recency:
    """LRU order of device units, the host-resident set, and the pins."""

    def __init__(self) -> None:
        self.device: OrderedDict[Unit, None] = OrderedDict()
        self.host: dict[Unit, None] = {}
        self.pinned: set[Unit] = set()
        self.ticks = itertools.count(1)
        self._heap: list[tuple[int, int, Unit]] = []  # (tick, seq, unit), lazily pruned
        self._seq = itertools.count(1)

    def clear(self) -> None:
        self.device.clear()
        self.host.clear()
        self._heap.clear()

    def _push(self, unit: Unit) -> None:
        """Queue ``unit`` (in the host set) at its current tick; older entries die."""
        heap = self._heap
        if len(heap) > 2 * len(self.host) + 64:
            self._rebuild()  # O(live) after more than that many pushes: O(1) amortised
        seq = unit.hseq = next(self._seq)
        heapq.heappush(heap, (unit.tick, seq, unit))

    def _rebuild(self) -> None:
        heap = self._heap
        heap.clear()  # in place: an open host_victims iterator holds this list
        seqs = self._seq
        for unit in self.host:
            seq = unit.hseq = next(seqs)
            heap.append((unit.tick, seq, unit))
        heapq.heapify(heap)

    def place(self, unit: Unit, tier: str) -> None:
        """File ``unit`` under ``tier``; a unit already on device keeps its place."""
        if tier == "device":
            self.host.pop(unit, None)
            if unit not in self.device:
                self.device[unit] = None
        elif tier == "host":
            self.device.pop(unit, None)
            if unit not in self.host:
                self.host[unit] = None
                self._push(unit)
        else:
            self.remove(unit)

    def remove(self, unit: Unit) -> None:
        self.device.pop(unit, None)
        self.host.pop(unit, None)

    def make_oldest(self, unit: Unit) -> None:
        if unit in self.device:
            self.device.move_to_end(unit, last=False)

    def touch(self, units: list[Unit], size: Callable[[Unit], int]) -> None:
        """Mark ``units`` most recently used; within one touch the larger is older."""
        if len(units) > 1:
            units = sorted(units, key=size, reverse=True)
        device, host, ticks = self.device, self.host, self.ticks
        for unit in units:
            unit.tick = next(ticks)
            if unit in device:
                device.move_to_end(unit)
            elif unit in host:
                self._push(unit)

    def touch_one(self, unit: Unit) -> None:
        """:meth:`touch` for a single unit, without building a list."""
        unit.tick = next(self.ticks)
        if unit in self.device:
            self.device.move_to_end(unit)
        elif unit in self.host:
            self._push(unit)

    def pin(self, units: Iterable[Unit]) -> list[Unit]:
        """Pin ``units``; returns those newly pinned, for :meth:`unpin`."""
        new = [u for u in units if u not in self.pinned]
        self.pinned.update(new)
        return new

    def unpin(self, units: list[Unit]) -> None:
        self.pinned.difference_update(units)

    def device_victim(self, blocked: set[Unit]) -> Unit | None:
        """The least recently used device unit that is neither pinned nor blocked."""
        pinned = self.pinned
        return next((u for u in self.device if u not in pinned and u not in blocked), None)

    def host_victims(self, size: Callable[[Unit], int] | None = None) -> Iterator[Unit]:
        """Unpinned host units, least recently used first, popped lazily from the heap.

        A unit still on host when the consumer moves on (or closes the iterator) is
        queued again, so only the units that really leave cost heap operations. The
        consumer must not touch units while iterating (a cascade does not). ``size`` is
        unused: the per-unit ticks already put the larger of a touch first.
        """
        heap, host, pinned = self._heap, self.host, self.pinned
        kept: list[tuple[int, int, Unit]] = []
        try:
            while heap:
                item = heapq.heappop(heap)
                unit = item[2]
                if unit.hseq != item[1] or unit not in host:
                    continue  # dead: the unit left host or was touched since
                kept.append(item)
                if unit in pinned:
                    continue
                yield unit
                if unit not in host:
                    kept.pop()
        finally:
            for item in kept:
                heapq.heappush(heap, item)
