"""Rules that remove values: del, pop, popitem, clear, and deleting while iterating."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from .base import KEYS, SIDES, calm, opened


class RemovingRules:
    """Clauses of section 1 (the mapping) and 3.3 (removal frees every tier)."""

    @precondition(opened)
    @rule(side=SIDES, key=KEYS)
    def delete(self, side, key):
        """Clauses 1.1 and 3.3: del frees every byte in every tier; 1.2 for a missing key."""
        s = self._step(side, "delete")
        if key not in s.model:
            return self._missing(s, key, "del")
        with self._window(s, f"del store[{key!r}]"):
            del s.h.store[key]
        s.model.forget(key)
        assert key not in s.h.store

    @precondition(opened)
    @rule(side=SIDES, key=KEYS, with_default=st.booleans())
    def pop(self, side, key, with_default):
        """Clause 1.6: pop returns the value exactly and forgets the key; a missing key is
        KeyError, or the default, changing nothing."""
        s = self._step(side, "pop")
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
        s = self._step(side, "popitem")
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
        s = self._step(side, "clear")
        with self._window(s, "clear()"):
            s.h.store.clear()
        s.model.clear()

    @precondition(lambda self: not self.world and (any(len(s.model.keys) >= 2 for s in self.sides)))
    @rule(side=SIDES, victim=KEYS)
    def iterate_while_mutating(self, side, victim):
        """Clause 1.10: iteration never yields a key twice and never corrupts the store."""
        s = self._stored(side, victim, "contains/len/iter")
        if s is None or len(s.model.keys) < 2:
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
