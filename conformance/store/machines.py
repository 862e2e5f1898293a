"""The generative store machine: random programs over every mapping method, checked
against the pure model (:mod:`conformance.store.model`) after every step, with the
device's own peak during every operation.

A module-level :class:`StoreMachine` in the style of hypothesis's ``DatabaseComparison``:
a bundle of keys, short rules that each cite their clause, and every rule argument an
explicit strategy, so a failure prints a program that replays as it reads::

    state = StoreMachine.configure(adapter, caps, "sim", tmp_path)()
    state.start(host_limit=None, n_stores=1)
    keys_0 = state.add_key(key='a')
    state.put(side=0, key=keys_0, spec=ArraySpec(dtype='>i8', ...))
    state.teardown()

What the machine runs against (adapter, capabilities, device kind, root, key kinds)
is set on a subclass by :meth:`StoreMachine.configure`. Capabilities gate rules through
preconditions and change what the model expects; preconditions read only the model and
the machine's own records, never the store. The environment rules (the device, the
disk, other threads and the values themselves moving under the store) are in
:mod:`conformance.store.world` and run when ``world`` is set.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import pickle
import sys
import tempfile
from collections import Counter
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from ..api import evict as adapter_evict
from . import strategies as S
from .harness import LIMIT, StoreHarness, files_under, make_device
from .model import Held, StoreModel
from .world import KEYS, WorldRules

ROOT = "<root>"  # stands for the test's directory in drawn keys (an absolute-looking key)

_SIZES = st.one_of(
    st.sampled_from([0, 1, 8, 24, LIMIT // 3, LIMIT // 2, LIMIT, LIMIT + LIMIT // 4]),
    st.integers(1, 1024),
    st.integers(LIMIT // 8, LIMIT // 3),
)
# Drawn with every byte order; on a device without non-native orders they become native.
VALUES = S.value_specs("sim", _SIZES)
SIDES = st.integers(0, 1)  # which store, modulo how many there are
HOST_LIMITS = st.sampled_from([0, None, LIMIT // 2, 0, LIMIT, 4 * LIMIT])


def opened(machine: StoreMachine) -> bool:
    """Precondition: ``start`` has opened the stores."""
    return bool(machine.sides)


def calm(machine: StoreMachine) -> bool:
    """Precondition: the stores are open and the world stands still, for rules whose exact
    checks (unchanged snapshots, raised errors) an outside move would blur."""
    return not machine.world and bool(machine.sides)


@dataclass
class Side:
    """One store under test with its model; the machine may run two on one device."""

    h: StoreHarness
    model: StoreModel
    proxies: list[Any] = field(default_factory=list)  # externals, beside model.externals
    device_bytes: int = 0  # validated against the ledger by the last invariant check


class StoreMachine(WorldRules, RuleBasedStateMachine):
    """A store and its model, on a device and a directory the suite owns."""

    adapter: Any = None
    caps: frozenset[str] = frozenset()
    device_kind = "sim"
    root = ""
    limit = LIMIT
    any_keys = False
    world = False  # the environment moves too (conformance.store.world)
    faults: Counter[str] = Counter()  # fault -> times it fired (configure gives each run its own)

    keys = KEYS

    @classmethod
    def configure(
        cls,
        adapter: Any,
        caps,
        device_kind: str,
        root,
        *,
        limit: int = LIMIT,
        any_keys: bool = False,
        world: bool = False,
        faults: Counter[str] | None = None,
    ) -> type[StoreMachine]:
        """A subclass running against ``adapter``; ``any_keys`` draws non-str keys too;
        ``faults`` tallies the environment's faults as they fire (a fresh one by default)."""
        name = f"StoreMachine_{adapter.name.replace('-', '_').replace(':', '_')}"
        attrs = dict(
            adapter=adapter,
            caps=frozenset(caps),
            device_kind=device_kind,
            root=str(root),
            limit=limit,
            any_keys=any_keys,
            world=world,
            faults=Counter() if faults is None else faults,
        )
        return type(name, (cls,), attrs)

    def __init__(self) -> None:
        super().__init__()
        self.sides: list[Side] = []
        self.here = self.root  # this example's directory, under root (set by start)
        self.device: Any = None
        self.baseline = 0
        self.host_limit: int | None = None
        self.init_world()

    def has(self, cap: str) -> bool:
        return cap in self.caps

    @property
    def dedup(self) -> bool:
        return self.has("store.alias.dedup")

    # ------------------------------------------------------------ set-up
    @initialize(host_limit=HOST_LIMITS, n_stores=st.sampled_from([1, 1, 2]))
    def start(self, host_limit, n_stores):
        """Clauses 11.1 and 11.2: stores on one device and one parent directory stay isolated."""
        if self.world:
            host_limit = 0  # the environment's rules want values on disk, at once
        self.host_limit = host_limit if self.has("store.limit.host") else None
        gc.collect()
        # Everything that exists now (hypothesis's own state, the test process) goes to
        # the collector's permanent generation: the many collections this machine makes
        # to find the store's cyclic garbage then scan only what was made since (each
        # took 33 ms, 82% of the machine's time). teardown() unfreezes it.
        gc.freeze()
        # Each example in a directory of its own: what a failed example left behind (a
        # store that could not clean up) must not fail the next one, or its replay.
        self.here = tempfile.mkdtemp(prefix="example-", dir=self.root)
        self.device = make_device(self.device_kind, 8 * self.limit)
        self.baseline = self.device.bytes_in_use()
        self.sides = [self._new_side() for _ in range(n_stores)]

    def _new_side(self) -> Side:
        h = StoreHarness(
            self.adapter,
            self.device_kind,
            self.here,
            device_limit=self.limit,
            host_limit=self.host_limit,
            device=self.device,
            caps=self.caps,
        )
        h.baseline = self.baseline  # both stores are measured from the empty device
        return Side(h, StoreModel(self.dedup))

    # ------------------------------------------------------------ helpers
    def _side(self, i: int) -> Side:
        return self.sides[i % len(self.sides)]

    def _build(self, spec: Any) -> S.Built:
        if not self.dedup:
            spec = _without_dups(spec)
        if self.device_kind != "sim":
            spec = _native_only(spec)
        if self.limit != LIMIT:
            spec = _scaled(spec, self.limit / LIMIT)
        try:
            return S.build(spec, self.device)
        except MemoryError:
            if not self.world_held():
                raise
            self.world_release()  # the environment gives its memory back to the caller
            for s in self.sides:
                s.device_bytes = s.h.snapshot().device_bytes
            return S.build(spec, self.device)

    @staticmethod
    def _held(built: S.Built, payload: bool = True) -> Held:
        return Held(
            built.expected,
            built.allocs,
            built.shared_inside,
            built.host_only,
            built.host_payload if payload else 0,
            cut_from_larger=built.cut_from_larger,
            obj=built.obj,
        )

    def _others_device(self, side: Side) -> int:
        return sum(s.device_bytes for s in self.sides if s is not side)

    def _over(self, side: Side, key: Hashable) -> int:
        return side.model.oversize(self.limit).get(side.model.canon(key), 0)

    @contextmanager
    def _window(self, side: Side, what: str, extra: int = 0, held: int = 0) -> Iterator[None]:
        """Clause 4.2: the device's own peak during the operation stays within the limit.

        The bound is the larger of what the device held on entry and the limit (plus
        the other store and ``extra``: an over-limit value used transiently, or what
        the test itself allocates inside the window). ``held`` is what the test built
        before the window and keeps outside the store: it is in ``entry`` already, and
        the limit side must count it too (clause 4.2 subtracts what the caller holds).
        What the environment holds on the device (conformance.store.world) is held too.
        """
        dev = self.device
        dev.reset_peak()
        self.world_reset_peak()
        entry = dev.bytes_in_use()
        yield
        peak = dev.peak_bytes()
        others = self._others_device(side)
        held += self.world_peak_held()
        bound = max(entry, self.baseline + others + held + self.limit) + extra
        assert peak <= bound, (
            f"{what}: the device peaked at {peak - self.baseline:,} bytes in use; the bound is "
            f"{bound - self.baseline:,} (limit {self.limit:,}, entry {entry - self.baseline:,}, "
            f"other store {others:,}, held by the test {held:,}, allowance {extra:,})"
        )

    def _check_value(self, side: Side, key: Hashable, got: Any) -> None:
        """Clauses 2.1 and 2.2: a value comes back exactly (dtype, byte order, shape, layout, bits)."""
        why = S.mismatch(self.device, got, side.model.held(key).expected)
        assert why is None, f"store[{key!r}] came back wrong: {why}"

    def _unchanged(self, side: Side, before, what: str) -> None:
        """Clauses 5.3 and 1.15: a read-only or rejected operation changes nothing."""
        after = side.h.snapshot()
        assert dict(after.tiers) == dict(before.tiers), (
            f"{what} changed tiers: {dict(before.tiers)} -> {dict(after.tiers)}"
        )
        if before.lru is not None and self.has("store.lru.strict"):
            assert list(after.lru) == list(before.lru), (
                f"{what} changed recency: {list(before.lru)} -> {list(after.lru)}"
            )
        for name in ("device_bytes", "host_bytes", "disk_bytes"):
            assert getattr(after, name) == getattr(before, name), (
                f"{what} changed {name}: {getattr(before, name):,} -> {getattr(after, name):,}"
            )

    def _minimal_applies(self, side: Side) -> bool:
        """Whether clause 4.9 is judged here: the environment's allocations make spill on
        demand legitimate, and with externals the value moved last is not certain."""
        return not (self.world or side.proxies) and self.has("store.lru.strict")

    def _minimal(
        self, side: Side, before, what: str, evicted: int | None = None, set_key: Any = None
    ) -> None:
        """Clause 4.9: of what ``what`` moved off the device, the most recently used was
        needed: it does not fit beside what stayed (or, for ``evict(n)``, the bytes freed
        without it fall short of ``n``)."""
        if before is None:
            return
        after = side.h.snapshot()
        was = {k: t for k, t in before.tiers.items() if set_key is None or k != set_key}
        last = side.model.last_moved_off(was, after.tiers, self.limit)
        if last is None:
            return
        key, size = last
        if evicted is None:
            assert after.device_bytes + size > self.limit, (
                f"{what} moved {key!r} ({size:,} bytes) off the device, yet it fits beside what "
                f"stayed ({after.device_bytes:,} of {self.limit:,}): only the least recently "
                f"used values the operation needs room from may move"
            )
        else:
            freed = before.device_bytes - after.device_bytes
            assert freed - size < evicted, (
                f"{what} freed {freed:,} bytes, {freed - size:,} of them without {key!r}: "
                f"moving it ({size:,} bytes) was not needed"
            )

    def _missing(self, side: Side, key: Hashable, op: str) -> None:
        """Clauses 1.2 and 1.15: ``op`` of a missing key raises KeyError, changing nothing."""
        before = side.h.snapshot()
        store = side.h.store
        try:
            if op == "get":
                store[key]
            elif op == "del":
                del store[key]
            else:
                store.pop(key)
        except KeyError:
            pass
        else:
            raise AssertionError(f"{op} of missing key {key!r} did not raise KeyError")
        self._unchanged(side, before, f"{op} of a missing key")

    # ------------------------------------------------------------ rules: setting
    def _key(self, key: Hashable) -> Hashable:
        return key.replace(ROOT, self.here) if isinstance(key, str) else key

    def _put(self, side: int, key: Hashable, spec: Any) -> Hashable:
        s = self._side(side)
        built = self._build(spec)
        before = s.h.snapshot() if self._minimal_applies(s) else None
        with self._window(s, f"store[{key!r}] = ..."):
            s.h.store[key] = built.value
        del built.value, built.leaves
        s.model.remember(key, self._held(built))
        self._minimal(s, before, f"store[{key!r}] = ...", set_key=key)
        return key

    @precondition(opened)
    @rule(target=keys, side=SIDES, key=S.str_keys(ROOT), spec=VALUES)
    def put(self, side, key, spec):
        """Clauses 1.1, 3.1, 4.1 and 9.2: a set under a key that may be a path, collide with
        another key's str/repr, or be long."""
        self.world_step('set')
        return self._put(side, self._key(key), spec)

    @precondition(lambda self: not self.world and (self.sides and self.any_keys))
    @rule(target=keys, side=SIDES, key=S.any_keys(ROOT), spec=VALUES)
    def put_any_key(self, side, key, spec):
        """Clauses 1.11, 1.12 and 1.13: any hashable dask uses; equal numbers are one key."""
        self.world_step('set')
        return self._put(side, self._key(key), spec)

    @precondition(opened)
    @rule(side=SIDES, key=keys, spec=VALUES)
    def put_again(self, side, key, spec):
        """Clause 1.3: setting a present key replaces its value (a new key in another store)."""
        self.world_step('set')
        self._put(side, key, spec)

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
    @rule(side=SIDES, k1=keys, k2=keys, spec=VALUES)
    def put_same_object_under_two_keys(self, side, k1, k2, spec):
        """Clause 3.2: one allocation under two keys is counted (and written) once."""
        self.world_step('set')
        if k1 == k2:
            return
        s = self._side(side)
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
    @rule(side=SIDES, src=keys, dst=keys)
    def put_view_of_stored(self, side, src, dst):
        """Clauses 3.2 and 2.6: a view of a stored value shares its allocation."""
        self.world_step('set')
        s = self._side(side)
        if src not in s.model or src == dst:
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
        items=st.lists(st.tuples(keys, VALUES), min_size=1, max_size=3),
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
    @rule(side=SIDES, key=keys, spec=VALUES)
    def setdefault(self, side, key, spec):
        """Clause 1.5: setdefault returns the present value untouched, or stores the default."""
        self.world_step('setdefault')
        s = self._side(side)
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

    # ------------------------------------------------------------ rules: reading
    @precondition(opened)
    @rule(side=SIDES, key=keys)
    def get(self, side, key):
        """Clauses 2.1, 5.1, 6.1, 6.2: exact, refreshes recency, eagerly back on device;
        clauses 1.2 and 1.15 for a missing key."""
        self.world_step('get')
        s = self._side(side)
        if key not in s.model:
            return self._missing(s, key, "get")
        over = self._over(s, key)
        before = s.h.snapshot() if self._minimal_applies(s) else None
        with self._window(s, f"store[{key!r}]", extra=over):
            value = s.h.store[key]
            s.model.touch(key)
            held = s.model.held(key)
            if self.has("store.unspill.on_access") and not over and not held.host_only:
                tier = s.h.snapshot().tiers.get(key)
                assert tier == "device", (
                    f"store[{key!r}] returned while the value is in tier {tier!r}: a value "
                    "that fits must be back on the device when the get returns"
                )
            self._check_value(s, key, value)
        del value
        self._minimal(s, before, f"store[{key!r}]")

    @precondition(calm)
    @rule(side=SIDES, key=keys, default=st.sampled_from([None, 0, "default"]))
    def get_with_default(self, side, key, default):
        """Clause 1.9: get(missing, d) is d and changes nothing; get(present, d) the value."""
        self.world_step('get')
        s = self._side(side)
        if key in s.model:
            with self._window(s, f"get({key!r}, d)", extra=self._over(s, key)):
                got = s.h.store.get(key, default)
                self._check_value(s, key, got)
            del got
            s.model.touch(key)
            return
        before = s.h.snapshot()
        assert s.h.store.get(key, default) is default
        self._unchanged(s, before, f"get({key!r}, default)")

    @precondition(calm)
    @rule(side=SIDES, probe=keys)
    def look_without_touching(self, side, probe):
        """Clause 5.3: `in`, len, iteration and inspect neither touch recency nor move data."""
        self.world_step('contains/len/iter')
        s = self._side(side)
        before = s.h.snapshot()
        self.device.reset_peak()
        entry = self.device.bytes_in_use()
        store = s.h.store
        assert (probe in store) == (probe in s.model), f"`{probe!r} in store` is wrong"
        assert len(store) == len(s.model.keys), "len() disagrees with the model"
        listed = list(iter(store))
        assert len(listed) == len(s.model.keys) and all(k in s.model for k in listed), (
            f"iteration gave {listed!r}"
        )
        assert set(store.keys()) == set(s.model.keys)
        assert self.device.peak_bytes() == entry, "looking at keys allocated device memory"
        self._unchanged(s, before, "`in`/len/iteration/inspect")

    @precondition(
        lambda self: (
            not self.world and (self.has("store.pickle") and any(s.model.keys for s in self.sides))
        )
    )
    @rule(side=SIDES, key=keys)
    def pickle_value(self, side, key):
        """Clauses 5.3 and 13.2: pickling a value round-trips and moves nothing."""
        self.world_step('use of a value')
        s = self._side(side)
        if key not in s.model:
            return
        value = s.h.store[key]
        s.model.touch(key)
        before = s.h.snapshot()
        blob = pickle.dumps(value)
        self._unchanged(s, before, f"pickle.dumps(store[{key!r}])")
        del value
        copy = pickle.loads(blob)
        self._check_value(s, key, copy)
        del copy, blob

    @precondition(
        lambda self: (
            not self.world
            and (self.has("store.proxy") and any(len(s.model.keys) >= 2 for s in self.sides))
        )
    )
    @rule(
        side=SIDES,
        k1=keys,
        k2=keys,
        how=st.sampled_from(["attribute", "arithmetic", "asarray", "function"]),
    )
    def use_refreshes_recency(self, side, k1, k2, how):
        """Clause 5.2: every use of a returned proxy counts as an access."""
        s = self._side(side)
        m = s.model
        if k1 not in m or k2 not in m or m.canon(k1) == m.canon(k2):
            return
        held = m.held(k1)
        if not isinstance(held.expected, S.DeviceLeaf):
            return
        extra = max(self._over(s, k1), self._over(s, k2))
        with self._window(s, f"using store[{k1!r}]", extra=2 * extra + held.expected.nbytes):
            v = s.h.store[k1]
            m.touch(k1)
            s.h.store[k2]
            m.touch(k2)
            if how == "attribute":
                v.strides  # noqa: B018 - not cached metadata: reaches the object
            elif how == "arithmetic":
                w = v == v  # defined for every dtype, datetime64 included
                del w
            elif how == "asarray" and self.device_kind == "sim":  # CuPy refuses np.asarray
                w = np.asarray(v)
                del w
            else:
                w = np.copy(v)  # __array_function__, defined for every dtype
                del w
            m.touch(k1)
        del v

    @precondition(lambda self: any(s.model.keys for s in self.sides))
    @rule(side=SIDES, key=keys)
    def write_in_place(self, side, key):
        """Clause 13.1: a write to a value in use, made on the device, survives its next spill
        and unspill; with ``store.proxy``, a write made wherever the value is (13.6)."""
        self.world_step('use of a value')
        s = self._side(side)
        if key not in s.model:
            return
        canon = s.model.canon(key)
        held = s.model.keys[canon]
        leaf = held.expected
        if (
            not isinstance(leaf, S.DeviceLeaf)
            or canon in s.model.aliased()
            or leaf.host.size == 0
            or leaf.host.dtype.kind not in "biufc"
        ):
            return
        proxy = self.has("store.proxy")
        with self._window(s, f"store[{key!r}][...] = 1", extra=2 * self._over(s, key)):
            v = s.h.store[key]
            wrote = proxy or s.h.snapshot().tiers.get(key) == "device"
            if wrote:  # a plain array read from host or disk is a copy: 13.6 is N/A for it
                v[...] = 1
        del v
        s.model.touch(key)
        if not wrote:
            return
        new = leaf.host.copy()
        new[...] = 1
        held.expected = S.DeviceLeaf(new, leaf.alloc, leaf.nbytes, leaf.layout)

    # ------------------------------------------------------------ rules: removing
    @precondition(opened)
    @rule(side=SIDES, key=keys)
    def delete(self, side, key):
        """Clauses 1.1 and 3.3: del frees every byte in every tier; 1.2 for a missing key."""
        self.world_step('delete')
        s = self._side(side)
        if key not in s.model:
            return self._missing(s, key, "del")
        with self._window(s, f"del store[{key!r}]"):
            del s.h.store[key]
        s.model.forget(key)
        assert key not in s.h.store

    @precondition(opened)
    @rule(side=SIDES, key=keys, with_default=st.booleans())
    def pop(self, side, key, with_default):
        """Clause 1.6: pop returns the value exactly and forgets the key; a missing key is
        KeyError, or the default, changing nothing."""
        self.world_step('pop')
        s = self._side(side)
        if key not in s.model:
            if not with_default:
                return self._missing(s, key, "pop")
            before = s.h.snapshot()
            assert s.h.store.pop(key, "default") == "default"
            return self._unchanged(s, before, f"pop({key!r}, default) of a missing key")
        with self._window(s, f"pop({key!r})", extra=self._over(s, key)):
            got = s.h.store.pop(key, "default") if with_default else s.h.store.pop(key)
            self._check_value(s, key, got)
        del got
        s.model.touch(key)  # popping reads the value: its alias group was used
        s.model.forget(key)

    @precondition(calm)
    @rule(side=SIDES)
    def popitem(self, side):
        """Clause 1.7: popitem returns some stored pair exactly, KeyError when empty."""
        self.world_step('popitem')
        s = self._side(side)
        if not s.model.keys:
            before = s.h.snapshot()
            try:
                s.h.store.popitem()
            except KeyError:
                pass
            else:
                raise AssertionError("popitem() of an empty store did not raise KeyError")
            self._unchanged(s, before, "popitem() of an empty store")
            return
        extra = max(s.model.oversize(self.limit).values(), default=0)
        with self._window(s, "popitem()", extra=extra):
            key, got = s.h.store.popitem()
            assert key in s.model, f"popitem() returned a key never stored: {key!r}"
            self._check_value(s, key, got)
        del got
        s.model.touch(key)  # popping reads the value: its alias group was used
        s.model.forget(key)

    @precondition(lambda self: not self.world and (any(s.model.keys for s in self.sides)))
    @rule(side=SIDES)
    def clear(self, side):
        """Clauses 1.8 and 3.3: clear() empties every tier."""
        self.world_step('clear')
        s = self._side(side)
        with self._window(s, "clear()"):
            s.h.store.clear()
        s.model.clear()

    @precondition(lambda self: not self.world and (any(len(s.model.keys) >= 2 for s in self.sides)))
    @rule(side=SIDES, victim=keys)
    def iterate_while_mutating(self, side, victim):
        """Clause 1.10: iteration never yields a key twice and never corrupts the store."""
        self.world_step('contains/len/iter')
        s = self._side(side)
        if len(s.model.keys) < 2 or victim not in s.model:
            return
        before = set(s.model.keys)
        it = iter(s.h.store)
        seen = [next(it)]
        del s.h.store[victim]
        s.model.forget(victim)
        try:
            seen += list(it)
        except RuntimeError:  # like a dict: changed size during iteration
            return
        assert len(seen) == len(set(seen)), f"iteration yielded a key twice: {seen!r}"
        assert all(k in before for k in seen), f"iteration yielded unknown keys: {seen!r}"
        missed = [k for k in s.model.keys if k not in seen]
        assert not missed, f"iteration skipped keys present throughout: {missed!r}"

    # ------------------------------------------------------------ rules: tiers
    @precondition(lambda self: self.has("store.evict.manual") and self.sides)
    @rule(side=SIDES, frac=st.sampled_from([0.0, 0.01, 0.3, 0.5, 1.0, 2.0]))
    def evict(self, side, frac):
        """Clauses 4.7 and 5.4: evict(n) frees at least n (LRU first) or everything."""
        self.world_step('evict')
        s = self._side(side)
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
        self.world_step('spill everything')
        s = self._side(side)
        adapter_evict(self.adapter, s.h.store, 16 * self.limit)
        self.check_all()
        for key in list(s.model.keys):
            with self._window(s, f"store[{key!r}] after a full spill", extra=self._over(s, key)):
                got = s.h.store[key]
                self._check_value(s, key, got)
            del got
            s.model.touch(key)

    @precondition(lambda self: self.has("store.external") and self.sides)
    @rule(side=SIDES, spec=VALUES)
    def register_external(self, side, spec):
        """Clauses 7.1 and 7.2: externals are counted and spillable."""
        self.world_step('register_external')
        s = self._side(side)
        built = self._build(spec)
        proxy = self.adapter.register_external(s.h.store, built.value)
        del built.value, built.leaves
        s.proxies.append(proxy)
        s.model.externals.append(self._held(built, payload=False))

    @precondition(lambda self: self.has("store.external") and any(s.model.keys for s in self.sides))
    @rule(side=SIDES, key=keys)
    def register_stored_value(self, side, key):
        """Clause 7.4: an object both stored and external is counted once."""
        self.world_step('register_external')
        s = self._side(side)
        if key not in s.model:
            return
        held = s.model.held(key)
        value = s.h.store[key]
        s.model.touch(key)
        proxy = self.adapter.register_external(s.h.store, value)
        del value
        s.proxies.append(proxy)
        s.model.externals.append(
            Held(held.expected, dict(held.allocs), held.shared_inside, held.host_only, 0)
        )

    @precondition(lambda self: any(s.proxies for s in self.sides))
    @rule(side=SIDES, which=st.integers(0, 7), read_first=st.booleans())
    def drop_external(self, side, which, read_first):
        """Clause 7.3: a dropped external is forgotten in whatever tier it is."""
        s = self._side(side)
        if not s.proxies:
            return
        i = which % len(s.proxies)
        if read_first:
            why = S.mismatch(self.device, s.proxies[i], s.model.externals[i].expected, "external")
            assert why is None, why
            # Clause 5.2: a use of it is a use of a key holding the same proxy (one
            # registered by register_stored_value), perhaps of keys sharing its memory.
            s.model.use_shared(s.model.users_of_external(i))
        s.proxies.pop(i)
        s.model.externals.pop(i)

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

    @precondition(lambda self: not self.world and (any(len(s.model.keys) >= 2 for s in self.sides)))
    @rule(side=SIDES)
    def close_and_reopen(self, side):
        """Clauses 11.3 and 11.2: close() leaves nothing and touches no other store."""
        self.world_step('close_store')
        s = self._side(side)
        others = [x for x in self.sides if x is not s]
        files_before = {id(x): files_under(x.h.env.spill_dir) for x in others}
        s.proxies.clear()
        s.model.externals.clear()
        gc.collect()
        self.world_before_close(s)
        s.h.close(check=False)
        gc.collect()
        left = files_under(s.h.env.spill_dir) | {d: 0 for d in _dirs_under(s.h.env.spill_dir)}
        assert not left, f"close() left {sorted(left)} under spill_dir"
        measured = self.device.bytes_in_use() - self.baseline - self.world_held()
        assert measured == self._others_device(s), (
            f"after close() the device holds {measured:,} bytes; the other store "
            f"{self._others_device(s):,}"
        )
        for x in others:
            assert files_under(x.h.env.spill_dir) == files_before[id(x)], (
                "closing one store changed another store's files"
            )
        self.sides[self.sides.index(s)] = self._new_side()

    # ------------------------------------------------------------ invariants
    @invariant()
    def check_all(self):
        """Clauses 3.1, 3.5, 3.6, 3.7, 4.1, 4.4, 5.5, 9.2 after every step, on every store."""
        for s in self.sides:  # what each store says now; the ledger then checks the sum
            s.device_bytes = s.h.snapshot().device_bytes
        world = self.world_held()
        for s in self.sides:
            others = self._others_device(s) + world
            snap = s.h.check(s.model.keys, held=others, oversize=s.model.oversize(self.limit))
            s.device_bytes = snap.device_bytes
            self._check_recency(s, snap)
            self._check_host_payload(s, snap)
            if not s.model.keys and not s.proxies:
                gc.collect()
                snap = s.h.snapshot()
                assert (snap.device_bytes, snap.host_bytes, snap.disk_bytes) == (0, 0, 0), (
                    f"nothing is stored, yet the store accounts {snap}"
                )
                left = files_under(s.h.env.spill_dir)
                assert not left, f"nothing is stored, yet spill_dir holds {sorted(left)}"
        self._check_files_inside()

    def _check_files_inside(self) -> None:
        """Clause 9.2: whatever the key, spill files stay inside the store's directory."""
        if not self.sides:
            return
        own = tuple(os.path.join(s.h.env.spill_dir, "") for s in self.sides)
        stray = [p for p in files_under(self.here) if not p.startswith(own)]
        assert not stray, f"files outside every store's spill_dir: {stray}"

    def _check_host_payload(self, side: Side, snap) -> None:
        """Clause 3.7: host-only values are measured deeply, not by their outer object."""
        if not self.has("store.spill.host"):
            return
        floor = side.model.host_payload_floor(snap.tiers)
        assert snap.host_bytes >= floor, (
            f"host_bytes={snap.host_bytes:,} but host-only values in the host tier hold at "
            f"least {floor:,} bytes of buffers"
        )

    def _check_recency(self, side: Side, snap) -> None:
        """Clauses 5.4 and 5.5: the device holds the most recently used; host before disk."""
        if not self.has("store.lru.strict"):
            return
        cascade = (
            self.host_limit is not None
            and self.has("store.limit.host")
            and not self._disk_failed  # clause 9.6: the host limit no longer applies
        )
        why = side.model.recency_violation(snap.tiers, snap.lru, self.limit, cascade)
        assert why is None, why

    # ------------------------------------------------------------ teardown
    def teardown(self):
        try:
            self._teardown(failing=sys.exc_info()[0] is not None)
        finally:
            self.world_teardown()
            gc.unfreeze()  # what start() froze

    def _teardown(self, failing: bool) -> None:
        """``failing``: a rule already failed, so only clean up."""
        for s in self.sides:
            s.proxies.clear()
            s.model.externals.clear()
        gc.collect()
        if failing:
            for s in self.sides:
                s.h.close(check=False)
            self.sides = []
            return
        # Read every value, but judge only after every store is closed: a mismatch
        # raised with stores open leaves their files behind, and hypothesis's replay of
        # the example then fails earlier on those (FlakyStrategyDefinition, stray files)
        # instead of on the real failure.
        wrong = []
        sides, self.sides = self.sides, []
        try:
            for s in sides:
                for key in list(s.model.keys):
                    got = s.h.store[key]
                    why = S.mismatch(self.device, got, s.model.held(key).expected)
                    del got
                    if why is not None:
                        wrong.append(f"store[{key!r}] came back wrong at teardown: {why}")
        finally:
            for s in sides:
                s.h.close(check=False)
            gc.collect()
        assert not wrong, "\n".join(wrong)
        if sides:
            in_use = self.device.bytes_in_use() - self.baseline - self.world_held()
            assert in_use == 0, (
                f"after closing every store {in_use:,} device bytes are still in use"
            )
            for s in sides:
                left = files_under(s.h.env.spill_dir)
                assert not left, f"after close() spill_dir holds {sorted(left)}"


