"""The generative state machine: random programs over every mapping method, checked
against a model after every step, with the device's own peak during every operation.

Rules cannot take fixtures, so :func:`make_store_machine` builds the class inside
a function (like hypothesis' own database conformance machines). Capabilities gate
rules through preconditions and change what the model expects; preconditions read
only the model, never the store.

The model holds no device memory: only the expected host arrays, which model
allocations each key holds, and recency. Values and keys come from
:mod:`conformance.strategies`; every clause a rule enforces is cited beside it.
"""

from __future__ import annotations

import gc
import os
import pickle
import sys
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from . import strategies as S
from .api import evict as adapter_evict
from .harness import LIMIT, StoreHarness, files_under, make_device

_MISSING = object()


@dataclass
class Held:
    """What the model knows of one key's value or one external."""

    expected: Any
    allocs: dict[int, int]
    shared_inside: bool
    host_only: bool
    host_payload: int


@dataclass
class Side:
    """One store under test with its model; the machine may run two on one device."""

    h: StoreHarness
    model: dict[Hashable, Held] = field(default_factory=dict)
    order: list[Hashable] = field(default_factory=list)  # recency, least -> most recent
    unsure: set[Hashable] = field(default_factory=set)  # recency unsettled: see _use_shared
    externals: list[tuple[Any, Held]] = field(default_factory=list)
    device_bytes: int = 0  # validated against the ledger by the last invariant check


