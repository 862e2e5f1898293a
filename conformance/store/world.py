"""The environment as an adversary: what moves around a store while the machine runs.

Real stores break when the world moves: another library allocates on the device, the
device fills up in the middle of a spill, the disk fills up or loses files, another
thread reads while this one evicts, a value's serialization allocates, collects garbage
or raises half-way. :class:`WorldRules` gives :class:`conformance.store.machines.StoreMachine`
rules that make each of these happen, between operations and inside them, each with the
outcome the contract requires (the fault model: SPEC.md section 15).

Everything is injected through what the suite owns: the device (allocations outside
every store), the directory it gave the store (its files), the process's file-size
limit (a full disk), the values it builds (members that act when serialized), and its
own threads. Never through an implementation's internals, so that the same rules run
against every adapter. Ground truth is the device ledger, the files and the objects the
caller holds. Every fault counts when it fires, in the ``faults`` tally the test gives the
machine (``StoreMachine.configure(..., faults=...)``), so a run in which none fired is
reported as not exercised, never as a pass.

The rules live in :mod:`conformance.store.rules`, one module per part of the world:
``world_device`` (outside allocations, a full device), ``world_values`` (values whose
serialization misbehaves, :mod:`~conformance.store.rules.traps`), ``world_disk`` (damaged
spill files, a full disk) and ``world_threads``; their state in ``world_state``.
"""

from __future__ import annotations

from .rules.base import KEYS
from .rules.traps import ACTION_CONDITION, OP_OPERATION, Trap, TrapError
from .rules.world_device import DeviceRules
from .rules.world_disk import DiskRules
from .rules.world_state import WHEN_ALL, WorldState, moving
from .rules.world_threads import ThreadRules
from .rules.world_values import ValueRules

__all__ = [
    "ACTION_CONDITION", "KEYS", "OP_OPERATION", "WHEN_ALL", "Trap", "TrapError", "WorldRules",
    "moving",
]  # fmt: skip


class WorldRules(DeviceRules, ValueRules, DiskRules, ThreadRules, WorldState):
    """The environment's state, and the rules that move it (only when ``world`` is set)."""
