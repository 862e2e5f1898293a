"""Rules that store values: set (under drawn keys, any hashable key, a present key), a
rejected set, one object or a view under two keys, update() and setdefault()."""

from __future__ import annotations

import gc
from collections.abc import Hashable
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from .. import strategies as S
from ..model import Held
from .base import KEYS, ROOT, SIDES, VALUES, Side, calm, opened


class SettingRules:
    """Clauses of section 1 (the mapping) and 3.2 (aliases) that store values."""

    def _put(self, s: Side, key: Hashable, spec: Any) -> Hashable:
        built = self._build(spec)
        before = s.h.snapshot() if self._minimal_applies(s) else None
        with self._window(s, f"store[{key!r}] = ..."):
            s.h.store[key] = built.value
        del built.value, built.leaves
        s.model.remember(key, self._held(built))
        self._minimal(s, before, f"store[{key!r}] = ...", set_key=key)
        return key

    @precondition(opened)
    @rule(target=KEYS, side=SIDES, key=S.str_keys(ROOT), spec=VALUES)
    def put(self, side, key, spec):
        """Clauses 1.1, 3.1, 4.1 and 9.2: a set under a key that may be a path, collide with
        another key's str/repr, or be long."""
        return self._put(self._step(side, "set"), self._key(key), spec)

    @precondition(lambda self: not self.world and (self.sides and self.any_keys))
    @rule(target=KEYS, side=SIDES, key=S.any_keys(ROOT), spec=VALUES)
    def put_any_key(self, side, key, spec):
        """Clauses 1.11, 1.12 and 1.13: any hashable dask uses; equal numbers are one key."""
        return self._put(self._step(side, "set"), self._key(key), spec)

    @precondition(opened)
    @rule(side=SIDES, key=KEYS, spec=VALUES)
    def put_again(self, side, key, spec):
        """Clause 1.3: setting a present key replaces its value (a new key in another store)."""
        self._put(self._step(side, "set"), key, spec)

    @precondition(calm)
    @rule(
        side=SIDES,
        key=S.str_keys(ROOT),
        op=st.sampled_from(["get", "del", "pop", "set"]),
        bad=st.sampled_from([[1, 2], {"a": 1}, {3}]),
        spec=VALUES,
    )
    def rejected(self, side, key, op, bad, spec):
        """Clauses 1.2, 1.14 and 1.15: a missing key raises KeyError on get, del and pop; an
        unhashable key is a TypeError on set; either way the store is unchanged."""
        s = self._side(side)
        if op != "set":
            key = self._key(key)
            if key not in s.model:
                self._missing(s, key, op)
            return
        built = self._build(spec)
        before = s.h.snapshot()
        try:
            s.h.store[bad] = built.value
        except TypeError:
            pass
        else:
            raise AssertionError(f"store[{bad!r}] = ... was accepted")
        del built.value, built.leaves
        gc.collect()
        self._unchanged(s, before, f"a rejected store[{bad!r}] = ...")

    @precondition(lambda self: not self.world and (self.sides and self.dedup))
    @rule(side=SIDES, k1=KEYS, k2=KEYS, spec=VALUES)
    def put_same_object_under_two_keys(self, side, k1, k2, spec):
        """Clause 3.2: one allocation under two keys is counted (and written) once."""
        s = self._step(side, "set")
        if k1 == k2:
            return
        built = self._build(spec)
        with self._window(s, "two keys, one object"):
            s.h.store[k1] = built.value
            s.h.store[k2] = built.value
        del built.value, built.leaves
        s.model.remember(k1, self._held(built))
        s.model.remember(k2, self._held(built))

    @precondition(
        lambda self: not self.world and (self.dedup and any(s.model.keys for s in self.sides))
    )
    @rule(side=SIDES, src=KEYS, dst=KEYS)
    def put_view_of_stored(self, side, src, dst):
        """Clauses 3.2 and 2.6: a view of a stored value shares its allocation."""
        s = self._stored(side, src, "set")
        if s is None or src == dst:
            return
        held = s.model.held(src)
        leaf = held.expected
        if not isinstance(leaf, S.DeviceLeaf) or leaf.host.ndim != 1 or len(leaf.host) < 2:
            return
        n = len(leaf.host)
        with self._window(s, f"store[{dst!r}] = store[{src!r}][:half]", extra=self._over(s, src)):
            value = s.h.store[src]
            view = value[: n // 2]
            s.h.store[dst] = view
        del value, view
        s.model.touch(src)
        half = S.DeviceLeaf(leaf.host[: n // 2].copy(), leaf.alloc, leaf.nbytes, "")
        s.model.remember(dst, Held(half, dict(held.allocs), False, False, 0))

    @precondition(calm)
    @rule(
        side=SIDES,
        items=st.lists(st.tuples(KEYS, VALUES), min_size=1, max_size=3),
        as_pairs=st.booleans(),
    )
    def update(self, side, items, as_pairs):
        """Clause 1.4: update() takes a mapping or pairs, with the effect of sets in order."""
        s = self._side(side)
        built = [(k, self._build(spec)) for k, spec in items]
        if as_pairs:
            arg: Any = [(k, b.value) for k, b in built]
            effect = built
        else:
            arg = {}
            last: dict[Hashable, S.Built] = {}
            for k, b in built:
                arg[k] = b.value
                last[k] = b
            effect = [(k, last[k]) for k in arg]  # a dict keeps the first key, the last value
        with self._window(s, "update(...)"):
            s.h.store.update(arg)
        del arg
        for _k, b in built:
            b.value = b.leaves = None
        for k, b in effect:
            s.model.remember(k, self._held(b))

    @precondition(calm)
    @rule(side=SIDES, key=KEYS, spec=VALUES)
    def setdefault(self, side, key, spec):
        """Clause 1.5: setdefault returns the present value untouched, or stores the default."""
        s = self._step(side, "setdefault")
        present = key in s.model
        built = self._build(spec)
        extra = self._over(s, key) if present else 0
        # A present key keeps its value: the default stays the test's, on the device.
        held = sum(built.allocs.values()) if present else 0
        with self._window(s, f"setdefault({key!r}, ...)", extra=extra, held=held):
            got = s.h.store.setdefault(key, built.value)
            if present:
                self._check_value(s, key, got)
        del got, built.value, built.leaves
        if present:
            s.model.touch(key)
        else:
            s.model.remember(key, self._held(built))
