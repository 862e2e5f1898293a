"""Rules for externals: values registered with the store but held by the caller."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from .. import strategies as S
from ..model import Held
from .base import KEYS, SIDES, VALUES


class ExternalRules:
    """Clauses of section 7 (externals)."""

    @precondition(lambda self: self.has("store.external") and self.sides)
    @rule(side=SIDES, spec=VALUES)
    def register_external(self, side, spec):
        """Clauses 7.1 and 7.2: externals are counted and spillable."""
        s = self._step(side, "register_external")
        built = self._build(spec)
        proxy = self.adapter.register_external(s.h.store, built.value)
        del built.value, built.leaves
        s.proxies.append(proxy)
        s.model.externals.append(self._held(built, payload=False))

    @precondition(lambda self: self.has("store.external") and any(s.model.keys for s in self.sides))
    @rule(side=SIDES, key=KEYS)
    def register_stored_value(self, side, key):
        """Clause 7.4: an object both stored and external is counted once."""
        s = self._stored(side, key, "register_external")
        if s is None:
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
