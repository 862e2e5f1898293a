"""A hypothesis state machine for any spilling store, built from an adapter and its capabilities.

Rules cannot take fixtures, so :func:`make_store_machine` builds the class
inside a function (like hypothesis' own database conformance machines).
Capabilities gate rules through preconditions and change the model's
expectations; preconditions read only the model, never the store.

The model holds no reference to device memory the store owns: only seeds,
sizes and recency. The store's numbers are checked against the device ledger.
"""

from __future__ import annotations

import gc
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from .api import evict as adapter_evict
from .harness import LIMIT, StoreHarness, digest, host_bytes, value_digest

SIZE_NAMES = ("tiny", "third", "limit", "over")


def size_of(name: str, tiny: int, limit: int) -> int:
    return {"tiny": tiny, "third": limit // 3, "limit": limit, "over": limit + limit // 4}[name]


sizes = st.tuples(st.sampled_from(SIZE_NAMES), st.integers(1, 512))
seeds = st.integers(0, 2**32 - 1)


def make_store_machine(adapter: Any, caps, device_kind: str, root, *, limit: int = LIMIT):
    caps = frozenset(caps)
    has = caps.__contains__

    class StoreMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.h = StoreHarness(adapter, device_kind, root, device_limit=limit, caps=caps)
            self.store = self.h.store
            self.model: dict[str, tuple[int, int, int]] = {}  # key -> (seed, base nbytes, length)
            self.order: list[str] = []  # recency, least -> most recent
            self.aliased: set[str] = set()  # keys that share an allocation with another key
            self.externals: list[tuple[Any, int, int]] = []  # (proxy, seed, nbytes)
            self.counter = 0

        # ---------------------------------------------------------------- helpers
        def _touch(self, key: str) -> None:
            if key in self.order:
                self.order.remove(key)
            self.order.append(key)

        def _forget(self, key: str) -> None:
            self.model.pop(key, None)
            if key in self.order:
                self.order.remove(key)
            self.aliased.discard(key)

        def _expected(self, key: str) -> str:
            seed, base, length = self.model[key]
            return digest(host_bytes(seed, base)[:length])

        def _oversize(self) -> dict[str, int]:
            return {k: b for k, (_, b, _) in self.model.items() if b > limit}

        def _new_key(self) -> str:
            self.counter += 1
            return f"k{self.counter}"

        def _put(self, key: str, size, seed: int) -> None:
            n = size_of(size[0], size[1], limit)
            value = self.h.value(n, seed)
            self.store[key] = value
            del value
            self._forget(key)
            self.model[key] = (seed, n, n)
            self._touch(key)

        # ---------------------------------------------------------------- rules
        @rule(size=sizes, seed=seeds)
        def put(self, size, seed):
            self._put(self._new_key(), size, seed)

        @precondition(lambda self: self.model)
        @rule(data=st.data(), size=sizes, seed=seeds)
        def overwrite(self, data, size, seed):
            key = data.draw(st.sampled_from(sorted(self.model)), label="key")
            for k in list(self.aliased):  # the old value's aliases keep their allocation
                if k == key:
                    self.aliased.discard(k)
            self._put(key, size, seed)

        @precondition(lambda self: self.model and has("store.alias.dedup"))
        @rule(data=st.data())
        def put_alias(self, data):
            src = data.draw(st.sampled_from(sorted(self.model)), label="src")
            seed, base, length = self.model[src]
            if length < 2:
                return
            value = self.store[src]
            self._touch(src)
            view = value[: length // 2]
            key = self._new_key()
            self.store[key] = view
            del value, view
            self.model[key] = (seed, base, length // 2)
            self._touch(key)
            self.aliased |= {src, key}

        @precondition(lambda self: self.model)
        @rule(data=st.data())
        def get(self, data):
            key = data.draw(st.sampled_from(sorted(self.model)), label="key")
            value = self.store[key]
            self._touch(key)
            got = value_digest(self.h.device, value)
            assert got == self._expected(key), f"{key!r} came back with different bytes"
            del value
            if has("store.unspill.on_access") and self.model[key][1] <= limit:
                tier = self.h.snapshot().tiers.get(key)
                assert tier == "device", f"{key!r} was just used but is in tier {tier!r}"

        @precondition(lambda self: self.model)
        @rule(data=st.data())
        def delete(self, data):
            key = data.draw(st.sampled_from(sorted(self.model)), label="key")
            del self.store[key]
            self._forget(key)
            assert key not in self.store

        @precondition(lambda self: has("store.external"))
        @rule(size=sizes, seed=seeds)
        def register_external(self, size, seed):
            n = size_of(size[0], size[1], limit)
            value = self.h.value(n, seed)
            proxy = adapter.register_external(self.store, value)
            del value
            self.externals.append((proxy, seed, n))

        @precondition(lambda self: self.externals)
        @rule(data=st.data())
        def drop_external(self, data):
            i = data.draw(st.integers(0, len(self.externals) - 1), label="external")
            proxy, seed, n = self.externals.pop(i)
            assert value_digest(self.h.device, proxy) == digest(host_bytes(seed, n)), (
                "external changed"
            )
            del proxy

        @precondition(lambda self: has("store.oom.on_demand"))
        @rule(frac=st.floats(0.3, 1.0))
        def external_pressure(self, frac):
            dev = self.h.device
            n = int(frac * (dev.capacity - self.h.baseline)) // 8 * 8
            outside = dev.empty(n, "uint8")  # must succeed: the store spills on demand
            self.h.check(self.model, held=n, oversize=self._oversize())
            del outside

        @precondition(lambda self: has("store.evict.manual"))
        @rule(frac=st.floats(0.0, 1.5))
        def evict(self, frac):
            n = int(frac * limit)
            before = self.h.snapshot().device_bytes
            freed = adapter_evict(adapter, self.store, n)
            after = self.h.snapshot().device_bytes
            assert before - after == freed, (
                f"evict({n}) said it freed {freed:,}, device bytes {before:,} -> {after:,}"
            )
            if freed < n:
                assert after == 0, (
                    f"evict({n}) freed only {freed:,} while {after:,} device bytes remain"
                )

        @rule()
        def collect(self):
            gc.collect()

        # ---------------------------------------------------------------- invariants
        @invariant()
        def store_invariants(self):
            snap = self.h.check(self.model, oversize=self._oversize())
            if not has("store.lru.strict"):
                return
            tiers = snap.tiers
            if snap.lru is not None:
                # aliased keys share one eviction unit, whose recency is the group's
                expect = [
                    k for k in self.order if tiers.get(k) == "device" and k not in self.aliased
                ]
                got = [k for k in snap.lru if k not in self.aliased]
                assert got == expect, (
                    f"inspect().lru {list(snap.lru)!r} != device keys by recency {expect!r}"
                )
            if self.aliased:
                return  # alias groups move together; the key-level rule does not apply
            big = self._oversize()
            seen_spilled = None
            for k in reversed(self.order):  # most recent first
                if k in big:
                    continue
                if tiers[k] != "device":
                    seen_spilled = k
                elif seen_spilled is not None:
                    raise AssertionError(
                        f"{k!r} is on the device but the more recently used {seen_spilled!r} was "
                        f"spilled: device-resident keys must be a most-recently-used suffix "
                        f"(recency {self.order!r}, tiers {dict(tiers)!r})"
                    )

        def teardown(self):
            self.externals.clear()
            self.store = None
            self.h.close()

    StoreMachine.__name__ = f"StoreMachine_{adapter.name.replace('-', '_')}"
    return StoreMachine
