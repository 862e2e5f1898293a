"""A Hypothesis state machine: random operations keep every rule intact."""

from __future__ import annotations

import gc
import os
import tempfile

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from reference_impl import ProxifyHostFile, get_device

NB = 64  # 8 float64
LIMIT = 4 * NB
KEYS = st.sampled_from(list("abcdef"))


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dev = get_device("sim", "1 MiB")
        self.tmp = tempfile.mkdtemp()
        self.store = ProxifyHostFile(
            device=self.dev,
            device_memory_limit=LIMIT,
            memory_limit=3 * NB,
            local_directory=self.tmp,
        )
        self.model: dict[str, float] = {}
        self.order: list[str] = []  # keys, least to most recently used
        self.externals: list = []

    def _arr(self, v: float, n: int = 8):
        a = self.dev.empty(n)
        a.view(np.ndarray)[:] = v
        return a

    def _use(self, k: str) -> None:
        self.order = [x for x in self.order if x != k] + [k]

    @rule(k=KEYS, v=st.integers(0, 100), big=st.booleans())
    def set(self, k, v, big):
        self.store[k] = self._arr(v, 8 * 5 if big else 8)
        self.model[k] = v
        self._use(k)

    @rule(k=KEYS, v=st.integers(0, 100))
    def set_aliases(self, k, v):
        a = self._arr(v, 16)
        self.store[k] = [a[:8], a[8:]]
        self.model[k] = v
        self._use(k)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def get(self, data):
        k = data.draw(st.sampled_from(sorted(self.model)))
        value = self.store[k]
        first = value[0] if isinstance(value, list) else value
        assert float(first[0]) == self.model[k]
        self._use(k)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def delete(self, data):
        k = data.draw(st.sampled_from(sorted(self.model)))
        del self.store[k]
        del self.model[k]
        self.order.remove(k)

    @rule(keep=st.booleans())
    def external(self, keep):
        p = self.store.register_external(self._arr(7))
        if keep:
            self.externals.append(p)

    @precondition(lambda self: self.externals)
    @rule()
    def drop_external(self):
        self.externals.pop(0)

    @rule(n=st.integers(0, 3 * NB))
    def evict(self, n):
        self.store.evict(n)

    @invariant()
    def accounting_matches_device_and_files(self):
        snap = self.store.snapshot()
        assert snap.device_bytes == self.dev.bytes_in_use()
        assert snap.device_bytes <= LIMIT
        files = [os.path.join(self.store.spill_dir, f) for f in os.listdir(self.store.spill_dir)]
        assert snap.disk_bytes == sum(os.path.getsize(f) for f in files)
        assert set(snap.tiers) == set(self.model)
        assert snap.n_externals == len(self.externals)

    @invariant()
    def link_count_is_exact(self):  # the store's fast paths trust it
        index = self.store._index
        assert index.links == index.count_links()

    @invariant()
    def device_keys_are_an_mru_suffix(self):
        snap = self.store.snapshot()
        on_device = [k for k in self.order if snap.tiers[k] == "device"]
        assert snap.lru == on_device
        if on_device:  # every key used after the oldest device key is on device too
            oversized = {
                k for k in self.model if self.store._unit_size(self.store._entries[k]) > LIMIT
            }
            later = self.order[self.order.index(on_device[0]) :]
            assert all(snap.tiers[k] == "device" or k in oversized for k in later)

    def teardown(self):
        spill_dir = self.store.spill_dir
        self.store.close()
        assert not os.path.exists(spill_dir)
        self.externals.clear()
        gc.collect()
        assert self.dev.bytes_in_use() == 0
        os.rmdir(self.tmp)


TestStoreMachine = StoreMachine.TestCase
TestStoreMachine.settings = settings(max_examples=30, stateful_step_count=20, deadline=None)