def _without_dups(spec: Any) -> Any:
    """``spec`` with repeated objects replaced by fresh ones (for stores without dedup)."""
    if isinstance(spec, S.Dup):
        return S.HostSpec("int", 0, spec.index)
    if isinstance(spec, S.Node):
        return S.Node(spec.kind, tuple(_without_dups(c) for c in spec.children))
    return spec


def _native_only(spec: Any) -> Any:
    """``spec`` with every byte order native (CuPy holds native byte order only)."""
    if isinstance(spec, S.ArraySpec) and spec.dtype.startswith(">"):
        return dataclasses.replace(spec, dtype="=" + spec.dtype[1:])
    if isinstance(spec, S.Node):
        return S.Node(spec.kind, tuple(_native_only(c) for c in spec.children))
    return spec


def _scaled(spec: Any, factor: float) -> Any:
    """``spec`` with its arrays' sizes scaled to another device limit."""
    if isinstance(spec, S.ArraySpec):
        return dataclasses.replace(spec, nbytes=int(spec.nbytes * factor))
    if isinstance(spec, S.Node):
        return S.Node(spec.kind, tuple(_scaled(c, factor) for c in spec.children))
    return spec


def _dirs_under(path: str) -> list[str]:
    return [os.path.join(r, d) for r, ds, _f in os.walk(path) for d in ds]
