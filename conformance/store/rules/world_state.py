"""The environment's state: what it holds on the device outside every store, whether the
disk has failed, and the conditions of SPEC.md section 15 each step runs under."""

from __future__ import annotations

import gc
from typing import Any

from ... import conditions
from .. import strategies as S
from .traps import disarm

WHEN_ALL = ("before", "during", "after")


def moving(machine: Any) -> bool:
    """Precondition: the stores are open and the world is on (``world=True``)."""
    return bool(machine.world and machine.sides)


class WorldState:
    """What the environment holds and has broken; the world's rules act through it."""

    def init_world(self) -> None:
        self._outside: list[Any] = []  # device arrays the environment holds
        self._world_held = 0
        self._world_peak = 0
        self._tags = 0
        self._disk_failed = False
        self._trapped = 0  # trapped values stored so far

    def world_held(self) -> int:
        """Device bytes the environment holds now, outside every store."""
        return self._world_held

    def world_peak_held(self) -> int:
        """The most the environment held since the last reset (allocations inside an op)."""
        return self._world_peak

    def world_reset_peak(self) -> None:
        self._world_peak = self._world_held

    def env_alloc(self, n: int, keep: bool) -> None:
        """Another allocation on the device, outside every store (kept, or freed at once)."""
        n = max(0, int(n)) // 8 * 8
        try:
            block = self.device.empty(n, "uint8")
        except MemoryError:
            self.faults["outside allocation refused (device full)"] += 1
            return
        self._world_peak = max(self._world_peak, self._world_held + n)
        if keep:
            self._outside.append(block)
            self._world_held += n
        del block

    def world_step(self, operation: str) -> None:
        """The machine is about to run ``operation``: count the standing conditions it runs
        under (D1: an outside allocation held across it) and the garbage collection the
        machine runs after every step (T3, after)."""
        if not self.world:
            return
        if self._outside:  # and the inspect check_all runs after the step
            conditions.fire_all([operation, "inspect"], "D1", ("before", "during"))
        conditions.fire(operation, "T3", "after")

    def world_release(self) -> None:
        self._outside.clear()
        self._world_held = 0
        gc.collect()

    def world_before_close(self, side) -> None:
        pass

    def world_teardown(self) -> None:
        disarm()
        self.world_release()

    def _free(self) -> int:
        return self.device.capacity - self.device.bytes_in_use()

    def _settle(self, side) -> None:
        """After a fault, recency is unsettled (reads raced, spills failed): leave it to the
        next direct uses."""
        side.model.use_shared(list(side.model.keys))

    def _disk_fails(self) -> None:
        self._disk_failed = True
        for s in self.sides:
            s.h.caps = s.h.caps - {"store.limit.host"}

    def _reread_device_bytes(self) -> None:
        """What each store holds on the device, read again (after the environment moved)."""
        for s in self.sides:
            s.device_bytes = s.h.snapshot().device_bytes

    def _read_back_everything(self, side, what: str) -> None:
        """Nothing lost: every key of ``side`` reads back exactly (clauses 2.1, 9.6)."""
        for key in list(side.model.keys):
            try:
                got = side.h.store[key]
            except Exception as exc:
                raise AssertionError(f"after {what}, store[{key!r}] raised {exc!r}") from exc
            why = S.mismatch(self.device, got, side.model.held(key).expected)
            del got
            assert why is None, f"after {what}, store[{key!r}] came back wrong: {why}"
        self._settle(side)
