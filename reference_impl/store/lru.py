"""Recency and pins: the eviction policy, separate from how tiers move.

Device-resident units sit in one ordered dict, least recently used first, so
every access is an O(1) move to the end (true LRU, not an approximation).
Host-resident units are kept as a set and ordered by their access ``tick``
only when the host limit is exceeded, which is rare next to accesses.

A *pinned* unit is one the current operation is using; eviction skips it,
and skips a whole group if any member is pinned, so groups never split.
"""

from __future__ import annotations

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

    def clear(self) -> None:
        self.device.clear()
        self.host.clear()

    def place(self, unit: Unit, tier: str) -> None:
        """File ``unit`` under ``tier``; a unit already on device keeps its place."""
        if tier == "device":
            self.host.pop(unit, None)
            if unit not in self.device:
                self.device[unit] = None
        elif tier == "host":
            self.device.pop(unit, None)
            self.host[unit] = None
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
        tick = next(self.ticks)
        if len(units) > 1:
            units = sorted(units, key=size, reverse=True)
        device = self.device
        for unit in units:
            unit.tick = tick
            if unit in device:
                device.move_to_end(unit)

    def touch_one(self, unit: Unit) -> None:
        """:meth:`touch` for a single unit, without building a list."""
        unit.tick = next(self.ticks)
        if unit in self.device:
            self.device.move_to_end(unit)

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

    def host_victims(self, size: Callable[[Unit], int]) -> Iterator[Unit]:
        """Unpinned host units, least recently used (then largest) first."""
        return iter(
            sorted(
                (u for u in self.host if u not in self.pinned),
                key=lambda u: (u.tick, -size(u)),
            )
        )
