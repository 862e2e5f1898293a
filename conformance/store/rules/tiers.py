"""Rules that move values between tiers: evict(n), a spill of everything read back, and an
allocation from outside that makes the stores spill on demand."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from ...api import evict as adapter_evict
from .base import SIDES


class TierRules:
    """Clauses of sections 4 (limits), 5.4 (LRU order), 8 (spill on demand) and 9.1."""

    @precondition(lambda self: self.has("store.evict.manual") and self.sides)
    @rule(side=SIDES, frac=st.sampled_from([0.0, 0.01, 0.3, 0.5, 1.0, 2.0]))
    def evict(self, side, frac):
        """Clauses 4.7 and 5.4: evict(n) frees at least n (LRU first) or everything."""
        s = self._step(side, "evict")
        n = int(frac * self.limit)
        before = s.h.snapshot()
        with self._window(s, f"evict({n})"):
            freed = adapter_evict(self.adapter, s.h.store, n)
        after = s.h.snapshot()
        assert before.device_bytes - after.device_bytes == freed, (
            f"evict({n}) said it freed {freed:,}; device bytes {before.device_bytes:,} -> "
            f"{after.device_bytes:,}"
        )
        if n == 0:
            assert freed == 0 and dict(after.tiers) == dict(before.tiers), "evict(0) moved data"
        elif freed < n:
            assert after.device_bytes == 0, (
                f"evict({n}) freed only {freed:,} while {after.device_bytes:,} bytes stay"
            )
        if n and self._minimal_applies(s):
            self._minimal(s, before, f"evict({n})", evicted=n)

    @precondition(
        lambda self: self.has("store.evict.manual") and any(s.model.keys for s in self.sides)
    )
    @rule(side=SIDES)
    def spill_everything_and_read_back(self, side):
        """Clauses 2.1 and 9.1: every value comes back exactly through host and disk."""
        s = self._step(side, "spill everything")
        adapter_evict(self.adapter, s.h.store, 16 * self.limit)
        self.check_all()
        for key in list(s.model.keys):
            with self._window(s, f"store[{key!r}] after a full spill", extra=self._over(s, key)):
                got = s.h.store[key]
                self._check_value(s, key, got)
            del got
            s.model.touch(key)

    @precondition(lambda self: self.has("store.oom.on_demand") and self.sides)
    @rule(side=SIDES, frac=st.floats(0.3, 0.95))
    def pressure_from_outside(self, side, frac):
        """Clause 8.1: an outside allocation makes the stores spill on demand."""
        s = self._side(side)
        dev = self.device
        free = dev.capacity - self.baseline - self._others_device(s) - self.world_held()
        n = max(0, int(frac * free) // 8 * 8)
        with self._window(s, f"an outside allocation of {n:,}", extra=n):
            outside = dev.empty(n, "uint8")  # must succeed: the stores spill on demand
            snaps = [x.h.snapshot() for x in self.sides]
            measured = dev.bytes_in_use() - self.baseline - n - self.world_held()
            accounted = sum(sn.device_bytes for sn in snaps)
            assert measured == accounted, (
                f"after spilling on demand the ledger holds {measured:,} bytes for the "
                f"stores, which account {accounted:,}"
            )
        del outside
