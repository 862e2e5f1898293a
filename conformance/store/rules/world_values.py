"""Values misbehaving while the store handles them: a trapped member (see
:mod:`.traps`) raises, allocates, fills the device, collects garbage or lies about its
size during a spill, a read or a set; a deserialization raises half-way."""

from __future__ import annotations

import gc
from collections.abc import Hashable
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from ... import conditions
from ...api import evict as adapter_evict
from .. import strategies as S
from .base import KEYS, ROOT, SIDES, Side
from .traps import ACTION_CONDITION, Trap, TrapError, arm, caused_by, disarm
from .world_state import moving


class ValueRules:
    """Values whose serialization acts (conditions D2, D3, T3, V1 and V2)."""

    @precondition(moving)
    @rule(
        target=KEYS,
        side=SIDES,
        key=S.str_keys(ROOT),
        spec=st.one_of(st.none(), S.host_specs()),
    )
    def put_trapped(self, side, key, spec):
        """A value with a member that acts when armed (see :class:`Trap`): beside a device
        array (spec None) or in a host-only value, which a store serializes when it goes
        to disk."""
        s = self._side(side)
        key = self._key(key)
        inner = spec if spec is not None else S.ArraySpec("=i8", 4096, 1, "none", self._tags)
        built = self._build(inner)
        self._tags += 1
        value = S.Box(built.value, Trap(self._tags))
        with self._window(s, f"store[{key!r}] = <trapped value>"):
            s.h.store[key] = value
        del value, built.value, built.leaves
        built.expected = S.Box(built.expected, Trap(self._tags))
        s.model.remember(key, self._held(built))
        self._trapped += 1
        return key

    @precondition(lambda self: self.world and self._trapped and self.sides)
    @rule(
        side=SIDES,
        action=st.sampled_from(["raise", "alloc", "hold", "gc", "lie"]),
        op=st.sampled_from(["evict", "read", "put"]),
        spec=st.one_of(S.host_specs(), S.value_specs("sim", st.sampled_from([64, 4096, 30_000]))),
    )
    def values_misbehave(self, side, action, op, spec):
        """Clauses 9.6, 13.3, 6.5 and 8.3: while traps are armed, a spill of everything, a
        read of everything or a new set goes through values whose serialization raises,
        allocates on the device (forcing the OOM handler), fills the device, collects
        garbage, or whose size lies. The operation may fail only with the trap's error or
        the device's out-of-memory error; afterwards nothing is lost or corrupted."""
        s = self._side(side)
        n = self._free() + self.limit // 2 if action == "alloc" else self._free() - self.limit // 4
        arm(action, self, n, op)
        fired_before = sum(self.faults.values())
        try:
            errors = self._armed_op(s, op, spec)
        finally:
            disarm()
        if sum(self.faults.values()) > fired_before:  # the read back below is after the fault
            conditions.fire("get", ACTION_CONDITION[action], "after")
        for where, exc in errors:
            allowed = TrapError if action == "raise" else MemoryError
            assert caused_by(exc, allowed), (
                f"{where}: with {action!r} armed the store raised {exc!r}; only the trap's "
                f"own error or the device's out-of-memory error may come out"
            )
        self.world_release()
        gc.collect()
        self._reread_device_bytes()  # what the environment held is gone
        self._read_back_everything(s, f"{op} with {action!r} armed")

    def _armed_op(self, s: Side, op: str, spec: Any) -> list[tuple[Hashable, BaseException]]:
        """``op`` of values_misbehave, with the traps armed: the errors it raised, by key."""
        errors: list[tuple[Hashable, BaseException]] = []
        if op == "evict" and self.has("store.evict.manual"):
            try:
                adapter_evict(self.adapter, s.h.store, 16 * self.limit)
            except Exception as exc:
                errors.append(("evict", exc))
        elif op == "put":  # a trapped value, serialized (or measured) as it is stored
            self._tags += 1
            key = f"trap-put-{self._tags}"
            built = self._build(spec)
            value = S.Box(built.value, Trap(self._tags))
            built.expected = S.Box(built.expected, Trap(self._tags))
            try:
                s.h.store[key] = value
            except Exception as exc:
                errors.append((key, exc))
                if key in s.h.store:  # kept: it must read back (in values_misbehave)
                    s.model.remember(key, self._held(built))
            else:
                s.model.remember(key, self._held(built))
            del value, built
        else:
            for key in list(s.model.keys):
                try:
                    got = s.h.store[key]
                except Exception as exc:
                    errors.append((key, exc))
                    continue
                why = S.mismatch(self.device, got, s.model.held(key).expected)
                del got
                assert why is None, f"store[{key!r}] came back wrong with traps armed: {why}"
        return errors

    @precondition(moving)
    @rule(side=SIDES, spec=S.host_specs(), where=st.sampled_from(["get", "pop"]))
    def deserialization_raises(self, side, spec, where):
        """Clause 13.5: a host value with a member whose deserialization raises half-way is
        read back (from disk, where the host limit of 0 put it): the read raises that error
        or returns the value; the value stays stored and reads back once the member behaves."""
        s = self._side(side)
        self._tags += 1
        key = f"raises-{self._tags}"
        built = self._build(spec)
        with self._window(s, f"store[{key!r}] = <trapped host value>"):
            s.h.store[key] = S.Box(built.value, Trap(self._tags))
        built.value = None
        built.expected = S.Box(built.expected, Trap(self._tags))
        s.model.remember(key, self._held(built))
        arm("raise", self, 0, where)
        fired_before = sum(self.faults.values())
        try:
            got = s.h.store.pop(key) if where == "pop" else s.h.store[key]
        except Exception as exc:
            assert caused_by(exc, TrapError), f"{where}({key!r}) raised {exc!r}"
            got = None
        finally:
            disarm()
        if sum(self.faults.values()) > fired_before:
            conditions.fire("get", "V1", "after")
        if got is not None:
            self._check_value(s, key, got)
            if where == "pop":
                s.model.forget(key)
        del got
        self._read_back_everything(s, f"a deserialization that raised ({where})")
