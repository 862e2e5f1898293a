"""Rules that read and use values: get (with and without a default), looking at keys,
pickling a value, using a returned proxy, writing to a value in place."""

from __future__ import annotations

import pickle

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from .. import strategies as S
from .base import KEYS, SIDES, calm, opened


class ReadingRules:
    """Clauses of sections 2 (values), 5 (recency), 6 (unspill) and 13 (values in use)."""

    @precondition(opened)
    @rule(side=SIDES, key=KEYS)
    def get(self, side, key):
        """Clauses 2.1, 5.1, 6.1, 6.2: exact, refreshes recency, eagerly back on device;
        clauses 1.2 and 1.15 for a missing key."""
        s = self._step(side, "get")
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
    @rule(side=SIDES, key=KEYS, default=st.sampled_from([None, 0, "default"]))
    def get_with_default(self, side, key, default):
        """Clause 1.9: get(missing, d) is d and changes nothing; get(present, d) the value."""
        s = self._step(side, "get")
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
    @rule(side=SIDES, probe=KEYS)
    def look_without_touching(self, side, probe):
        """Clause 5.3: `in`, len, iteration and inspect neither touch recency nor move data."""
        s = self._step(side, "contains/len/iter")
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
    @rule(side=SIDES, key=KEYS)
    def pickle_value(self, side, key):
        """Clauses 5.3 and 13.2: pickling a value round-trips and moves nothing."""
        s = self._stored(side, key, "use of a value")
        if s is None:
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
        k1=KEYS,
        k2=KEYS,
        how=st.sampled_from(["attribute", "arithmetic", "asarray", "function"]),
    )
    def use_refreshes_recency(self, side, k1, k2, how):
        """Clause 5.2: every use of a returned proxy counts as an access."""
        s = self._stored(side, k1)
        if s is None or k2 not in s.model or s.model.canon(k1) == s.model.canon(k2):
            return
        m = s.model
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
    @rule(side=SIDES, key=KEYS)
    def write_in_place(self, side, key):
        """Clause 13.1: a write to a value in use, made on the device, survives its next spill
        and unspill; with ``store.proxy``, a write made wherever the value is (13.6)."""
        s = self._stored(side, key, "use of a value")
        if s is None:
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
