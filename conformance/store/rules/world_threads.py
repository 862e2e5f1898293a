"""Other threads moving around the stores: a reader racing evictions, and an external's
last reference dying on another thread."""

from __future__ import annotations

import gc
import threading

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from ... import conditions
from ...api import evict as adapter_evict
from .. import strategies as S
from .base import SIDES


class ThreadRules:
    """Threads racing the machine's own (conditions T1 and T2)."""

    @precondition(
        lambda self: (
            self.world
            and self.has("store.threadsafe")
            and self.has("store.evict.manual")
            and any(s.model.keys for s in self.sides)
        )
    )
    @rule(side=SIDES, pick=st.integers(0, 63))
    def reader_thread_during_evict(self, side, pick):
        """Clauses 12.1 and 12.3: another thread reads a key again and again while this one
        spills everything and reads the rest back; every read is exact, nothing hangs."""
        s = self._side(side)
        keys = list(s.model.keys)
        if not keys:
            return
        key = keys[pick % len(keys)]
        expected = s.model.held(key).expected
        errors: list[str] = []
        stop = threading.Event()

        def reader() -> None:
            for _ in range(200):
                if stop.is_set():
                    return
                try:
                    got = s.h.store[key]
                    why = S.mismatch(self.device, got, expected)
                    del got
                except Exception as exc:
                    why = repr(exc)
                if why:
                    errors.append(why)
                    return

        t = threading.Thread(target=reader, name="conformance-world-reader", daemon=True)
        self.faults["reader thread"] += 1
        conditions.fire_all(["spill everything", "get"], "T1", ["during"])
        conditions.fire("get", "T1", "after")
        t.start()
        try:
            for _ in range(3):
                adapter_evict(self.adapter, s.h.store, 16 * self.limit)
                for k in keys:
                    got = s.h.store[k]
                    del got
        finally:
            stop.set()
            t.join(30)
        assert not t.is_alive(), f"a thread reading store[{key!r}] hung (deadlock?)"
        assert not errors, f"a thread reading store[{key!r}] during evictions got: {errors[0]}"
        self._read_back_everything(s, "a reader thread")

    @precondition(
        lambda self: (
            self.world
            and self.has("store.threadsafe")
            and self.has("store.external")
            and any(len(s.model.keys) >= 2 for s in self.sides)
        )
    )
    @rule(
        side=SIDES,
        spec=S.value_specs("sim", st.sampled_from([64, 4096, 30_000])),
        spill=st.booleans(),
    )
    def external_dies_on_thread(self, side, spec, spill):
        """Clauses 7.3, 7.5 and 12.4: an external's last reference dies on another thread
        (perhaps while spilled); its bytes go from every tier, and nothing deadlocks."""
        s = self._side(side)
        built = self._build(spec)
        box = [self.adapter.register_external(s.h.store, built.value)]
        del built
        if spill and self.has("store.evict.manual"):
            adapter_evict(self.adapter, s.h.store, 16 * self.limit)

        def die() -> None:
            box.clear()
            gc.collect()

        t = threading.Thread(target=die, name="conformance-world-finalizer", daemon=True)
        self.faults["external dies on a thread"] += 1
        conditions.fire("register_external", "T2", "after")
        conditions.fire("inspect", "T2", "after")
        if spill and self.has("store.evict.manual"):
            conditions.fire("spill everything", "T2", "after")
        t.start()
        t.join(30)
        assert not t.is_alive(), "an external dying on another thread hung (deadlock?)"
        gc.collect()
        self._settle(s)