def make_store_machine(
    adapter: Any,
    caps,
    device_kind: str,
    root,
    *,
    limit: int = LIMIT,
    any_keys: bool = False,
) -> type[RuleBasedStateMachine]:
    """A RuleBasedStateMachine class for ``adapter``; ``any_keys`` draws non-str keys too."""
    caps = frozenset(caps)
    has = caps.__contains__
    root = str(root)
    dedup = has("store.alias.dedup")
    keys = S.any_keys(root) if any_keys else S.str_keys(root)
    sizes = st.one_of(
        st.sampled_from([0, 1, 8, 24, limit // 3, limit // 2, limit, limit + limit // 4]),
        st.integers(1, 1024),
        st.integers(limit // 8, limit // 3),
    )
    values = S.value_specs(device_kind, sizes)
    host_limits = st.sampled_from([0, None, limit // 2, 0, limit, 4 * limit])

    class StoreMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.sides: list[Side] = []
            self.device: Any = None
            self.baseline = 0
            self.host_limit: int | None = None

        # ------------------------------------------------------------ set-up
        @initialize(host_limit=host_limits, n_stores=st.sampled_from([1, 1, 2]))
        def start(self, host_limit, n_stores):
            """Clauses 11.1 and 11.2: stores on one device and one parent directory stay isolated."""
            self.host_limit = host_limit if has("store.limit.host") else None
            gc.collect()
            # Everything that exists now (hypothesis's own state, the test process) goes to
            # the collector's permanent generation: the many collections this machine makes
            # to find the store's cyclic garbage then scan only what was made since (each
            # took 33 ms, 82% of the machine's time). teardown() unfreezes it.
            gc.freeze()
            self.device = make_device(device_kind, 8 * limit)
            self.baseline = self.device.bytes_in_use()
            self.sides = [Side(self._harness()) for _ in range(n_stores)]

        def _harness(self) -> StoreHarness:
            h = StoreHarness(
                adapter,
                device_kind,
                root,
                device_limit=limit,
                host_limit=self.host_limit,
                device=self.device,
                caps=caps,
            )
            h.baseline = self.baseline  # both stores are measured from the empty device
            return h

        # ------------------------------------------------------------ model helpers
        def _side(self, data) -> Side:
            i = (
                data.draw(st.integers(0, len(self.sides) - 1), label="store")
                if len(self.sides) > 1
                else 0
            )
            return self.sides[i]

        def _canon(self, side: Side, key: Hashable) -> Hashable:
            """The key object the model files ``key`` under (1, 1.0 and True are one key)."""
            for k in side.model:
                if k == key:
                    return k
            return key

        def _touch(self, side: Side, key: Hashable) -> None:
            """``key`` becomes the most recently used; keys sharing memory with it are used too
            (clause 5.1: an alias group moves, and is used, as one)."""
            key = self._canon(side, key)
            self._use_shared(side, self._group_keys(side, key))
            side.unsure.discard(key)
            if key in side.order:
                side.order.remove(key)
            side.order.append(key)

        def _use_shared(self, side: Side, keys) -> None:
            """``keys`` were used only through memory they share with what was used.

            The store may no longer share it: a spill copies a view apart from its base
            (clause 2.6 asks only for their content), and from then on using one rightly
            leaves the other alone. So their recency is unsettled: they move to the end,
            and leave the recency checks until they are used directly.
            """
            for k in keys:
                side.unsure.add(k)
                if k in side.order:
                    side.order.remove(k)
                side.order.append(k)

        def _group_keys(self, side: Side, key: Hashable) -> list[Hashable]:
            """The other keys linked to ``key`` through shared allocations (externals included)."""
            if key not in side.model or not dedup:
                return []
            holders = self._holders(side)
            seen, stack, allocs = {("key", key)}, [("key", key)], set()
            while stack:
                kind, who = stack.pop()
                held = side.model[who] if kind == "key" else side.externals[who][1]
                for a in held.allocs:
                    if a not in allocs:
                        allocs.add(a)
                        for other in holders[a]:
                            if other not in seen:
                                seen.add(other)
                                stack.append(other)
            return [who for kind, who in seen if kind == "key" and who != key]

        def _forget(self, side: Side, key: Hashable) -> None:
            if key in side.model:
                key = self._canon(side, key)
                del side.model[key]
            if key in side.order:
                side.order.remove(key)
            side.unsure.discard(key)

        def _remember(self, side: Side, key: Hashable, built: S.Built) -> None:
            self._forget(side, key)
            side.model[key] = Held(
                built.expected,
                built.allocs,
                built.shared_inside,
                built.host_only,
                built.host_payload,
            )
            self._touch(side, key)

        def _holders(self, side: Side) -> dict[int, list[Any]]:
            """Model allocation -> the keys and externals (by index) holding it."""
            out: dict[int, list[Any]] = {}
            for k, held in side.model.items():
                for a in held.allocs:
                    out.setdefault(a, []).append(("key", k))
            for i, (_p, held) in enumerate(side.externals):
                for a in held.allocs:
                    out.setdefault(a, []).append(("ext", i))
            return out

        def _aliased(self, side: Side) -> set[Hashable]:
            """Keys sharing an allocation with another key, an external, or within themselves."""
            out = {k for k, held in side.model.items() if held.shared_inside}
            for holders in self._holders(side).values():
                if len(holders) > 1:
                    out |= {who for kind, who in holders if kind == "key"}
            return out

        def _group_bytes(self, side: Side) -> dict[Hashable, int]:
            """Device bytes of the alias group of every key (each allocation once)."""
            holders = self._holders(side)
            out = {}
            for k in side.model:
                seen_keys, seen_ext, allocs = {k}, set(), {}
                stack = [("key", k)]
                while stack:
                    kind, who = stack.pop()
                    held = side.model[who] if kind == "key" else side.externals[who][1]
                    for a, n in held.allocs.items():
                        if a in allocs:
                            continue
                        allocs[a] = n
                        for other in holders[a]:
                            seen = seen_keys if other[0] == "key" else seen_ext
                            if other[1] not in seen:
                                seen.add(other[1])
                                stack.append(other)
                out[k] = sum(allocs.values())
            return out

        def _oversize(self, side: Side) -> dict[Hashable, int]:
            return {k: n for k, n in self._group_bytes(side).items() if n > limit}

        def _new_key(self, side: Side, data) -> Hashable:
            return data.draw(keys.filter(lambda k: k not in side.model), label="new key")

        def _existing(self, side: Side, data) -> Hashable:
            return data.draw(st.sampled_from(list(side.model)), label="key")

        def _build(self, data) -> S.Built:
            spec = data.draw(values, label="value")
            if not dedup:
                spec = _without_dups(spec)
            return S.build(spec, self.device)

        def _others_device(self, side: Side) -> int:
            return sum(s.device_bytes for s in self.sides if s is not side)

        @contextmanager
        def _window(self, side: Side, what: str, extra: int = 0, held: int = 0) -> Iterator[None]:
            """Clause 4.2: the device's own peak during the operation stays within the limit.

            The bound is the larger of what the device held on entry and the limit (plus
            the other store and ``extra``: an over-limit value used transiently, or what
            the test itself allocates inside the window). ``held`` is what the test built
            before the window and keeps outside the store: it is in ``entry`` already, and
            the limit side must count it too (clause 4.2 subtracts what the caller holds).
            """
            dev = self.device
            dev.reset_peak()
            entry = dev.bytes_in_use()
            yield
            peak = dev.peak_bytes()
            others = self._others_device(side)
            bound = max(entry, self.baseline + others + held + limit) + extra
            assert peak <= bound, (
                f"{what}: the device peaked at {peak - self.baseline:,} bytes in use; the bound is "
                f"{bound - self.baseline:,} (limit {limit:,}, entry {entry - self.baseline:,}, "
                f"other store {others:,}, held by the test {held:,}, allowance {extra:,})"
            )

        def _check_value(self, side: Side, key: Hashable, got: Any) -> None:
            """Clauses 2.1 and 2.2: a value comes back exactly (dtype, byte order, shape, layout, bits)."""
            why = S.mismatch(self.device, got, side.model[self._canon(side, key)].expected)
            assert why is None, f"store[{key!r}] came back wrong: {why}"

        def _snap(self, side: Side):
            return side.h.snapshot()

        def _unchanged(self, side: Side, before, what: str) -> None:
            """Clauses 5.3 and 1.15: a read-only or rejected operation changes nothing."""
            after = self._snap(side)
            assert dict(after.tiers) == dict(before.tiers), (
                f"{what} changed tiers: {dict(before.tiers)} -> {dict(after.tiers)}"
            )
            if before.lru is not None and has("store.lru.strict"):
                assert list(after.lru) == list(before.lru), (
                    f"{what} changed recency: {list(before.lru)} -> {list(after.lru)}"
                )
            for name in ("device_bytes", "host_bytes", "disk_bytes"):
                assert getattr(after, name) == getattr(before, name), (
                    f"{what} changed {name}: {getattr(before, name):,} -> {getattr(after, name):,}"
                )

        # ------------------------------------------------------------ rules: setting
        @precondition(lambda self: self.sides)
        @rule(data=st.data())
        def put(self, data):
            """Clauses 1.1, 3.1, 4.1."""
            side = self._side(data)
            key = (
                self._new_key(side, data)
                if data.draw(st.booleans(), label="fresh") or not side.model
                else self._existing(side, data)
            )
            built = self._build(data)
            with self._window(side, f"store[{key!r}] = ..."):
                side.h.store[key] = built.value
            del built.value, built.leaves
            self._remember(side, key, built)

        @precondition(lambda self: self.sides and dedup)
        @rule(data=st.data())
        def put_same_object_under_two_keys(self, data):
            """Clause 3.2: one allocation under two keys is counted (and written) once."""
            side = self._side(data)
            k1 = self._new_key(side, data)
            k2 = data.draw(
                keys.filter(lambda k: k not in side.model and k != k1), label="second key"
            )
            built = self._build(data)
            with self._window(side, "two keys, one object"):
                side.h.store[k1] = built.value
                side.h.store[k2] = built.value
            del built.value, built.leaves
            self._remember(side, k1, built)
            self._remember(side, k2, built)

        @precondition(lambda self: dedup and any(s.model for s in self.sides))
        @rule(data=st.data())
        def put_view_of_stored(self, data):
            """Clauses 3.2 and 2.6: a view of a stored value shares its allocation."""
            side = self._side(data)
            if not side.model:
                return
            src = self._existing(side, data)
            held = side.model[self._canon(side, src)]
            if not isinstance(held.expected, S.DeviceLeaf) or held.expected.host.ndim != 1:
                return
            n = len(held.expected.host)
            if n < 2:
                return
            over = self._oversize(side).get(self._canon(side, src), 0)
            key = self._new_key(side, data)
            with self._window(side, f"store[{key!r}] = store[{src!r}][:half]", extra=over):
                value = side.h.store[src]
                view = value[: n // 2]
                side.h.store[key] = view
            del value, view
            self._touch(side, src)
            leaf = held.expected
            side.model[key] = Held(
                S.DeviceLeaf(leaf.host[: n // 2].copy(), leaf.alloc, leaf.nbytes, ""),
                dict(held.allocs),
                False,
                False,
                0,
            )
            self._touch(side, key)

        @precondition(lambda self: any(s.model for s in self.sides))
        @rule(data=st.data())
        def update(self, data):
            """Clause 1.4: update() takes a mapping or pairs, in order."""
            side = self._side(data)
            n = data.draw(st.integers(1, 3), label="n")
            new: dict[Hashable, S.Built] = {}
            for _ in range(n):
                k = data.draw(keys.filter(lambda k: k not in new), label="key")
                new[k] = self._build(data)
            as_pairs = data.draw(st.booleans(), label="pairs")
            arg = (
                [(k, b.value) for k, b in new.items()]
                if as_pairs
                else {k: b.value for k, b in new.items()}
            )
            with self._window(side, "update(...)"):
                side.h.store.update(arg)
            del arg
            for k, b in new.items():
                b.value = b.leaves = None
                self._remember(side, k, b)

        @precondition(lambda self: self.sides)
        @rule(data=st.data())
        def setdefault(self, data):
            """Clause 1.5: setdefault returns the present value untouched, or stores the default."""
            side = self._side(data)
            present = bool(side.model) and data.draw(st.booleans(), label="present")
            key = self._existing(side, data) if present else self._new_key(side, data)
            built = self._build(data)
            extra = self._oversize(side).get(self._canon(side, key), 0) if present else 0
            # A present key keeps its value: the default stays the test's, on the device.
            held = sum(built.allocs.values()) if present else 0
            with self._window(side, f"setdefault({key!r}, ...)", extra=extra, held=held):
                got = side.h.store.setdefault(key, built.value)
                if present:
                    self._check_value(side, key, got)
            del got, built.value, built.leaves
            if present:
                self._touch(side, key)
            else:
                self._remember(side, key, built)

        @precondition(lambda self: self.sides)
        @rule(data=st.data())
        def rejected_set(self, data):
            """Clauses 1.14 and 1.15: an unhashable key is a TypeError and the mapping is unchanged."""
            side = self._side(data)
            built = self._build(data)
            before = self._snap(side)
            bad = data.draw(st.sampled_from([[1, 2], {"a": 1}, {3}]), label="unhashable key")
            try:
                side.h.store[bad] = built.value
            except TypeError:
                pass
            else:
                raise AssertionError(f"store[{bad!r}] = ... was accepted")
            del built.value, built.leaves
            gc.collect()
            self._unchanged(side, before, f"a rejected store[{bad!r}] = ...")

        # ------------------------------------------------------------ rules: reading
        @precondition(lambda self: any(s.model for s in self.sides))
        @rule(data=st.data())
        def get(self, data):
            """Clauses 2.1, 5.1, 6.1, 6.2: exact, refreshes recency, eagerly back on device."""
            side = self._side(data)
            if not side.model:
                return
            key = self._existing(side, data)
            canon = self._canon(side, key)
            over = self._oversize(side).get(canon, 0)
            with self._window(side, f"store[{key!r}]", extra=over):
                value = side.h.store[key]
                self._touch(side, key)
                held = side.model[canon]
                if has("store.unspill.on_access") and not over and not held.host_only:
                    tier = self._snap(side).tiers.get(key)
                    assert tier == "device", (
                        f"store[{key!r}] returned while the value is in tier {tier!r}: a value "
                        "that fits must be back on the device when the get returns"
                    )
                self._check_value(side, key, value)
            del value

        @precondition(lambda self: self.sides)
        @rule(data=st.data(), default=st.sampled_from([None, 0, "default"]))
        def get_with_default(self, data, default):
            """Clause 1.9: get(missing, d) is d and changes nothing."""
            side = self._side(data)
            key = self._new_key(side, data)
            before = self._snap(side)
            assert side.h.store.get(key, default) is default
            self._unchanged(side, before, f"get({key!r}, default)")

        @precondition(lambda self: self.sides)
        @rule(data=st.data())
        def missing_key_errors(self, data):
            """Clauses 1.2 and 1.15: a missing key raises KeyError on get, del and pop, changing nothing."""
            side = self._side(data)
            key = self._new_key(side, data)
            before = self._snap(side)
            op = data.draw(st.sampled_from(["get", "del", "pop"]), label="op")
            try:
                if op == "get":
                    side.h.store[key]
                elif op == "del":
                    del side.h.store[key]
                else:
                    side.h.store.pop(key)
            except KeyError:
                pass
            else:
                raise AssertionError(f"{op} of missing key {key!r} did not raise KeyError")
            self._unchanged(side, before, f"{op} of a missing key")

        @precondition(lambda self: self.sides)
        @rule(data=st.data())
        def look_without_touching(self, data):
            """Clause 5.3: `in`, len, iteration and inspect neither touch recency nor move data."""
            side = self._side(data)
            before = self._snap(side)
            self.device.reset_peak()
            entry = self.device.bytes_in_use()
            probe = (
                self._existing(side, data)
                if side.model and data.draw(st.booleans())
                else self._new_key(side, data)
            )
            assert (probe in side.h.store) == (probe in side.model), (
                f"`{probe!r} in store` is wrong"
            )
            assert len(side.h.store) == len(side.model), "len() disagrees with the model"
            listed = list(iter(side.h.store))
            assert len(listed) == len(side.model) and all(k in side.model for k in listed), (
                f"iteration gave {listed!r}"
            )
            assert set(side.h.store.keys()) == set(side.model)
            assert self.device.peak_bytes() == entry, "looking at keys allocated device memory"
            self._unchanged(side, before, "`in`/len/iteration/inspect")

        @precondition(lambda self: has("store.pickle") and any(s.model for s in self.sides))
        @rule(data=st.data())
        def pickle_value(self, data):
            """Clauses 5.3 and 13.2: pickling a value round-trips and moves nothing."""
            side = self._side(data)
            if not side.model:
                return
            key = self._existing(side, data)
            value = side.h.store[key]
            self._touch(side, key)
            before = self._snap(side)
            blob = pickle.dumps(value)
            self._unchanged(side, before, f"pickle.dumps(store[{key!r}])")
            del value
            copy = pickle.loads(blob)
            self._check_value(side, key, copy)
            del copy, blob

        @precondition(
            lambda self: has("store.proxy") and any(len(s.model) >= 2 for s in self.sides)
        )
        @rule(
            data=st.data(), how=st.sampled_from(["attribute", "arithmetic", "asarray", "function"])
        )
        def use_refreshes_recency(self, data, how):
            """Clause 5.2: every use of a returned proxy counts as an access."""
            side = self._side(data)
            if len(side.model) < 2:
                return
            k1 = self._existing(side, data)
            k2 = data.draw(st.sampled_from([k for k in side.model if k != k1]), label="other")
            held = side.model[self._canon(side, k1)]
            if not isinstance(held.expected, S.DeviceLeaf):
                return
            over = self._oversize(side)
            extra = max(over.get(self._canon(side, k1), 0), over.get(self._canon(side, k2), 0))
            with self._window(side, f"using store[{k1!r}]", extra=2 * extra + held.expected.nbytes):
                v = side.h.store[k1]
                self._touch(side, k1)
                side.h.store[k2]
                self._touch(side, k2)
                if how == "attribute":
                    v.strides  # noqa: B018 - not cached metadata: reaches the object
                elif how == "arithmetic":
                    w = v == v  # defined for every dtype, datetime64 included
                    del w
                elif how == "asarray" and device_kind == "sim":  # CuPy refuses np.asarray
                    w = np.asarray(v)
                    del w
                else:
                    w = np.copy(v)  # __array_function__, defined for every dtype
                    del w
                self._touch(side, k1)
            del v

        @precondition(lambda self: any(s.model for s in self.sides))
        @rule(data=st.data())
        def write_in_place(self, data):
            """Clause 13.1: a write to a value in use survives its next spill and unspill."""
            side = self._side(data)
            if not side.model:
                return
            key = self._existing(side, data)
            canon = self._canon(side, key)
            held = side.model[canon]
            leaf = held.expected
            if (
                not isinstance(leaf, S.DeviceLeaf)
                or canon in self._aliased(side)
                or leaf.host.size == 0
                or leaf.host.dtype.kind not in "biufc"
            ):
                return
            over = self._oversize(side).get(canon, 0)
            with self._window(side, f"store[{key!r}][...] = 1", extra=2 * over):
                v = side.h.store[key]
                v[...] = 1
            del v
            self._touch(side, key)
            new = leaf.host.copy()
            new[...] = 1
            held.expected = S.DeviceLeaf(new, leaf.alloc, leaf.nbytes, leaf.layout)

        # ------------------------------------------------------------ rules: removing
        @precondition(lambda self: any(s.model for s in self.sides))
        @rule(data=st.data())
        def delete(self, data):
            """Clauses 1.1 and 3.3: del frees every byte in every tier."""
            side = self._side(data)
            if not side.model:
                return
            key = self._existing(side, data)
            with self._window(side, f"del store[{key!r}]"):
                del side.h.store[key]
            self._forget(side, key)
            assert key not in side.h.store

        @precondition(lambda self: any(s.model for s in self.sides))
        @rule(data=st.data(), with_default=st.booleans())
        def pop(self, data, with_default):
            """Clause 1.6: pop returns the value exactly and forgets the key."""
            side = self._side(data)
            if not side.model:
                return
            key = self._existing(side, data)
            over = self._oversize(side).get(self._canon(side, key), 0)
            with self._window(side, f"pop({key!r})", extra=over):
                got = side.h.store.pop(key, "default") if with_default else side.h.store.pop(key)
                self._check_value(side, key, got)
            del got
            self._touch(side, key)  # popping reads the value: its alias group was used
            self._forget(side, key)

        @precondition(lambda self: self.sides)
        @rule(data=st.data())
        def popitem(self, data):
            """Clause 1.7: popitem returns some stored pair exactly, KeyError when empty."""
            side = self._side(data)
            if not side.model:
                before = self._snap(side)
                try:
                    side.h.store.popitem()
                except KeyError:
                    pass
                else:
                    raise AssertionError("popitem() of an empty store did not raise KeyError")
                self._unchanged(side, before, "popitem() of an empty store")
                return
            extra = max(self._oversize(side).values(), default=0)
            with self._window(side, "popitem()", extra=extra):
                key, got = side.h.store.popitem()
                assert key in side.model, f"popitem() returned a key never stored: {key!r}"
                self._check_value(side, key, got)
            del got
            self._touch(side, key)  # popping reads the value: its alias group was used
            self._forget(side, key)

        @precondition(lambda self: any(s.model for s in self.sides))
        @rule(data=st.data())
        def clear(self, data):
            """Clauses 1.8 and 3.3: clear() empties every tier."""
            side = self._side(data)
            with self._window(side, "clear()"):
                side.h.store.clear()
            side.model.clear()
            side.order.clear()
            side.unsure.clear()

        @precondition(lambda self: any(len(s.model) >= 2 for s in self.sides))
        @rule(data=st.data())
        def iterate_while_mutating(self, data):
            """Clause 1.10: iteration never yields a key twice and never corrupts the store."""
            side = self._side(data)
            if len(side.model) < 2:
                return
            before = set(side.model)
            it = iter(side.h.store)
            seen = [next(it)]
            victim = self._existing(side, data)
            del side.h.store[victim]
            self._forget(side, victim)
            try:
                seen += list(it)
            except RuntimeError:  # like a dict: changed size during iteration
                return
            assert len(seen) == len(set(seen)), f"iteration yielded a key twice: {seen!r}"
            assert all(k in before for k in seen), f"iteration yielded unknown keys: {seen!r}"
            missed = [k for k in side.model if k not in seen]
            assert not missed, f"iteration skipped keys present throughout: {missed!r}"

        # ------------------------------------------------------------ rules: tiers
        @precondition(lambda self: has("store.evict.manual") and self.sides)
        @rule(data=st.data(), frac=st.sampled_from([0.0, 0.01, 0.3, 0.5, 1.0, 2.0]))
        def evict(self, data, frac):
            """Clauses 4.7 and 5.4: evict(n) frees at least n (LRU first) or everything."""
            side = self._side(data)
            n = int(frac * limit)
            before = self._snap(side)
            with self._window(side, f"evict({n})"):
                freed = adapter_evict(adapter, side.h.store, n)
            after = self._snap(side)
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

        @precondition(lambda self: has("store.evict.manual") and any(s.model for s in self.sides))
        @rule(data=st.data())
        def spill_everything_and_read_back(self, data):
            """Clauses 2.1 and 9.1: every value comes back exactly through host and disk."""
            side = self._side(data)
            adapter_evict(adapter, side.h.store, 16 * limit)
            self.check_all()
            for key in list(side.model):
                over = self._oversize(side).get(key, 0)
                with self._window(side, f"store[{key!r}] after a full spill", extra=over):
                    got = side.h.store[key]
                    self._check_value(side, key, got)
                del got
                self._touch(side, key)

        @precondition(lambda self: has("store.external") and self.sides)
        @rule(data=st.data())
        def register_external(self, data):
            """Clauses 7.1 and 7.2: externals are counted and spillable."""
            side = self._side(data)
            built = self._build(data)
            proxy = adapter.register_external(side.h.store, built.value)
            del built.value, built.leaves
            side.externals.append(
                (proxy, Held(built.expected, built.allocs, built.shared_inside, built.host_only, 0))
            )

        @precondition(lambda self: has("store.external") and any(s.model for s in self.sides))
        @rule(data=st.data())
        def register_stored_value(self, data):
            """Clause 7.4: an object both stored and external is counted once."""
            side = self._side(data)
            if not side.model:
                return
            key = self._existing(side, data)
            held = side.model[self._canon(side, key)]
            value = side.h.store[key]
            self._touch(side, key)
            proxy = adapter.register_external(side.h.store, value)
            del value
            side.externals.append(
                (
                    proxy,
                    Held(held.expected, dict(held.allocs), held.shared_inside, held.host_only, 0),
                )
            )

        @precondition(lambda self: any(s.externals for s in self.sides))
        @rule(data=st.data())
        def drop_external(self, data):
            """Clause 7.3: a dropped external is forgotten in whatever tier it is."""
            side = self._side(data)
            if not side.externals:
                return
            i = data.draw(st.integers(0, len(side.externals) - 1), label="external")
            proxy, held = side.externals.pop(i)
            if data.draw(st.booleans(), label="read first"):
                why = S.mismatch(self.device, proxy, held.expected, "external")
                assert why is None, why
                # Clause 5.2: a use of it is a use of a key holding the same proxy (one
                # registered by register_stored_value), perhaps of keys sharing its memory.
                holders = self._holders(side)
                users = {w for a in held.allocs for kind, w in holders.get(a, ()) if kind == "key"}
                for k in list(users):
                    users.update(self._group_keys(side, k))
                self._use_shared(side, users)
            del proxy

        @precondition(lambda self: has("store.oom.on_demand") and self.sides)
        @rule(data=st.data(), frac=st.floats(0.3, 0.95))
        def pressure_from_outside(self, data, frac):
            """Clause 8.1: an outside allocation makes the stores spill on demand."""
            side = self._side(data)
            dev = self.device
            free = dev.capacity - self.baseline - self._others_device(side)
            n = int(frac * free) // 8 * 8
            with self._window(side, f"an outside allocation of {n:,}", extra=n):
                outside = dev.empty(n, "uint8")  # must succeed: the stores spill on demand
                snaps = [s.h.snapshot() for s in self.sides]
                measured = dev.bytes_in_use() - self.baseline - n
                accounted = sum(sn.device_bytes for sn in snaps)
                assert measured == accounted, (
                    f"after spilling on demand the ledger holds {measured:,} bytes for the "
                    f"stores, which account {accounted:,}"
                )
            del outside

        @precondition(lambda self: self.sides)
        @rule(data=st.data())
        def close_and_reopen(self, data):
            """Clauses 11.3 and 11.2: close() leaves nothing and touches no other store."""
            side = self._side(data)
            others = [s for s in self.sides if s is not side]
            files_before = {id(s): files_under(s.h.env.spill_dir) for s in others}
            side.externals.clear()
            gc.collect()
            side.h.close(check=False)
            gc.collect()
            left = files_under(side.h.env.spill_dir) | {
                d: 0 for d in _dirs_under(side.h.env.spill_dir)
            }
            assert not left, f"close() left {sorted(left)} under spill_dir"
            measured = self.device.bytes_in_use() - self.baseline
            assert measured == self._others_device(side), (
                f"after close() the device holds {measured:,} bytes; the other store "
                f"{self._others_device(side):,}"
            )
            for s in others:
                assert files_under(s.h.env.spill_dir) == files_before[id(s)], (
                    "closing one store changed another store's files"
                )
            i = self.sides.index(side)
            self.sides[i] = Side(self._harness())

        @rule()
        def collect(self):
            gc.collect()

        # ------------------------------------------------------------ invariants
        @invariant()
        def check_all(self):
            """Clauses 3.1, 3.5, 3.6, 3.7, 4.1, 4.4, 5.5, 9.2 after every step, on every store."""
            for s in self.sides:  # what each store says now; the ledger then checks the sum
                s.device_bytes = s.h.snapshot().device_bytes
            for s in self.sides:
                others = self._others_device(s)
                snap = s.h.check(s.model, held=others, oversize=self._oversize(s))
                s.device_bytes = snap.device_bytes
                self._check_recency(s, snap)
                self._check_host_payload(s, snap)
                if not s.model and not s.externals:
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
            stray = [p for p in files_under(root) if not p.startswith(own)]
            assert not stray, f"files outside every store's spill_dir: {stray}"

        def _check_host_payload(self, side: Side, snap) -> None:
            """Clause 3.7: host-only values are measured deeply, not by their outer object."""
            if not has("store.spill.host"):
                return
            tiers = snap.tiers
            floor = sum(
                held.host_payload
                for k, held in side.model.items()
                if held.host_only and tiers.get(k) == "host"
            )
            assert snap.host_bytes >= floor, (
                f"host_bytes={snap.host_bytes:,} but host-only values in the host tier hold at "
                f"least {floor:,} bytes of buffers"
            )

        def _check_recency(self, side: Side, snap) -> None:
            """Clauses 5.4 and 5.5: the device holds the most recently used; host before disk."""
            if not has("store.lru.strict"):
                return
            tiers = snap.tiers
            aliased = self._aliased(side) | side.unsure  # unsettled recency: _use_shared
            big = self._oversize(side)
            if snap.lru is not None:
                expect = [k for k in side.order if tiers.get(k) == "device" and k not in aliased]
                got = [k for k in snap.lru if k not in aliased]
                assert got == expect, (
                    f"inspect().lru {list(snap.lru)!r} != keys by recency {expect!r}"
                )
            plain = [
                k
                for k in side.order
                if k not in aliased
                and k not in big
                and not (side.model[k].host_only and tiers.get(k) != "device")
            ]
            spilled = None
            for k in reversed(plain):  # most recent first
                if tiers[k] != "device":
                    spilled = k
                elif spilled is not None:
                    raise AssertionError(
                        f"{k!r} is on the device but the more recently used {spilled!r} was "
                        f"spilled: device-resident keys must be a most-recently-used suffix "
                        f"(recency {side.order!r}, tiers {dict(tiers)!r})"
                    )
            if self.host_limit is None or not has("store.limit.host"):
                return
            lower = [k for k in plain if not side.model[k].host_only and tiers[k] != "device"]
            on_host = None
            for k in lower:  # least recent first: disk keys, then host keys
                if tiers[k] == "host":
                    on_host = k
                elif on_host is not None:
                    raise AssertionError(
                        f"{k!r} went to disk while the less recently used {on_host!r} stayed "
                        f"on host: the host tier cascades least-recently-used first "
                        f"(tiers {dict(tiers)!r})"
                    )

        def teardown(self):
            try:
                self._teardown(failing=sys.exc_info()[0] is not None)
            finally:
                gc.unfreeze()  # what start() froze

        def _teardown(self, failing: bool) -> None:
            """``failing``: a rule already failed, so only clean up."""
            for s in self.sides:
                s.externals.clear()
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
                    for key in list(s.model):
                        got = s.h.store[key]
                        why = S.mismatch(self.device, got, s.model[self._canon(s, key)].expected)
                        del got
                        if why is not None:
                            wrong.append(f"store[{key!r}] came back wrong at teardown: {why}")
            finally:
                for s in sides:
                    s.h.close(check=False)
                gc.collect()
            assert not wrong, "\n".join(wrong)
            if sides:
                assert self.device.bytes_in_use() == self.baseline, (
                    f"after closing every store {self.device.bytes_in_use() - self.baseline:,} "
                    "device bytes are still in use"
                )
                for s in sides:
                    left = files_under(s.h.env.spill_dir)
                    assert not left, f"after close() spill_dir holds {sorted(left)}"

    StoreMachine.__name__ = f"StoreMachine_{adapter.name.replace('-', '_')}"
    return StoreMachine


def _without_dups(spec: Any) -> Any:
    """``spec`` with repeated objects replaced by fresh ones (for stores without dedup)."""
    if isinstance(spec, S.Dup):
        return S.HostSpec("int", 0, spec.index)
    if isinstance(spec, S.Node):
        return S.Node(spec.kind, tuple(_without_dups(c) for c in spec.children))
    return spec


def _dirs_under(path: str) -> list[str]:
    return [os.path.join(r, d) for r, ds, _f in os.walk(path) for d in ds]
