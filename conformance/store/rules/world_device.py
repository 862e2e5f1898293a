"""The device moving under the stores: another library allocates and keeps memory, then
frees it; the device is full while a spilled value is read."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from ... import conditions
from ...api import evict as adapter_evict
from .base import SIDES
from .world_state import WHEN_ALL, moving


class DeviceRules:
    """Allocations outside every store (conditions D1 and D4)."""

    @precondition(moving)
    @rule(frac=st.sampled_from([0.25, 0.5, 0.9, 1.0]))
    def outside_takes(self, frac):
        """Clauses 3.1, 4.1, 4.2 and 8.1: another library allocates and keeps device memory;
        with spill on demand the stores make room, and every clause holds with it counted as
        the caller's."""
        room = self.device.capacity - self.baseline - self._world_held - 3 * self.limit
        if not self.has("store.oom.on_demand"):
            room = min(room, self._free() - 3 * self.limit)
        self.faults["outside allocation held"] += 1
        conditions.fire("spill on demand", "D1", "during")
        conditions.fire("inspect", "D1", "after")
        self.env_alloc(frac * max(0, room), keep=True)
        self._reread_device_bytes()

    @precondition(lambda self: self.world and self._outside)
    @rule()
    def outside_releases(self):
        """The other library frees what it held."""
        self.world_release()

    @precondition(
        lambda self: (
            self.world
            and self.has("store.unspill.on_access")
            and any(s.model.keys for s in self.sides)
        )
    )
    @rule(side=SIDES, pick=st.integers(0, 63), spill=st.booleans())
    def device_full_read(self, side, pick, spill):
        """Clause 6.5: the environment holds all of the device but a few bytes while a spilled
        value is read. The read returns it exactly or raises the device's out-of-memory
        error; either way it stays stored and reads back once the memory is free."""
        s = self._side(side)
        if spill and self.has("store.evict.manual"):
            adapter_evict(self.adapter, s.h.store, 16 * self.limit)
        tiers = s.h.snapshot().tiers
        keys = [k for k in s.model.keys if tiers.get(k) != "device"]
        if not keys:
            return
        key = keys[pick % len(keys)]
        self.env_alloc(self._free() - 64, keep=True)
        self.faults["device full during a read"] += 1
        conditions.fire_all(["get"], "D4", WHEN_ALL)
        if spill and self.has("store.evict.manual"):
            conditions.fire("evict", "D4", "after")
        try:
            got = s.h.store[key]
        except MemoryError:
            got = None
        else:
            self._check_value(s, key, got)
        del got
        assert key in s.h.store, f"a read of {key!r} on a full device lost the key"
        self.world_release()
        self._reread_device_bytes()
        self._read_back_everything(s, f"a read of {key!r} on a full device")
